// SPDX-License-Identifier: Apache-2.0
#include "collectors/common/stream_resume.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/channel.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/client.h"
#include "isowatch/v1/ingest.grpc.pb.h"

namespace isowatch::collectors {
namespace {

struct Probe {
  uint64_t durable_seq = 0;
  bool known = false;  // the daemon had the stream before
};

// Learns the stream's durable seq by pushing its first batch (the header) again: a daemon that
// has the stream answers it as a duplicate; one that has not takes it as batch 1.
absl::StatusOr<Probe> ProbeStream(const DaemonOptions& o, const std::string& stream,
                                  const v1::Header& header) {
  ingest::ClientOptions co;
  co.auth = o.auth;
  std::shared_ptr<grpc::Channel> channel = ingest::MakeIngestChannel(o.target, co);
  std::unique_ptr<v1::Ingest::Stub> stub = v1::Ingest::NewStub(channel);
  ASSIGN_OR_RETURN(const v1::ClaimReply claim, ingest::ClaimStream(*stub, stream, co));
  v1::IngestBatch batch;
  batch.set_stream(stream);
  batch.set_seq(1);
  *batch.mutable_header() = header;
  ASSIGN_OR_RETURN(v1::IngestAck ack,
                   ingest::PushBatch(*stub, batch, co, /*stats=*/nullptr, claim.epoch()));
  for (const v1::Refusal& r : ack.refusals()) {
    return absl::FailedPreconditionError(
        fmt::format("isowatchd refused stream \"{}\": {}", stream, r.detail()));
  }
  return Probe{.durable_seq = ack.durable_seq(), .known = ack.duplicate()};
}

}  // namespace

absl::StatusOr<ResumedStream> ResumeStream(const DaemonOptions& options, const std::string& stream,
                                           const v1::Header& header, const StateFile& file) {
  if (options.state_dir.empty()) return absl::InvalidArgumentError("no state directory");
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        fmt::format("cannot create {}: {}", options.state_dir, ec.message()));
  }
  ResumedStream out;
  ASSIGN_OR_RETURN(out.lock, StateDirLock::Acquire(options.state_dir));
  ASSIGN_OR_RETURN(std::optional<CollectorState> loaded, file.Load());
  if (loaded && loaded->stream != stream) {
    return absl::FailedPreconditionError(fmt::format(
        "{} belongs to stream \"{}\", not \"{}\": give each stream its own state directory",
        options.state_dir, loaded->stream, stream));
  }
  ASSIGN_OR_RETURN(const Probe probe, ProbeStream(options, stream, header));
  if (!loaded && probe.known) {
    return absl::FailedPreconditionError(fmt::format(
        "isowatchd already has stream \"{}\" ({} batches) but {} holds no state for it: use a "
        "new --stream, or the state directory of the collector that sent it",
        stream, probe.durable_seq, options.state_dir));
  }
  if (loaded && !probe.known) {
    return absl::FailedPreconditionError(fmt::format(
        "{} says stream \"{}\" was sent to isowatchd, but isowatchd does not have it (a new "
        "store?): start a new stream with a new state directory",
        options.state_dir, stream));
  }
  out.resumed = loaded.has_value();
  out.durable_seq = probe.durable_seq;
  out.state = loaded ? *std::move(loaded) : CollectorState{.stream = stream};
  out.state.durable.resize(file.position_size(), 0);
  // The batches the last run sent that the daemon made durable are handled; the others are
  // built again and sent under new seqs.
  out.state.ConfirmUpTo(probe.durable_seq);
  out.state.in_flight.clear();
  ++out.state.run;
  RETURN_IF_ERROR(file.Save(out.state));
  return out;
}

}  // namespace isowatch::collectors
