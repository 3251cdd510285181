// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/service.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <grpc/grpc.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/slice.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/arena_batch.h"
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

using internal::Bump;

history::Timestamp FromProto(const v1::Timestamp& ts) { return {ts.physical(), ts.logical()}; }

// The indices of `refusals`' transactions, sorted.
std::vector<uint32_t> RefusedIndices(const std::vector<v1::Refusal>& refusals) {
  std::vector<uint32_t> out;
  out.reserve(refusals.size());
  for (const v1::Refusal& r : refusals) out.push_back(r.index());
  std::sort(out.begin(), out.end());
  return out;
}

bool Contains(const std::vector<uint32_t>& sorted, uint32_t index) {
  return std::binary_search(sorted.begin(), sorted.end(), index);
}

// The writer's epoch in the call's metadata (kEpochMetadataKey): 0 when absent.
// InvalidArgument when it is not a decimal number.
absl::StatusOr<uint64_t> EpochOf(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kEpochMetadataKey);
  if (it == metadata.end()) return 0;
  uint64_t epoch = 0;
  const char* begin = it->second.data();
  const char* end = begin + it->second.size();
  if (auto [ptr, ec] = std::from_chars(begin, end, epoch); ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(
        fmt::format("metadata {}: not a decimal number", kEpochMetadataKey));
  }
  return epoch;
}

// The bytes of a received message in one piece, or nullopt if gRPC cannot give them.
std::optional<std::string> Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return std::nullopt;
  std::string out;
  out.reserve(buffer.Length());
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

}  // namespace

// What Prepare hands to the sink, and what the service needs once the batch is durable.
struct IngestService::Prepared {
  ValidatedBatch validated;
  v1::IngestAck ack;  // stream and refusals; durable_seq is set by Finish
  uint64_t seq = 0;
  std::vector<AcceptedId> ids;  // of the accepted transactions, in batch order
  Progress next;                // the stream once the batch is durable
  uint64_t received = 0;
  uint64_t accepted = 0;
  uint64_t duplicates = 0;
  std::optional<history::Timestamp> regressed_watermark;  // ignored: below the stream's
};

// The registry as the validation of a stream's next batch sees it: with the accepted ids of the
// stream's batches still waiting for their sync.
class IngestService::PendingIdView final : public IdRegistry {
 public:
  PendingIdView(IdRegistry& base, StreamState& state) : base_(base), state_(state) {}

  Outcome Check(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) override {
    {
      absl::MutexLock lock(&state_.durable_mu);
      auto it = state_.pending_ids.find(absl::string_view(txn_id.data(), txn_id.size()));
      if (it != state_.pending_ids.end()) {
        return it->second == fingerprint ? Outcome::kDuplicate : Outcome::kConflict;
      }
    }
    return base_.Check(stream, txn_id, fingerprint);
  }

  void Record(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) override {
    base_.Record(stream, txn_id, fingerprint);
  }

 private:
  IdRegistry& base_;
  StreamState& state_;
};

// One streaming RPC's acks, in the order of its batches. Shared with the sink's callbacks.
struct IngestService::AckPipe {
  struct Entry {
    bool ready = false;
    bool async = false;  // still waiting for the sink when ApplyAsync returned
    bool gated = false;  // holds a place in the drain gate until its ack is written
    absl::StatusOr<v1::IngestAck> ack;
  };
  absl::Mutex mu;
  std::deque<std::shared_ptr<Entry>> entries ABSL_GUARDED_BY(mu);  // read, not yet written
  bool reader_done ABSL_GUARDED_BY(mu) = false;
  bool failed ABSL_GUARDED_BY(mu) = false;  // an error was met or a write failed
  grpc::Status status ABSL_GUARDED_BY(mu);  // what the RPC ends with

  void Resolve(const std::shared_ptr<Entry>& entry, absl::StatusOr<v1::IngestAck> ack) {
    absl::MutexLock lock(&mu);
    entry->ack = std::move(ack);
    entry->ready = true;
  }
};

IngestService::GateEntry::GateEntry(IngestService& service) : service_(service) {
  entered_ = service_.EnterGate();
}

IngestService::GateEntry::~GateEntry() {
  if (entered_) service_.LeaveGate();
}

bool IngestService::EnterGate() {
  absl::MutexLock lock(&gate_mu_);
  if (draining_) return false;
  ++in_progress_;
  return true;
}

void IngestService::LeaveGate() {
  absl::MutexLock lock(&gate_mu_);
  --in_progress_;
}

