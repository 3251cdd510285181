// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/client.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include <fmt/format.h>
#include <grpc/grpc.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "isowatch/ingest/grpc_status.h"
#include "isowatch/ingest/service.h"

namespace isowatch::ingest {
namespace {

int ClampMs(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, 1 << 30));
}

ClientOptions Normalize(ClientOptions options) {
  options.max_in_flight = std::max<size_t>(options.max_in_flight, 1);
  options.initial_backoff = std::max(options.initial_backoff, absl::Milliseconds(1));
  options.max_backoff = std::max(options.max_backoff, options.initial_backoff);
  options.first_seq = std::max<uint64_t>(options.first_seq, 1);
  return options;
}

// A stream that ends with one of these codes is opened again; any other code stops the client.
bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:  // the server ended the stream early
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNAVAILABLE:
      return true;
    default:
      return false;
  }
}

// `d` with up to 20% added at random.
absl::Duration Jitter(absl::Duration d, absl::BitGen& rng) {
  return d * (1.0 + absl::Uniform(rng, 0.0, 0.2));
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeIngestChannel(const std::string& target,
                                                 const ClientOptions& options) {
  const ClientOptions o = Normalize(options);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, ClampMs(o.initial_backoff));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, ClampMs(o.max_backoff));
  if (!o.auth.server_name.empty()) args.SetSslTargetNameOverride(o.auth.server_name);
  return grpc::CreateCustomChannel(
      target,
      o.auth.credentials != nullptr ? o.auth.credentials : grpc::InsecureChannelCredentials(),
      args);
}

IngestClient::IngestClient(const std::string& target, std::string stream, ClientOptions options)
    : target_(target),
      stream_(std::move(stream)),
      options_(Normalize(std::move(options))),
      channel_(MakeIngestChannel(target, options_)),
      stub_(v1::Ingest::NewStub(channel_)),
      next_seq_(options_.first_seq),
      durable_seq_(options_.first_seq - 1) {
  thread_ = std::thread([this] { Run(); });
}

IngestClient::~IngestClient() { StopThreads(); }

void IngestClient::StopThreads() {
  absl::MutexLock stop_lock(&stop_mu_);
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

bool IngestClient::HasRoom() const { return unacked_.size() < options_.max_in_flight; }

void IngestClient::Fail(absl::Status status) {
  if (fatal_.ok()) fatal_ = std::move(status);
  broken_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

absl::Status IngestClient::Enqueue(std::shared_ptr<v1::IngestBatch> batch, absl::Time deadline) {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return HasRoom() || !fatal_.ok() || stop_;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(
        fmt::format("stream \"{}\": {} batches unacknowledged for {}", stream_, unacked_.size(),
                    absl::FormatDuration(options_.deadline)));
  }
  if (!fatal_.ok()) return fatal_;
  if (stop_) return absl::FailedPreconditionError("the ingest client is stopped");
  batch->set_stream(stream_);
  batch->set_seq(next_seq_);
  unacked_.push_back(Pending{next_seq_, std::move(batch)});
  ++next_seq_;
  return absl::OkStatus();
}

absl::Status IngestClient::Send(v1::IngestBatch batch) {
  return Send(std::make_shared<v1::IngestBatch>(std::move(batch)));
}

absl::Status IngestClient::Send(std::shared_ptr<v1::IngestBatch> batch) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("Send after Close");
  return Enqueue(std::move(batch), absl::Now() + options_.deadline);
}

absl::StatusOr<std::vector<v1::Refusal>> IngestClient::Close() {
  auto end = std::make_shared<v1::IngestBatch>();
  end->set_end_of_stream(true);
  return Finish(std::move(end));
}

absl::StatusOr<std::vector<v1::Refusal>> IngestClient::Detach() { return Finish(nullptr); }

absl::StatusOr<std::vector<v1::Refusal>> IngestClient::Finish(
    std::shared_ptr<v1::IngestBatch> last) {
  const absl::Time deadline = absl::Now() + options_.deadline;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("Close or Detach called twice");
    closed_ = true;
    if (last != nullptr) status = Enqueue(std::move(last), deadline);
    if (status.ok()) {
      closing_ = true;
      auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return finished_ || !fatal_.ok() || stop_;
      };
      if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
        status = absl::DeadlineExceededError(
            fmt::format("stream \"{}\": {} batches still unacknowledged after {}", stream_,
                        unacked_.size(), absl::FormatDuration(options_.deadline)));
      } else if (!fatal_.ok()) {
        status = fatal_;
      }
    }
  }
  StopThreads();
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  return std::move(refusals_);
}

