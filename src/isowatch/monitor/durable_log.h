// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/common/clock.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/ingest/batch_sink.h"
#include "isowatch/ingest/conflict_registry.h"
#include "isowatch/monitor/internal/batch_queue.h"
#include "isowatch/server/metrics.h"
#include "isowatch/store/store.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::monitor {

// The ingest log and its group commit (docs/operations.md, "How the daemon works"): how a
// validated batch becomes durable and acknowledged.
//
// Append runs on the caller's (ingest) thread. It takes a slot in the BatchQueue, then, under the
// lock that fixes the order of the log (append_mu_), decides the batch's history conflicts
// (ingest::ConflictRegistry: those are refused in the ack and left out of the log) and appends
// the rest to the store's log unsynced. The syncer thread then makes everything appended so far
// durable with one Store::SyncLog (while a sync runs, later batches gather for the next one),
// queues the synced batches for the engine thread and reports them durable, in append order.
// Only durable batches reach the engine thread: recovery replays only what is durable.
//
// Thread-safe: Append, AppendAndWait, Position, DurableBatchOf and ClaimStream from any thread; the
// durable callbacks run on the syncer thread. Owns the conflict registry and the syncer thread
// (Start, Stop); the store, the metrics, the queue and the clock belong to the caller and outlive
// it.
class DurableLog {
 public:
  DurableLog(store::Store* store, server::DaemonMetrics* metrics, internal::BatchQueue* queue,
             const common::Clock* clock, history::DataModel default_model);
  // Stop().
  ~DurableLog();
  DurableLog(const DurableLog&) = delete;
  DurableLog& operator=(const DurableLog&) = delete;

  // Recovery, before Start: the conflict registry starts from what the live history restored
  // from a checkpoint decided; then it decides each batch replayed from the log again, in log
  // order, `all` listing every transaction of it (a log written before these checks may hold
  // transactions the registry refuses: the live history refuses them too).
  void RestoreConflicts(const history::HistoryBuilder& builder);
  void RedecideConflicts(const v1::IngestBatch& logged, std::span<const uint32_t> all);

  // Starts the syncer thread. Call once, after recovery.
  void Start();
  // Syncs and reports what was appended, then stops the syncer thread. Idempotent.
  void Stop();

  // BatchSink::SubmitAsync (`wait`: wait for room, else ResourceExhausted when full): decides the
  // batch's history conflicts, appends the rest unsynced and hands it to the syncer, which calls
  // `on_durable`. Returns the batch's history conflicts. Errors: those of BatchQueue::Reserve
  // and of the store's append; `on_durable` is then never called.
  absl::StatusOr<std::vector<v1::Refusal>> Append(ingest::ValidatedBatch batch, bool wait,
                                                  ingest::BatchSink::DurableCallback on_durable);
  // Append, then waits until the batch is durable (BatchSink::Submit and TrySubmit).
  absl::StatusOr<ingest::SinkAck> AppendAndWait(ingest::ValidatedBatch batch, bool wait);

  // What is durable of `stream`, as BatchSink::Position, DurableBatchOf and ClaimStream answer.
  ingest::StreamPosition Position(std::string_view stream) const;
  absl::StatusOr<ingest::DurableBatch> DurableBatchOf(std::string_view stream, uint64_t seq) const;
  absl::StatusOr<uint64_t> ClaimStream(std::string_view stream);

 private:
  // A batch appended and waiting for the syncer.
  struct Unsynced {
    uint64_t position = 0;
    internal::DurableBatch durable;
    uint64_t seq = 0;
    std::vector<v1::Refusal> refusals;  // the history conflicts, for the ack
    ingest::BatchSink::DurableCallback on_durable;
    int64_t started_us = 0;  // steady time Append began, for the ingest latency
  };

  void RunSyncer();
  bool HasWorkOrStopping() const ABSL_SHARED_LOCKS_REQUIRED(sync_mu_);

  store::Store* const store_;
  server::DaemonMetrics* const metrics_;
  internal::BatchQueue* const queue_;
  const common::Clock* const clock_;

  // Held across a batch's conflict decision, its append and its hand-over to the syncer: the
  // log's order is the order in which batches take it, the registry sees the batches in that
  // order, and the syncer reports them in it.
  absl::Mutex append_mu_ ABSL_ACQUIRED_BEFORE(sync_mu_);
  ingest::ConflictRegistry conflicts_ ABSL_GUARDED_BY(append_mu_);

  absl::Mutex sync_mu_;
  std::vector<Unsynced> unsynced_ ABSL_GUARDED_BY(sync_mu_);  // in append order
  bool stopping_ ABSL_GUARDED_BY(sync_mu_) = false;
  std::thread syncer_;  // started by Start, joined by Stop (on the owner's thread)
};

}  // namespace isowatch::monitor