IngestService::IngestService(BatchSink& sink, IdRegistry& registry, IngestServiceOptions options)
    : sink_(sink), registry_(registry), options_(std::move(options)) {
  {
    absl::MutexLock lock(&streams_mu_);
    known_streams_.insert(options_.known_streams.begin(), options_.known_streams.end());
    stream_count_ = known_streams_.size();
  }
  // Ingest.Stream (method 0) reads its batches as bytes: StreamBytes parses them itself, once,
  // onto an arena, and keeps the bytes for the sink.
  MarkMethodStreamed(
      0, new grpc::internal::BidiStreamingHandler<IngestService, grpc::ByteBuffer, v1::IngestAck>(
             [](IngestService* service, grpc::ServerContext* context,
                grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream) {
               return service->StreamBytes(context, stream);
             },
             this));
  MarkMethodStreamed(1,
                     new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, v1::IngestAck>(
                         [this](grpc::ServerContext* context,
                                grpc::ServerUnaryStreamer<grpc::ByteBuffer, v1::IngestAck>* call) {
                           return PushBytes(context, call);
                         }));
}

IngestService::~IngestService() = default;

bool IngestService::Drain(absl::Time deadline) {
  absl::MutexLock lock(&gate_mu_);
  draining_ = true;
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate_mu_) { return in_progress_ == 0; };
  return gate_mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

IngestService::StreamState* IngestService::State(std::string_view stream) {
  std::string name(stream);
  absl::MutexLock lock(&streams_mu_);
  if (auto it = streams_.find(name); it != streams_.end()) return it->second.get();
  const bool known = known_streams_.contains(name);
  if (!known && options_.max_streams > 0 && stream_count_ >= options_.max_streams) {
    Bump(counters_.streams_refused);
    return nullptr;
  }
  if (!known) ++stream_count_;
  auto& state = streams_[name];
  state = std::make_unique<StreamState>(std::move(name));
  return state.get();
}

absl::Status IngestService::TooManyStreams(std::string_view stream) const {
  return absl::FailedPreconditionError(
      fmt::format("stream \"{}\" refused: the daemon takes at most {} streams "
                  "(ingest.max_streams) and has that many",
                  stream, options_.max_streams));
}

grpc::Status IngestService::StreamBytes(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream) {
  const size_t window = std::max<size_t>(options_.max_pipelined_batches, 1);
  const absl::StatusOr<uint64_t> epoch = EpochOf(*context);
  if (!epoch.ok()) return ToGrpcStatus(epoch.status());
  auto pipe = std::make_shared<AckPipe>();
  using Entry = AckPipe::Entry;

  // Writes the acks in order as they become ready; after a failure, only waits for the rest.
  std::thread writer([this, pipe, stream, context] {
    while (true) {
      std::shared_ptr<Entry> entry;
      bool write = false;
      {
        absl::MutexLock lock(&pipe->mu);
        auto next = [&pipe]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pipe->mu) {
          return pipe->entries.empty() ? pipe->reader_done : pipe->entries.front()->ready;
        };
        pipe->mu.Await(absl::Condition(&next));
        if (pipe->entries.empty()) return;
        entry = pipe->entries.front();
        if (!pipe->failed && !entry->ack.ok()) {
          pipe->failed = true;
          pipe->status = ToGrpcStatus(entry->ack.status());
          // The handler may be waiting for a batch the collector will not send before its acks
          // (an error found while reading, the handler sees itself).
          if (entry->async) context->TryCancel();
        }
        write = !pipe->failed;
      }
      bool written = true;
      if (write) written = stream->Write(*entry->ack);
      if (entry->gated) LeaveGate();
      absl::MutexLock lock(&pipe->mu);
      pipe->entries.pop_front();
      if (!written && !pipe->failed) {
        pipe->failed = true;
        pipe->status = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        context->TryCancel();
      }
    }
  });

  while (true) {
    {
      absl::MutexLock lock(&pipe->mu);
      auto room = [&pipe, window]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pipe->mu) {
        return pipe->failed || pipe->entries.size() < window;
      };
      pipe->mu.Await(absl::Condition(&room));
      if (pipe->failed) break;
    }
    grpc::ByteBuffer buffer;
    if (!stream->Read(&buffer)) break;
    auto entry = std::make_shared<Entry>();
    std::optional<std::string> wire = Flatten(buffer);
    buffer.Clear();
    std::shared_ptr<v1::IngestBatch> batch;
    if (wire) batch = ParseArenaBatch(*wire);
    if (batch == nullptr) {
      entry->ack = absl::InvalidArgumentError("a message that is not an isowatch.v1.IngestBatch");
      entry->ready = true;
      absl::MutexLock lock(&pipe->mu);
      pipe->entries.push_back(std::move(entry));
      break;
    }
    if (!EnterGate()) {
      entry->ack =
          absl::UnavailableError("the server is draining: reconnect and send the batch again");
      entry->ready = true;
      absl::MutexLock lock(&pipe->mu);
      pipe->entries.push_back(std::move(entry));
      break;
    }
    entry->gated = true;
    {
      absl::MutexLock lock(&pipe->mu);
      pipe->entries.push_back(entry);
    }
    bool error = false;
    ApplyAsync(
        std::move(batch), *std::move(wire), *epoch,
        [pipe, entry](absl::StatusOr<v1::IngestAck> ack) { pipe->Resolve(entry, std::move(ack)); });
    {
      // A batch refused synchronously (bad name, seq 0, in progress elsewhere) ends the RPC with
      // its error: stop reading, let the writer flush the acks before it.
      absl::MutexLock lock(&pipe->mu);
      entry->async = !entry->ready;
      error = entry->ready && !entry->ack.ok();
    }
    if (error) break;
  }
  {
    absl::MutexLock lock(&pipe->mu);
    pipe->reader_done = true;
  }
  writer.join();
  absl::MutexLock lock(&pipe->mu);
  return pipe->status;
}

