// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/service.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <grpc/grpc.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/grpc_status.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/txn_fingerprint.h"

namespace isowatch::ingest {
namespace {

// The service name the health service reports besides "".
constexpr char kIngestServiceName[] = "isowatch.v1.Ingest";
// What the server reads beyond the batch byte limit, so that a batch a little over the limit
// reaches validation and is refused in an ack.
constexpr uint64_t kMessageSlackBytes = uint64_t{1} << 20;

void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

history::Timestamp FromProto(const v1::Timestamp& ts) { return {ts.physical(), ts.logical()}; }

}  // namespace

IngestService::GateEntry::GateEntry(IngestService& service) : service_(service) {
  absl::MutexLock lock(&service_.gate_mu_);
  entered_ = !service_.draining_;
  if (entered_) ++service_.in_progress_;
}

IngestService::GateEntry::~GateEntry() {
  if (!entered_) return;
  absl::MutexLock lock(&service_.gate_mu_);
  --service_.in_progress_;
}

IngestService::IngestService(BatchSink& sink, IdRegistry& registry, IngestServiceOptions options)
    : sink_(sink), registry_(registry), options_(options) {}

IngestService::~IngestService() = default;

bool IngestService::Drain(absl::Time deadline) {
  absl::MutexLock lock(&gate_mu_);
  draining_ = true;
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate_mu_) { return in_progress_ == 0; };
  return gate_mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

IngestService::StreamState& IngestService::State(std::string_view stream) {
  absl::MutexLock lock(&streams_mu_);
  auto [it, inserted] = streams_.try_emplace(std::string(stream));
  if (inserted) it->second = std::make_unique<StreamState>();
  return *it->second;
}

grpc::Status IngestService::Stream(
    grpc::ServerContext* /*context*/,
    grpc::ServerReaderWriter<v1::IngestAck, v1::IngestBatch>* stream) {
  while (true) {
    v1::IngestBatch batch;
    if (!stream->Read(&batch)) return grpc::Status::OK;
    GateEntry gate(*this);
    if (!gate.entered()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the server is draining: reconnect and send the batch again");
    }
    absl::StatusOr<v1::IngestAck> ack = Apply(std::move(batch), SubmitMode::kWait);
    if (!ack.ok()) return ToGrpcStatus(ack.status());
    if (!stream->Write(*ack)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
  }
}

grpc::Status IngestService::Push(grpc::ServerContext* context, const v1::IngestBatch* request,
                                 v1::IngestAck* response) {
  GateEntry gate(*this);
  if (!gate.entered()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is draining: send the batch again later");
  }
  absl::StatusOr<v1::IngestAck> ack = Apply(*request, SubmitMode::kNoWait);
  if (!ack.ok()) {
    if (ack.status().code() != absl::StatusCode::kResourceExhausted) {
      return ToGrpcStatus(ack.status());
    }
    Bump(counters_.push_rejected_busy);
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.retry_after));
    context->AddTrailingMetadata(kRetryAfterMetadataKey, fmt::format("{}", ms));
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        fmt::format("{}; retry after {} ms (trailing metadata {})",
                    std::string(ack.status().message()), ms, kRetryAfterMetadataKey));
  }
  *response = *std::move(ack);
  return grpc::Status::OK;
}

absl::StatusOr<v1::IngestAck> IngestService::Apply(v1::IngestBatch batch, SubmitMode mode) {
  Bump(counters_.batches_received);
  RETURN_IF_ERROR(CheckStreamName(batch.stream()));
  if (batch.seq() == 0) {
    return absl::InvalidArgumentError("a batch with seq 0: the first batch of a stream has seq 1");
  }
  StreamState& state = State(batch.stream());
  if (mode == SubmitMode::kWait) {
    state.mu.Lock();
  } else if (!state.mu.TryLock()) {
    return absl::ResourceExhaustedError(
        fmt::format("another batch of stream \"{}\" is in progress", batch.stream()));
  }
  absl::StatusOr<v1::IngestAck> ack = ApplyLocked(state, std::move(batch), mode);
  state.mu.Unlock();
  return ack;
}