bool IngestClient::Connect() {
  if (options_.connect_timeout <= absl::ZeroDuration()) return true;
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  while (true) {
    // In short waits, so that StopThreads is not held up.
    const absl::Time until = std::min(deadline, absl::Now() + absl::Milliseconds(100));
    if (channel_->WaitForConnected(absl::ToChronoTime(until))) return true;
    absl::MutexLock lock(&mu_);
    if (stop_) return false;
    if (absl::Now() >= deadline) {
      Fail(absl::UnavailableError(fmt::format("stream \"{}\": cannot connect to {} within {}",
                                              stream_, target_,
                                              absl::FormatDuration(options_.connect_timeout))));
      return false;
    }
  }
}

bool IngestClient::Claim() {
  absl::BitGen rng;
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    grpc::ClientContext context;
    // In short calls, so that StopThreads is not held up for long.
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return false;
      context_ = &context;
    }
    v1::ClaimRequest request;
    request.set_stream(stream_);
    v1::ClaimReply reply;
    const grpc::Status status = stub_->Claim(&context, request, &reply);
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
    if (stop_) return false;
    if (status.ok()) {
      epoch_ = reply.epoch();
      return true;
    }
    if (!Retryable(status.error_code())) {
      Fail(absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        fmt::format("stream \"{}\": claiming the stream failed: {}", stream_,
                                    status.error_message())));
      return false;
    }
    // Like a broken stream: again after a backoff, for as long as the client runs.
    ++reconnects_;
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), Jitter(backoff, rng));
    if (stop_) return false;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void IngestClient::Run() {
  if (!Connect() || !Claim()) return;
  std::string epoch_text;
  {
    absl::MutexLock lock(&mu_);
    epoch_text = fmt::format("{}", epoch_);
  }
  absl::BitGen rng;
  absl::Duration backoff = options_.initial_backoff;
  bool first = true;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !fatal_.ok() || !unacked_.empty() || closing_;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_ || !fatal_.ok()) return;
      if (unacked_.empty()) {
        // Detached with everything acknowledged: nothing left to send.
        finished_ = true;
        return;
      }
      if (!first) ++reconnects_;
      first = false;
      broken_ = false;
      progressed_ = false;
      next_write_ = unacked_.front().seq;
    }
    grpc::ClientContext context;
    context.AddMetadata(kEpochMetadataKey, epoch_text);
    std::unique_ptr<ReaderWriter> stream = stub_->Stream(&context);
    {
      absl::MutexLock lock(&mu_);
      context_ = &context;
      if (stop_) context.TryCancel();
    }
    std::thread reader([this, &stream] { ReadLoop(*stream); });
    const bool done = WriteLoop(*stream);
    if (done) stream->WritesDone();
    reader.join();
    const grpc::Status status = stream->Finish();

    absl::MutexLock lock(&mu_);
    context_ = nullptr;
    if (done) {
      finished_ = true;
      return;
    }
    if (stop_ || !fatal_.ok()) return;
    if (!Retryable(status.error_code())) {
      Fail(absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        fmt::format("stream \"{}\": the server ended the stream: {}", stream_,
                                    status.error_message())));
      return;
    }
    if (progressed_) backoff = options_.initial_backoff;
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), Jitter(backoff, rng));
    if (stop_) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

bool IngestClient::WriteLoop(ReaderWriter& stream) {
  while (true) {
    std::shared_ptr<const v1::IngestBatch> next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return broken_ || stop_ || !fatal_.ok() || (closing_ && unacked_.empty()) ||
               (!unacked_.empty() && next_write_ <= unacked_.back().seq);
      };
      mu_.Await(absl::Condition(&ready));
      if (broken_ || stop_ || !fatal_.ok()) return false;
      if (unacked_.empty()) return true;  // closing, and everything is acknowledged
      next_write_ = std::max(next_write_, unacked_.front().seq);
      next = unacked_[next_write_ - unacked_.front().seq].batch;
      ++next_write_;
    }
    if (!stream.Write(*next)) {
      absl::MutexLock lock(&mu_);
      broken_ = true;
      return false;
    }
  }
}