grpc::Status IngestService::PushBytes(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<grpc::ByteBuffer, v1::IngestAck>* call) {
  grpc::ByteBuffer buffer;
  if (!call->Read(&buffer)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a Push without a message");
  }
  std::optional<std::string> wire = Flatten(buffer);
  buffer.Clear();
  v1::IngestBatch batch;
  if (!wire || !batch.ParseFromString(*wire)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a message that is not an isowatch.v1.IngestBatch");
  }
  v1::IngestAck ack;
  grpc::Status status = Push(context, &batch, &ack);
  if (status.ok() && !call->Write(ack)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  }
  return status;
}

grpc::Status IngestService::Push(grpc::ServerContext* context, const v1::IngestBatch* request,
                                 v1::IngestAck* response) {
  GateEntry gate(*this);
  if (!gate.entered()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is draining: send the batch again later");
  }
  const absl::StatusOr<uint64_t> epoch = EpochOf(*context);
  if (!epoch.ok()) return ToGrpcStatus(epoch.status());
  absl::StatusOr<v1::IngestAck> ack = Apply(*request, SubmitMode::kNoWait, *epoch);
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

void IngestService::Load(StreamState& state, std::string_view stream) {
  if (state.loaded) return;
  const StreamPosition position = sink_.Position(stream);
  state.taken = Progress{
      .seq = position.durable_seq, .watermark = position.watermark, .closed = position.closed};
  state.epoch = position.epoch;
  absl::MutexLock lock(&state.durable_mu);
  state.durable = state.taken;
  state.loaded = true;
}

absl::StatusOr<v1::IngestAck> IngestService::Apply(v1::IngestBatch batch_in, SubmitMode mode,
                                                   uint64_t epoch) {
  Bump(counters_.batches_received);
  RETURN_IF_ERROR(CheckStreamName(batch_in.stream()));
  if (batch_in.seq() == 0) {
    return absl::InvalidArgumentError("a batch with seq 0: the first batch of a stream has seq 1");
  }
  auto batch = std::make_shared<v1::IngestBatch>(std::move(batch_in));
  StreamState* sp = State(batch->stream());
  if (sp == nullptr) return TooManyStreams(batch->stream());
  StreamState& state = *sp;
  if (mode == SubmitMode::kWait) {
    state.mu.Lock();
  } else if (!state.mu.TryLock()) {
    return absl::ResourceExhaustedError(
        fmt::format("another batch of stream \"{}\" is in progress", batch->stream()));
  }
  absl::StatusOr<v1::IngestAck> ack = ApplyLocked(state, std::move(batch), mode, epoch);
  state.mu.Unlock();
  return ack;
}

absl::StatusOr<std::variant<v1::IngestAck, IngestService::Prepared>> IngestService::Prepare(
    StreamState& state, std::shared_ptr<v1::IngestBatch> batch_ptr, std::string wire,
    uint64_t epoch) {
  v1::IngestBatch& batch = *batch_ptr;
  Load(state, batch.stream());
  RETURN_IF_ERROR(CheckEpoch(state, epoch));
  uint64_t durable_seq = 0;
  {
    absl::MutexLock lock(&state.durable_mu);
    if (state.failed) {
      if (state.in_flight > 0) {
        return absl::UnavailableError(fmt::format(
            "stream \"{}\": a batch failed and later ones are still settling: send again "
            "from batch {}",
            batch.stream(), state.durable.seq + 1));
      }
      // Every batch taken after the durable ones failed: the stream goes back to its durable seq.
      state.failed = false;
      state.taken = state.durable;
    }
    durable_seq = state.durable.seq;
  }
  const uint64_t seq = batch.seq();
  v1::IngestAck ack;
  ack.set_stream(batch.stream());
  ack.set_durable_seq(durable_seq);
  if (seq <= durable_seq) {
    // The same batch again, or another one under its (stream, seq)?
    ASSIGN_OR_RETURN(DurableBatch kept, sink_.DurableBatchOf(batch.stream(), seq));
    if (kept.content_fingerprint && *kept.content_fingerprint != BatchFingerprint(batch)) {
      Bump(counters_.batches_conflicting);
      if (options_.events.conflicting) options_.events.conflicting(batch.stream(), seq);
      return absl::AlreadyExistsError(fmt::format(
          "batch {} of stream \"{}\" is durable with other content: another collector writes "
          "this stream, or this one sent other batches under these numbers. Nothing of it was "
          "kept; the stream's next batch is {}",
          seq, batch.stream(), durable_seq + 1));
    }
    // Its refusals again (not counted again): the collector may not have had the first ack.
    Bump(counters_.batches_duplicate);
    ack.set_duplicate(true);
    for (v1::Refusal& r : kept.refusals) *ack.add_refusals() = std::move(r);
    return ack;
  }
  if (seq <= state.taken.seq) {
    return absl::UnavailableError(
        fmt::format("batch {} of stream \"{}\" is still being made durable (sent before): send "
                    "it again to get its ack",
                    seq, batch.stream()));
  }
  if (seq > state.taken.seq + 1) {
    *ack.add_refusals() =
        MakeBatchRefusal(seq, v1::SEQUENCE_GAP,
                         fmt::format("batch {} after batch {}: send batch {} next", seq,
                                     state.taken.seq, state.taken.seq + 1));
    CountRefusals(ack, static_cast<uint64_t>(batch.txns_size()));
    return ack;
  }
  if (state.taken.closed) {
    *ack.add_refusals() = MakeBatchRefusal(
        seq, v1::STREAM_CLOSED,
        fmt::format("stream closed by end_of_stream at batch {}", state.taken.seq));
    CountRefusals(ack, static_cast<uint64_t>(batch.txns_size()));
    return ack;
  }

  const uint64_t content = BatchFingerprint(batch);
  PendingIdView ids_view(registry_, state);
  BatchValidation validation =
      ValidateBatch(batch, options_.limits, ids_view,
                    wire.empty() ? std::nullopt : std::optional<uint64_t>(wire.size()));
  if (!validation.whole_batch_refused) ReserveIds(state, seq, validation);
  Prepared p;
  p.seq = seq;
  p.received = static_cast<uint64_t>(batch.txns_size());
  p.duplicates = validation.duplicates;
  if (validation.whole_batch_refused) {
    wire.clear();
    batch.clear_txns();
    batch.clear_header();
    batch.clear_watermark();
    batch.set_end_of_stream(false);
  }
  if (batch.has_watermark() && state.taken.watermark &&
      FromProto(batch.watermark()) < *state.taken.watermark) {
    p.regressed_watermark = FromProto(batch.watermark());
    batch.clear_watermark();
    wire.clear();
  }
  p.next = state.taken;
  p.next.seq = seq;
  if (batch.has_watermark()) {
    const history::Timestamp watermark = FromProto(batch.watermark());
    if (!p.next.watermark || watermark > *p.next.watermark) p.next.watermark = watermark;
  }
  if (batch.end_of_stream()) p.next.closed = true;
  p.accepted = validation.accepted.size();
  p.ids.reserve(validation.accepted.size());
  for (size_t i = 0; i < validation.accepted.size(); ++i) {
    p.ids.push_back(AcceptedId{.index = validation.accepted[i],
                               .id = std::move(validation.ids[i]),
                               .fingerprint = validation.fingerprints[i]});
  }
  for (const v1::Refusal& r : validation.refusals) *ack.add_refusals() = r;
  p.ack = std::move(ack);
  p.validated.batch = std::move(batch_ptr);
  p.validated.wire = std::move(wire);
  p.validated.accepted = std::move(validation.accepted);
  p.validated.fingerprints = std::move(validation.fingerprints);
  p.validated.refusals = std::move(validation.refusals);
  p.validated.whole_batch_refused = validation.whole_batch_refused;
  p.validated.content_fingerprint = content;
  return p;
}

void IngestService::Finish(Prepared& p, const SinkAck& sink_ack) {
  if (!sink_ack.refusals.empty()) {
    // The ack lists its refusals in batch order, the sink's among the validation's.
    const std::vector<v1::Refusal> validated(p.ack.refusals().begin(), p.ack.refusals().end());
    std::vector<v1::Refusal> all = MergeRefusals(validated, sink_ack.refusals);
    p.ack.clear_refusals();
    for (v1::Refusal& r : all) *p.ack.add_refusals() = std::move(r);
    p.accepted -= std::min<uint64_t>(p.accepted, sink_ack.refusals.size());
  }
  Bump(counters_.batches_applied);
  Bump(counters_.transactions_received, p.received);
  Bump(counters_.transactions_accepted, p.accepted);
  Bump(counters_.transactions_duplicate, p.duplicates);
  if (p.regressed_watermark) {
    Bump(counters_.watermark_regressions);
    if (options_.events.watermark_regressed) {
      options_.events.watermark_regressed(p.ack.stream(), p.seq, *p.regressed_watermark,
                                          *p.next.watermark);
    }
  }
  CountRefusals(p.ack, p.received);
  p.ack.set_durable_seq(sink_ack.durable_seq);
}

absl::StatusOr<v1::IngestAck> IngestService::ApplyLocked(StreamState& state,
                                                         std::shared_ptr<v1::IngestBatch> batch,
                                                         SubmitMode mode, uint64_t epoch) {
  ASSIGN_OR_RETURN(auto prepared, Prepare(state, std::move(batch), std::string(), epoch));
  if (auto* ack = std::get_if<v1::IngestAck>(&prepared)) return std::move(*ack);
  Prepared& p = std::get<Prepared>(prepared);
  const std::string stream = p.ack.stream();
  absl::StatusOr<SinkAck> durable = mode == SubmitMode::kWait
                                        ? sink_.Submit(std::move(p.validated))
                                        : sink_.TrySubmit(std::move(p.validated));
  if (!durable.ok()) {
    ReleaseIds(state, p.ids);
    return durable.status();
  }
  if (durable->durable_seq < p.seq) {
    ReleaseIds(state, p.ids);
    return absl::InternalError(
        fmt::format("the sink made batch {} of stream \"{}\" durable but reports durable seq {}",
                    p.seq, stream, durable->durable_seq));
  }
  RecordKept(stream, p.ids, durable->refusals);
  ReleaseIds(state, p.ids);
  state.taken = p.next;
  {
    absl::MutexLock lock(&state.durable_mu);
    if (p.next.seq > state.durable.seq) state.durable = p.next;
  }
  Finish(p, *durable);
  return std::move(p.ack);
}

void IngestService::ApplyAsync(std::shared_ptr<v1::IngestBatch> batch, std::string wire,
                               uint64_t epoch,
                               const std::function<void(absl::StatusOr<v1::IngestAck>)>& done) {
  Bump(counters_.batches_received);
  if (absl::Status s = CheckStreamName(batch->stream()); !s.ok()) return done(s);
  if (batch->seq() == 0) {
    return done(
        absl::InvalidArgumentError("a batch with seq 0: the first batch of a stream has seq 1"));
  }
  StreamState* state_ptr = State(batch->stream());
  if (state_ptr == nullptr) return done(TooManyStreams(batch->stream()));
  StreamState& state = *state_ptr;
  absl::MutexLock lock(&state.mu);
  absl::StatusOr<std::variant<v1::IngestAck, Prepared>> prepared =
      Prepare(state, std::move(batch), std::move(wire), epoch);
  if (!prepared.ok()) return done(prepared.status());
  if (auto* ack = std::get_if<v1::IngestAck>(&*prepared)) return done(std::move(*ack));
  auto p = std::make_shared<Prepared>(std::get<Prepared>(std::move(*prepared)));
  {
    absl::MutexLock durable_lock(&state.durable_mu);
    ++state.in_flight;
    for (const AcceptedId& a : p->ids) state.pending_ids.emplace(a.id, a.fingerprint);
    state.pending_batches.push_back(PendingBatch{.seq = p->seq, .ids = std::move(p->ids)});
  }
  StreamState* sp = &state;
  auto on_durable = [this, sp, p, done](absl::StatusOr<SinkAck> durable) {
    const std::string& stream = p->ack.stream();
    {
      absl::MutexLock durable_lock(&sp->durable_mu);
      --sp->in_flight;
      // The sink reports a stream's batches in order: this one is the oldest in flight.
      std::vector<AcceptedId> ids;
      if (!sp->pending_batches.empty()) {
        ids = std::move(sp->pending_batches.front().ids);
        sp->pending_batches.pop_front();
      }
      for (const AcceptedId& a : ids) sp->pending_ids.erase(a.id);
      if (durable.ok() && durable->durable_seq < p->seq) {
        durable = absl::InternalError(fmt::format(
            "the sink made batch {} of stream \"{}\" durable but reports durable seq {}", p->seq,
            stream, durable->durable_seq));
      }
      if (durable.ok() && !sp->failed) {
        RecordKept(stream, ids, durable->refusals);
        if (p->next.seq > sp->durable.seq) sp->durable = p->next;
      } else if (durable.ok()) {
        // After a failure the rollback stays put: a later success would leave a hole.
        durable = absl::UnavailableError(
            fmt::format("stream \"{}\": an earlier batch failed: send again from batch {}", stream,
                        sp->durable.seq + 1));
      } else {
        sp->failed = true;
      }
      // After RecordKept: a reservation ends only once its ids are in the registry.
      ReleaseIds(*sp, ids);
    }
    if (!durable.ok()) return done(durable.status());
    Finish(*p, *durable);
    done(p->ack);
  };
  ValidatedBatch validated = std::move(p->validated);
  absl::StatusOr<std::vector<v1::Refusal>> refusals =
      sink_.SubmitAsync(std::move(validated), on_durable);
  if (!refusals.ok()) {
    {
      absl::MutexLock durable_lock(&state.durable_mu);
      --state.in_flight;
      for (const AcceptedId& a : state.pending_batches.back().ids) state.pending_ids.erase(a.id);
      ReleaseIds(state, state.pending_batches.back().ids);
      state.pending_batches.pop_back();
    }
    return done(refusals.status());
  }
  if (!refusals->empty()) {
    // The refused transactions' ids must not make the stream's next batches look like
    // duplicates. If the batch is no longer pending, its callback has run and dropped them.
    absl::MutexLock durable_lock(&state.durable_mu);
    if (!state.pending_batches.empty() && state.pending_batches.back().seq == p->seq) {
      const std::vector<uint32_t> refused = RefusedIndices(*refusals);
      std::vector<AcceptedId>& ids = state.pending_batches.back().ids;
      std::vector<AcceptedId> dropped;
      for (const AcceptedId& a : ids) {
        if (!Contains(refused, a.index)) continue;
        state.pending_ids.erase(a.id);
        dropped.push_back(a);
      }
      ReleaseIds(state, dropped);
      std::erase_if(ids, [&refused](const AcceptedId& a) { return Contains(refused, a.index); });
    }
  }
  state.taken = p->next;
}

void IngestService::RecordKept(const std::string& stream, const std::vector<AcceptedId>& ids,
                               const std::vector<v1::Refusal>& refusals) {
  const std::vector<uint32_t> refused = RefusedIndices(refusals);
  for (const AcceptedId& a : ids) {
    if (!Contains(refused, a.index)) registry_.Record(stream, a.id, a.fingerprint);
  }
}

void IngestService::CountRefusals(const v1::IngestAck& ack, uint64_t transactions) {
  for (const v1::Refusal& r : ack.refusals()) {
    const int reason = r.reason();
    if (reason >= 0 && reason < kRefusalReasonCount) {
      Bump(counters_.refusals[reason], r.whole_batch() ? transactions : 1);
    }
    if (r.whole_batch()) Bump(counters_.batches_refused);
  }
  if (ack.refusals_size() > 0 && options_.events.refused)
    options_.events.refused(ack, transactions);
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

  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(options.security));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(JoinHostPort(options.host, options.port), credentials, &port);
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