absl::StatusOr<v1::IngestAck> IngestService::ApplyLocked(StreamState& state, v1::IngestBatch batch,
                                                         SubmitMode mode) {
  if (!state.loaded) {
    StreamPosition position = sink_.Position(batch.stream());
    state.durable_seq = position.durable_seq;
    state.watermark = position.watermark;
    state.closed = position.closed;
    state.loaded = true;
  }
  const uint64_t seq = batch.seq();
  v1::IngestAck ack;
  ack.set_stream(batch.stream());
  ack.set_durable_seq(state.durable_seq);
  if (seq <= state.durable_seq) {
    Bump(counters_.batches_duplicate);
    ack.set_duplicate(true);
    return ack;
  }
  if (seq > state.durable_seq + 1) {
    *ack.add_refusals() =
        MakeBatchRefusal(seq, v1::SEQUENCE_GAP,
                         fmt::format("batch {} after durable batch {}: send batch {} next", seq,
                                     state.durable_seq, state.durable_seq + 1));
    CountRefusals(ack);
    return ack;
  }
  if (state.closed) {
    *ack.add_refusals() = MakeBatchRefusal(
        seq, v1::STREAM_CLOSED,
        fmt::format("stream closed by end_of_stream at batch {}", state.durable_seq));
    CountRefusals(ack);
    return ack;
  }

  BatchValidation validation = ValidateBatch(batch, options_.limits, registry_);
  const auto received = static_cast<uint64_t>(batch.txns_size());
  if (validation.whole_batch_refused) {
    batch.clear_txns();
    batch.clear_header();
    batch.clear_watermark();
    batch.set_end_of_stream(false);
  }
  bool watermark_regressed = false;
  if (batch.has_watermark() && state.watermark && FromProto(batch.watermark()) < *state.watermark) {
    batch.clear_watermark();
    watermark_regressed = true;
  }
  std::optional<history::Timestamp> watermark;
  if (batch.has_watermark()) watermark = FromProto(batch.watermark());
  const bool end_of_stream = batch.end_of_stream();
  // What Record needs once the batch is durable.
  std::vector<std::string> ids;
  ids.reserve(validation.accepted.size());
  for (uint32_t index : validation.accepted) ids.push_back(TxnIdString(batch.txns(index)));
  std::vector<uint64_t> fingerprints = validation.fingerprints;
  for (const v1::Refusal& r : validation.refusals) *ack.add_refusals() = r;
  const std::string stream = batch.stream();

  ValidatedBatch validated;
  validated.batch = std::move(batch);
  validated.accepted = std::move(validation.accepted);
  validated.fingerprints = std::move(validation.fingerprints);
  validated.refusals = std::move(validation.refusals);
  validated.whole_batch_refused = validation.whole_batch_refused;
  absl::StatusOr<uint64_t> durable = mode == SubmitMode::kWait
                                         ? sink_.Submit(std::move(validated))
                                         : sink_.TrySubmit(std::move(validated));
  if (!durable.ok()) return durable.status();
  if (*durable < seq) {
    return absl::InternalError(
        fmt::format("the sink made batch {} of stream \"{}\" durable but reports durable seq {}",
                    seq, stream, *durable));
  }
  for (size_t i = 0; i < ids.size(); ++i) registry_.Record(stream, ids[i], fingerprints[i]);
  state.durable_seq = *durable;
  if (watermark && (!state.watermark || *watermark > *state.watermark)) state.watermark = watermark;
  if (end_of_stream) state.closed = true;

  Bump(counters_.batches_applied);
  Bump(counters_.transactions_received, received);
  Bump(counters_.transactions_accepted, ids.size());
  Bump(counters_.transactions_duplicate, validation.duplicates);
  if (watermark_regressed) Bump(counters_.watermark_regressions);
  CountRefusals(ack);
  ack.set_durable_seq(state.durable_seq);
  return ack;
}

void IngestService::CountRefusals(const v1::IngestAck& ack) {
  for (const v1::Refusal& r : ack.refusals()) {
    const int reason = r.reason();
    if (reason >= 0 && reason < kRefusalReasonCount) Bump(counters_.refusals[reason]);
    if (r.whole_batch()) Bump(counters_.batches_refused);
  }
}

std::string JoinHostPort(std::string_view host, int port) {
  if (host.find(':') != std::string_view::npos && !host.starts_with('[')) {
    return fmt::format("[{}]:{}", host, port);
  }
  return fmt::format("{}:{}", host, port);
}

IngestServer::~IngestServer() { Shutdown(absl::Now()); }

std::string IngestServer::address() const { return JoinHostPort(host_, port_); }

bool IngestServer::Drain(absl::Time deadline) {
  if (server_ == nullptr) return true;
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  return service_->Drain(deadline);
}

void IngestServer::Shutdown(absl::Time deadline) {
  absl::MutexLock lock(&shutdown_mu_);
  if (stopped_ || server_ == nullptr) return;
  Drain(deadline);
  // Nothing is in progress any more (or the deadline has passed): what is left open are streams
  // waiting for their next batch, which only a cancellation ends.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  stopped_ = true;
}

absl::StatusOr<std::unique_ptr<IngestServer>> StartIngestServer(const IngestServerOptions& options,
                                                                BatchSink& sink,
                                                                IdRegistry* registry) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        fmt::format("grpc port {} is out of range (0 to 65535)", options.port));
  }
  if (options.host.empty()) return absl::InvalidArgumentError("an empty grpc host");
  const ValidationLimits& limits = options.service.limits;
  if (limits.max_batch_txns == 0 || limits.max_batch_bytes == 0 || limits.max_ops_per_txn == 0) {
    return absl::InvalidArgumentError("ingest limits must be positive");
  }
  if (limits.max_batch_bytes > uint64_t{INT_MAX} - kMessageSlackBytes) {
    return absl::InvalidArgumentError(fmt::format("max batch bytes {} is over the limit of {}",
                                                  limits.max_batch_bytes,
                                                  uint64_t{INT_MAX} - kMessageSlackBytes));
  }

  std::unique_ptr<IngestServer> server(new IngestServer());
  server->host_ = options.host;
  if (registry == nullptr) {
    server->owned_registry_ = std::make_unique<MemoryIdRegistry>();
    registry = server->owned_registry_.get();
  }
  server->service_ = std::make_unique<IngestService>(sink, *registry, options.service);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(JoinHostPort(options.host, options.port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(limits.max_batch_bytes + kMessageSlackBytes));
  // A port already taken is an error, not a second listener sharing it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        fmt::format("cannot listen for gRPC on {}", JoinHostPort(options.host, options.port)));
  }
  server->port_ = port;
  if (grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService()) {
    health->SetServingStatus(kIngestServiceName, true);
  }
  return server;
}

}  // namespace isowatch::ingest
