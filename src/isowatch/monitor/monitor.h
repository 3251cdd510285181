// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/engine/version_spill.h"
#include "isowatch/ingest/batch_sink.h"
#include "isowatch/ingest/conflict_registry.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/service.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/server/metrics.h"
#include "isowatch/server/status_source.h"
#include "isowatch/server/violation_source.h"
#include "isowatch/store/store.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/windows/check_pool.h"

namespace isowatch::monitor {

struct MonitorOptions {
  LiveOptions live;
  // The RocksDB spill behind `live.spill`, when it is one (not owned): the monitor reports its
  // memory with the store's, and snapshots it with each checkpoint.
  engine::RocksVersionSpill* rocks_spill = nullptr;
  // Checkpoints (docs/operations.md, "Checkpoints"): how often to save one (0: never), the
  // directory the spill's snapshots go under (the data directory), and the checkpoint the store
  // held at start, parsed, which Open restores before it replays the log after it (null: none;
  // its spill snapshot is already behind `live.spill`).
  int64_t checkpoint_interval_ms = 0;
  std::string data_dir;
  std::shared_ptr<const v1::DaemonCheckpoint> checkpoint;
  // Batches taken (being appended, waiting for their sync, or durable but not yet applied by
  // the engine thread); when full, Submit and SubmitAsync wait and TrySubmit answers
  // ResourceExhausted.
  size_t queue_batches = 64;
  // How often the engine thread finalises timed-out verdicts and refreshes gauges and status.
  int64_t tick_ms = 100;
  // Transaction ids remembered per stream to recognise transactions sent again: at least the
  // newest this many, at most twice as many (ingest::MemoryIdRegistry); 0: every id.
  size_t remembered_ids = 0;
  std::string version;
  // Plug-in checkers (checkers/registry.h) run on the windows `live.windows` cuts, by name with
  // their options; empty: no windows are checked.
  std::vector<std::pair<std::string, checkers::CheckerOptions>> window_checkers;
  windows::PoolOptions pool;
};

// The heart of isowatchd (docs/operations.md, "How the daemon works"): the sink of the ingest
// service, the source of the HTTP API's violations and status, and the engine thread.
//
// A batch is appended to the store's log unsynced (Submit/SubmitAsync, on the caller's thread, in
// the stream's order; one append at a time, under the lock that fixes the order of the log,
// where the history conflicts of its transactions are decided: ConflictRegistry, refused in the
// ack and left out of the log), then handed to the syncer thread, which makes everything appended
// so far durable with one Store::SyncLog (group commit: while a sync runs, later batches wait for
// the next one), queues the synced batches for the engine and reports them durable. Only durable
// batches reach the engine (recovery replays only what is durable). The engine thread applies
// batches in log order to a LiveChecker, stores each final violation under its stable id and
// updates the metrics. At Open, the last checkpoint, if any, is restored (LiveChecker, id
// registry, and the ConflictRegistry from the restored history), then the log after it is
// replayed into them (the ConflictRegistry then decides as it did before), so after a crash the
// daemon carries on where it was, and a violation already stored is not stored or counted
// again. Every MonitorOptions::checkpoint_interval_ms, and when it drains, the engine thread saves
// a checkpoint and drops the log before it (docs/operations.md, "Checkpoints").
//
// Thread-safe: Submit/TrySubmit/SubmitAsync/Position from ingest threads, Query/GetStatus from
// HTTP threads. SubmitAsync's callbacks run on the syncer thread (started by Open, stopped by the
// destructor), in append order.
class Monitor final : public ingest::BatchSink,
                      public server::ViolationSource,
                      public server::StatusSource {
 public:
  // Replays `store`'s log (recovery) and returns a monitor ready to Start.
  // REQUIRES: `store` and `metrics` outlive the monitor.
  static absl::StatusOr<std::unique_ptr<Monitor>> Open(store::Store* store,
                                                       server::DaemonMetrics* metrics,
                                                       MonitorOptions options);
  ~Monitor() override;
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Starts the engine thread.
  void Start();
  // Drains: refuses new batches (Unavailable), applies every queued one, stores the violations,
  // stops the engine thread. Idempotent.
  void Stop();

  // The ingest service whose counters the periodic refresh exports (refusals by reason,
  // duplicate batches). May be null.
  void SetIngestCounters(const ingest::IngestCounters* counters);
  // The registry of accepted transaction ids, restored from the checkpoint and the log after it
  // at Open (the same Record calls in the same order per stream as before a restart: the same
  // ids are remembered).
  ingest::IdRegistry& id_registry() { return registry_; }

  // Ready: recovered and running, not draining.
  absl::Status Ready() const;
  // Transactions the live history refused after their batch was acknowledged (an id it already
  // holds; a history conflict the ConflictRegistry let through, which should not happen).
  uint64_t late_refusals() const;

  // ingest::BatchSink
  ingest::StreamPosition Position(std::string_view stream) override;
  absl::StatusOr<std::vector<v1::Refusal>> RefusalsOf(std::string_view stream,
                                                      uint64_t seq) override;
  absl::StatusOr<ingest::SinkAck> Submit(ingest::ValidatedBatch batch) override;
  absl::StatusOr<ingest::SinkAck> TrySubmit(ingest::ValidatedBatch batch) override;
  absl::StatusOr<std::vector<v1::Refusal>> SubmitAsync(ingest::ValidatedBatch batch,
                                                       DurableCallback on_durable) override;

  // server::ViolationSource
  absl::StatusOr<store::ViolationPage> Query(const store::ViolationFilter& filter, size_t limit,
                                             std::string_view page_token) override;

  // server::StatusSource
  absl::StatusOr<server::DaemonStatus> GetStatus() override;

 private:
  struct Queued {
    // Every transaction of it is to be applied. Shared with the ingest service's parse (arena).
    std::shared_ptr<const v1::IngestBatch> batch;
    int64_t received_ms = 0;
  };

  Monitor(store::Store* store, server::DaemonMetrics* metrics, MonitorOptions options);
  absl::Status Recover();
  // Decides the batch's history conflicts, appends the rest unsynced and hands it to the syncer;
  // see BatchSink::SubmitAsync.
  absl::StatusOr<std::vector<v1::Refusal>> SubmitImpl(ingest::ValidatedBatch batch, bool wait,
                                                      DurableCallback on_durable);
  absl::StatusOr<ingest::SinkAck> SubmitAndWait(ingest::ValidatedBatch batch, bool wait);
  void Run();
  // Syncer thread: syncs what was appended, queues it for the engine, calls the callbacks.
  void RunSyncer();
  // Engine thread: applies one batch and stores what became final.
  void ApplyOne(Queued& q, int64_t now_ms);
  absl::Status StoreViolations(int64_t now_ms, bool count);
  // Saves a checkpoint at the next log position to apply and drops the log before it; returns
  // whether there was anything new to save. Engine thread, between batches.
  absl::StatusOr<bool> Checkpoint(int64_t now_ms);
  // Recovery from checkpoint `c`: its windows not done yet go to the pool again.
  absl::Status RestoreWindows(const v1::DaemonCheckpoint& c);
  // Keeps `w` until it is done (windows_unfinished_) and queues it for the checkers.
  void SubmitWindow(std::shared_ptr<const windows::Window> w);
  void MaybeCheckpoint(int64_t now_ms, bool now);
  void Refresh(int64_t now_ms);
  // Sets database `db`'s RocksDB memory gauges and adds it to `out`.
  void ReportRocksDbMemory(std::string_view db, const rocks::RocksDbMemory& m,
                           server::MemoryStatus& out);
  // Engine thread: hands the windows sealed since the last call to the pool.
  void SubmitWindows();
  // Worker threads: one checker's outcome on one window; a dropped window.
  void OnWindowResult(const windows::Window& w, const checkers::Checker& c,
                      windows::CheckOutcome outcome);
  void OnWindowDropped(const windows::Window& w);
  // Any thread: window `index` is done (checked by every checker, or dropped).
  void WindowDone(uint64_t index);
  store::ViolationRecord RenderWindowViolation(const windows::Window& w,
                                               const verdict::Violation& v);

  store::Store* const store_;
  server::DaemonMetrics* const metrics_;
  const MonitorOptions options_;
  const int64_t start_unix_ms_;
  ingest::MemoryIdRegistry registry_;
  LiveChecker live_;  // engine thread only (and Open, before it starts)

  // Held across a batch's conflict decision and its append: the log's order is the order in
  // which batches take it, and the registry sees the batches in that order.
  absl::Mutex append_mu_;
  ingest::ConflictRegistry conflicts_ ABSL_GUARDED_BY(append_mu_);

  mutable std::mutex mu_;
  std::condition_variable cv_;        // the engine thread waits for work
  std::condition_variable room_cv_;   // Submit waits for room
  std::map<uint64_t, Queued> queue_;  // by log position
  size_t reserved_ = 0;  // slots taken by batches being appended or waiting for their sync
  // Appended, waiting for the syncer, in append order.
  struct Unsynced {
    uint64_t position = 0;
    Queued queued;
    uint64_t seq = 0;
    std::vector<v1::Refusal> refusals;  // the history conflicts, for the ack
    DurableCallback on_durable;
    std::chrono::steady_clock::time_point started;
  };
  std::vector<Unsynced> unsynced_;
  std::condition_variable sync_cv_;  // the syncer waits for work
  bool syncer_stop_ = false;
  std::thread syncer_;
  uint64_t next_position_ = 1;  // the next log position to apply
  bool running_ = false;
  bool draining_ = false;
  bool stopped_ = false;
  bool recovered_ = false;
  absl::Status engine_error_;
  server::DaemonStatus status_;  // refreshed by the engine thread
  uint64_t late_refusals_ = 0;
  const ingest::IngestCounters* ingest_counters_ = nullptr;

  // Engine thread: what the metrics were last told, to turn totals into increments.
  engine::EngineStats last_stats_;
  static constexpr int64_t kHorizonWarningIntervalMs = 60'000;
  int64_t last_horizon_warning_ms_ = -kHorizonWarningIntervalMs;
  std::vector<uint64_t> last_refusals_;
  uint64_t last_duplicates_ = 0;
  std::vector<int64_t> latencies_;
  int64_t last_checkpoint_ms_ = 0;
  uint64_t checkpoint_position_ = 0;  // log position of the last checkpoint saved or restored
  absl::flat_hash_map<std::string, int64_t> watermark_moved_ms_;
  absl::flat_hash_map<std::string, std::optional<history::Timestamp>> last_watermark_;

  std::thread thread_;

  // Windows. The pool is created by Open (before recovery) and stopped by Stop.
  std::unique_ptr<windows::CheckPool> pool_;
  const checkers::Checker* last_checker_ = nullptr;  // a window is done after its outcome
  uint64_t windows_skip_ = 0;  // recovery: windows below it were done before the restart
  mutable std::mutex windows_mu_;
  std::vector<std::string> stream_names_;  // by origin, for rendering window violations
  uint64_t windows_done_ = 0;              // windows below it are done
  std::set<uint64_t> windows_done_above_;  // done, above windows_done_
  // Sealed and submitted, not done yet: saved with a checkpoint, to be checked after a restart.
  std::map<uint64_t, std::shared_ptr<const windows::Window>> windows_unfinished_;
  uint64_t windows_sealed_ = 0;
  uint64_t windows_dropped_ = 0;
  uint64_t window_late_seen_ = 0;  // late transactions already counted in the metric
  std::vector<server::CheckerStatus> checker_status_;
};

}  // namespace isowatch::monitor
