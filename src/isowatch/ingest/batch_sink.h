// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/history/timestamp.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest {

// A batch that passed through validation, on its way to the sink.
//  1. `batch->seq()` is the stream's durable seq + 1: the sink sees each (stream, seq) once, in
//     order, unless an earlier Submit of it failed.
//  2. `accepted` lists, in order, the indices into batch.txns of the transactions to apply; the
//     others were refused or are duplicates and must be ignored.
//  3. When `whole_batch_refused` is set, the batch's transactions, header, watermark and
//     end_of_stream have been cleared: only its seq is to be made durable.
//  4. `batch->has_watermark()` only if the watermark is not below the stream's previous one.
//  5. `wire`, when not empty, is the serialized form of `batch` exactly as the collector sent it
//     (the service clears it when it changes the batch): a sink may keep these bytes rather than
//     encode the batch again.
struct ValidatedBatch {
  // Never null. Shared, so that a sink can hand the batch on (to the engine) without a copy.
  std::shared_ptr<v1::IngestBatch> batch;
  std::string wire;
  std::vector<uint32_t> accepted;
  // TxnFingerprint of each accepted transaction, parallel to `accepted` (for a sink that stores
  // the ids of a batch with it).
  std::vector<uint64_t> fingerprints;
  std::vector<v1::Refusal> refusals;
  bool whole_batch_refused = false;
  // BatchFingerprint of the batch as the collector sent it (before any change by the service),
  // for the sink to keep with the batch (DurableBatchOf).
  uint64_t content_fingerprint = 0;
};

// What a sink reports of a batch it has made durable.
struct SinkAck {
  // The stream's durable seq, >= the batch's seq.
  uint64_t durable_seq = 0;
  // The transactions of ValidatedBatch::accepted that the sink refused itself and left out of
  // what it made durable (the daemon refuses history conflicts: ConflictRegistry), in batch
  // order, each made with MakeRefusal and the batch's seq. They belong in the batch's ack.
  std::vector<v1::Refusal> refusals;
};

// What the sink has made durable of a stream.
struct StreamPosition {
  uint64_t durable_seq = 0;                     // 0: nothing yet
  std::optional<history::Timestamp> watermark;  // the highest watermark made durable
  bool closed = false;                          // a batch with end_of_stream is durable
  uint64_t epoch = 0;                           // the latest ClaimStream's epoch (0: never)
};

// What a sink kept of a durable batch, for the ack of the batch when it is sent again.
struct DurableBatch {
  // The refusals of its first ack, all of them (the service's and the sink's, in batch order).
  std::vector<v1::Refusal> refusals;
  // ValidatedBatch::content_fingerprint; nullopt when the sink does not know it.
  std::optional<uint64_t> content_fingerprint;
};

// Where validated batches go: implemented by the daemon (RocksDB, then the engine) and by fakes in
// tests. The ingest service calls it from its RPC handler threads.
//
// Thread-safety: implementations are thread-safe. The service never has two calls in progress for
// the same stream, so per stream the calls come one after another, in seq order; different
// streams' calls may run at the same time. With SubmitAsync several batches of a stream may be
// waiting for durability at once.
//
// Refusals: a sink may refuse some of a batch's accepted transactions itself (SinkAck::refusals),
// and makes the rest of the batch durable. It decides when it takes the batch: by the time
// Submit, TrySubmit or SubmitAsync returns, and before the batch can be reported durable.
//
// Shutdown: Submit and TrySubmit must return (with the batch durable or with an error), and the
// callbacks of SubmitAsync must be called, in bounded time while the sink runs; the daemon drains
// the ingest server (which waits for those callbacks) before it stops the sink.
class BatchSink {
 public:
  virtual ~BatchSink() = default;

  // What is durable of `stream` (all zero for a stream never seen). Called once per stream per
  // service, when a stream is first met, so the service can tell duplicates after a restart.
  virtual StreamPosition Position(std::string_view stream) = 0;

  // Queues the batch, waiting while the sink's bounded queue is full, then waits until the batch
  // is durable. Returns the stream's durable seq, which is then >= batch.batch->seq(), and the
  // sink's refusals. Errors
  // (Unavailable, Internal, ...) mean the batch is not durable; the service ends the RPC with the
  // error and the collector sends the batch again. A sink whose failed Submit may still have made
  // the batch durable must take the same (stream, seq) again without applying it twice.
  virtual absl::StatusOr<SinkAck> Submit(ValidatedBatch batch) = 0;

  // Like Submit, but never waits for room: when the queue is full, returns ResourceExhausted at
  // once without taking the batch. Used by the unary Push.
  virtual absl::StatusOr<SinkAck> TrySubmit(ValidatedBatch batch) = 0;

  // Called once per SubmitAsync with the stream's durable seq (>= the batch's seq) and the sink's
  // refusals, or an error.
  using DurableCallback = std::function<void(absl::StatusOr<SinkAck>)>;

  // The pipelined Submit (the streaming RPC): waits for room like Submit, gives the batch its
  // place after the stream's earlier batches, and returns without waiting for durability, so the
  // next batch of the stream can follow while this one waits for its sync (one sync then covers
  // many batches).
  //  - OK: the batch is taken, with the sink's refusals, which are returned (the service needs
  //    them before it validates the stream's next batch) and given to `on_durable` again.
  //    `on_durable` is called exactly once, from any thread (possibly before SubmitAsync
  //    returns), once the batch is durable, or with an error if it will not be. Per stream, the
  //    calls come in seq order; after an error, every batch of the stream submitted before the
  //    error was reported fails too (the service then rolls the stream back to its durable seq
  //    and the collector sends the batches again).
  //  - An error: the batch was not taken, and `on_durable` is never called.
  // `on_durable` must not block or call the sink. The default runs Submit and then the callback.
  //
  // `on_durable` is taken by value because the sinks that override this keep it until the batch
  // is durable; only this default just calls it.
  // NOLINTBEGIN(performance-unnecessary-value-param)
  virtual absl::StatusOr<std::vector<v1::Refusal>> SubmitAsync(ValidatedBatch batch,
                                                               DurableCallback on_durable) {
    absl::StatusOr<SinkAck> durable = Submit(std::move(batch));
    if (!durable.ok()) return durable.status();
    std::vector<v1::Refusal> refusals = durable->refusals;
    on_durable(*std::move(durable));
    return refusals;
  }
  // NOLINTEND(performance-unnecessary-value-param)

  // What the sink kept of durable batch `seq` of `stream` (DurableBatch). A sink keeps it for at
  // least the stream's latest 4,096 batches; for older ones, and by default, it knows nothing
  // (no refusals, no fingerprint). An error ends the RPC; the collector sends the batch again.
  virtual absl::StatusOr<DurableBatch> DurableBatchOf(std::string_view stream, uint64_t seq) {
    (void)stream;
    (void)seq;
    return DurableBatch{};
  }

  // Makes a new writer of `stream` (ingest protocol, Claim): returns an epoch higher than every
  // one returned before for the stream, durable (it survives a crash) before it is returned, as
  // StreamPosition::epoch reports it from then on. Creates nothing else: a stream claimed but
  // never written has no batches. Errors: the write's.
  virtual absl::StatusOr<uint64_t> ClaimStream(std::string_view stream) = 0;
};

}  // namespace isowatch::ingest