void IngestClient::ReadLoop(ReaderWriter& stream) {
  v1::IngestAck ack;
  while (stream.Read(&ack)) {
    absl::MutexLock lock(&mu_);
    progressed_ = true;
    bool gap = false;
    for (v1::Refusal& r : *ack.mutable_refusals()) {
      if (r.reason() == v1::SEQUENCE_GAP) {
        gap = true;
        continue;
      }
      ++refusal_count_;
      refusals_.push_back(std::move(r));
    }
    if (ack.duplicate()) ++duplicates_;
    if (ack.durable_seq() < durable_seq_) {
      Fail(absl::DataLossError(
          fmt::format("stream \"{}\": the server's durable seq went back from {} to {}: it lost "
                      "acknowledged batches",
                      stream_, durable_seq_, ack.durable_seq())));
      break;
    }
    durable_seq_ = ack.durable_seq();
    while (!unacked_.empty() && unacked_.front().seq <= durable_seq_) unacked_.pop_front();
    if (gap) {
      const uint64_t oldest = unacked_.empty() ? next_seq_ : unacked_.front().seq;
      if (durable_seq_ + 1 < oldest) {
        Fail(absl::DataLossError(
            fmt::format("stream \"{}\": the server wants batch {} next, but batches before {} were "
                        "acknowledged earlier and are no longer held",
                        stream_, durable_seq_ + 1, oldest)));
        break;
      }
      // Send again from the oldest batch held, on a new connection.
      broken_ = true;
      if (context_ != nullptr) context_->TryCancel();
      break;
    }
  }
  absl::MutexLock lock(&mu_);
  broken_ = true;
}

uint64_t IngestClient::durable_seq() const {
  absl::MutexLock lock(&mu_);
  return durable_seq_;
}

uint64_t IngestClient::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

uint64_t IngestClient::next_seq() const {
  absl::MutexLock lock(&mu_);
  return next_seq_;
}

uint64_t IngestClient::reconnects() const {
  absl::MutexLock lock(&mu_);
  return reconnects_;
}

absl::Status IngestClient::status() const {
  absl::MutexLock lock(&mu_);
  return fatal_;
}

uint64_t IngestClient::refusals() const {
  absl::MutexLock lock(&mu_);
  return refusal_count_;
}

uint64_t IngestClient::duplicates() const {
  absl::MutexLock lock(&mu_);
  return duplicates_;
}

std::vector<v1::Refusal> IngestClient::TakeRefusals() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Refusal> out = std::move(refusals_);
  refusals_.clear();
  return out;
}

absl::StatusOr<v1::ClaimReply> ClaimStream(v1::Ingest::StubInterface& stub, std::string_view stream,
                                           const ClientOptions& options) {
  const ClientOptions o = Normalize(options);
  const absl::Time deadline = absl::Now() + o.deadline;
  absl::BitGen rng;
  absl::Duration backoff = o.initial_backoff;
  v1::ClaimRequest request;
  request.set_stream(std::string(stream));
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::ClaimReply reply;
    const grpc::Status status = stub.Claim(&context, request, &reply);
    if (status.ok()) return reply;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return FromGrpcStatus(status);
    const absl::Duration wait = Jitter(backoff, rng);
    backoff = std::min(backoff * 2, o.max_backoff);
    if (absl::Now() + wait >= deadline) return FromGrpcStatus(status);
    absl::SleepFor(wait);
  }
}

absl::StatusOr<v1::IngestAck> PushBatch(v1::Ingest::StubInterface& stub,
                                        const v1::IngestBatch& batch, const ClientOptions& options,
                                        PushStats* stats, uint64_t epoch) {
  const ClientOptions o = Normalize(options);
  const absl::Time deadline = absl::Now() + o.deadline;
  absl::BitGen rng;
  absl::Duration backoff = o.initial_backoff;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    if (epoch != 0) context.AddMetadata(kEpochMetadataKey, fmt::format("{}", epoch));
    v1::IngestAck ack;
    const grpc::Status status = stub.Push(&context, batch, &ack);
    if (stats != nullptr) ++stats->attempts;
    if (status.ok()) return ack;
    absl::Duration wait;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      if (stats != nullptr) ++stats->resource_exhausted;
      wait = o.initial_backoff;
      const auto& trailers = context.GetServerTrailingMetadata();
      if (auto it = trailers.find(kRetryAfterMetadataKey); it != trailers.end()) {
        int64_t ms = 0;
        const char* begin = it->second.data();
        const char* end = begin + it->second.size();
        if (auto [ptr, ec] = std::from_chars(begin, end, ms); ec == std::errc() && ptr == end) {
          wait = absl::Milliseconds(std::clamp<int64_t>(ms, 1, 3'600'000));
        }
      }
    } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      wait = Jitter(backoff, rng);
      backoff = std::min(backoff * 2, o.max_backoff);
    } else {
      return FromGrpcStatus(status);
    }
    if (absl::Now() + wait >= deadline) return FromGrpcStatus(status);
    absl::SleepFor(wait);
  }
}

}  // namespace isowatch::ingest
