// SPDX-License-Identifier: Apache-2.0
// The ingest service's writers of streams (docs/ingest-protocol.md, sections 2 and 6): claims and
// the epochs that fence earlier writers, and transaction ids unique across streams.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/grpc_status.h"
#include "isowatch/ingest/service.h"

namespace isowatch::ingest {

using internal::Bump;

grpc::Status IngestService::Claim(grpc::ServerContext* /*context*/, const v1::ClaimRequest* request,
                                  v1::ClaimReply* response) {
  GateEntry gate(*this);
  if (!gate.entered()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is draining: claim again later");
  }
  absl::StatusOr<v1::ClaimReply> reply = ClaimStream(request->stream());
  if (!reply.ok()) return ToGrpcStatus(reply.status());
  *response = *std::move(reply);
  return grpc::Status::OK;
}

absl::StatusOr<v1::ClaimReply> IngestService::ClaimStream(std::string_view stream) {
  RETURN_IF_ERROR(CheckStreamName(stream));
  StreamState* sp = State(stream);
  if (sp == nullptr) return TooManyStreams(stream);
  StreamState& state = *sp;
  // After the batch of the stream in progress, if any: the new epoch fences the next one.
  absl::MutexLock lock(&state.mu);
  Load(state, stream);
  ASSIGN_OR_RETURN(const uint64_t epoch, sink_.ClaimStream(stream));
  if (epoch <= state.epoch) {
    return absl::InternalError(
        fmt::format("the sink handed out epoch {} for stream \"{}\", not above its epoch {}", epoch,
                    stream, state.epoch));
  }
  state.epoch = epoch;
  Bump(counters_.claims);
  v1::ClaimReply reply;
  reply.set_stream(std::string(stream));
  reply.set_epoch(epoch);
  absl::MutexLock durable_lock(&state.durable_mu);
  reply.set_durable_seq(state.durable.seq);
  reply.set_closed(state.durable.closed);
  return reply;
}

absl::Status IngestService::CheckEpoch(const StreamState& state, uint64_t epoch) {
  if (epoch == state.epoch) return absl::OkStatus();
  Bump(counters_.batches_fenced);
  if (options_.events.fenced) options_.events.fenced(state.name, epoch, state.epoch);
  if (epoch < state.epoch && epoch == 0) {
    return absl::FailedPreconditionError(fmt::format(
        "stream \"{}\" has a writer that claimed it (epoch {}): a batch without an epoch is "
        "refused; claim the stream, or use a stream name of its own",
        state.name, state.epoch));
  }
  if (epoch < state.epoch) {
    return absl::FailedPreconditionError(fmt::format(
        "stream \"{}\" was claimed by another writer (epoch {}; this writer's is {}): this "
        "writer is fenced and must stop. Two collectors may be using one stream name",
        state.name, state.epoch, epoch));
  }
  // Epochs only grow, durably: one above the stream's was handed out by a daemon that had more.
  return absl::DataLossError(
      fmt::format("stream \"{}\": epoch {} was never handed out here (the stream's is {}): the "
                  "daemon lost what it had of the stream (its store was replaced or wiped)",
                  state.name, epoch, state.epoch));
}

void IngestService::ReserveIds(const StreamState& state, uint64_t seq,
                               BatchValidation& validation) {
  std::vector<v1::Refusal> refused;
  std::vector<uint32_t> accepted;
  std::vector<uint64_t> fingerprints;
  std::vector<std::string> ids;
  absl::MutexLock lock(&owners_mu_);
  for (size_t i = 0; i < validation.accepted.size(); ++i) {
    std::string& id = validation.ids[i];
    // Reservations first: one ends only after its ids are in the registry.
    std::optional<std::string> owner;
    if (auto it = reserved_ids_.find(id); it != reserved_ids_.end() && it->second != &state) {
      owner = it->second->name;
    } else {
      owner = registry_.OwnerOf(state.name, id);
    }
    if (owner) {
      refused.push_back(MakeRefusal(
          seq, validation.accepted[i], id, v1::ID_ON_OTHER_STREAM,
          fmt::format("transaction id {} was accepted on stream \"{}\": the streams of one daemon "
                      "share one history, so ids must be unique across them",
                      id, *owner)));
      continue;
    }
    reserved_ids_.try_emplace(id, &state);
    accepted.push_back(validation.accepted[i]);
    fingerprints.push_back(validation.fingerprints[i]);
    ids.push_back(std::move(id));
  }
  validation.accepted = std::move(accepted);
  validation.fingerprints = std::move(fingerprints);
  validation.ids = std::move(ids);
  if (!refused.empty()) validation.refusals = MergeRefusals(validation.refusals, refused);
}

void IngestService::ReleaseIds(const StreamState& state, const std::vector<AcceptedId>& ids) {
  if (ids.empty()) return;
  absl::MutexLock lock(&owners_mu_);
  for (const AcceptedId& a : ids) {
    auto it = reserved_ids_.find(a.id);
    if (it != reserved_ids_.end() && it->second == &state) reserved_ids_.erase(it);
  }
}

}  // namespace isowatch::ingest
