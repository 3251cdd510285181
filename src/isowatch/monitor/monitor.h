// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "isowatch/common/clock.h"
#include "isowatch/ingest/batch_sink.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/service.h"
#include "isowatch/monitor/durable_log.h"
#include "isowatch/monitor/engine_loop.h"
#include "isowatch/monitor/ingest_log.h"
#include "isowatch/monitor/internal/batch_queue.h"
#include "isowatch/monitor/monitor_options.h"
#include "isowatch/monitor/violation_reporter.h"
#include "isowatch/monitor/window_tracker.h"
#include "isowatch/server/metrics.h"
#include "isowatch/server/status_source.h"
#include "isowatch/server/violation_source.h"
#include "isowatch/store/store.h"

namespace isowatch::monitor {

// The heart of isowatchd (docs/operations.md, "How the daemon works"): the sink of the ingest
// service, the source of the HTTP API's violations and status, and the owner of the parts that
// do the work:
//  - DurableLog: a batch's conflict decision, its append to the store's log and the group
//    commit (the syncer thread), up to its ack;
//  - internal::BatchQueue: the bounded queue of batches from ingest to the engine thread;
//  - EngineLoop: the engine thread, which applies durable batches in log order to the live
//    checker, reports what becomes final, ticks, and saves checkpoints; it also recovers at Open;
//  - ViolationReporter: stores (or summarises), counts and logs the violations of the engine
//    thread and of the window checks;
//  - WindowTracker: the windows the plug-in checkers judge (the CheckPool's workers), when
//    MonitorOptions::window_checkers is set;
//  - MetricsExporter (in the EngineLoop): the metric deltas and the status.
// The monitor wires them together and runs their lifecycle: Open (recovery, then the syncer),
// Start (the engine thread), Stop (drain: no new batches, every queued one applied, a last
// checkpoint, the window checks cancelled), and the destructor (the syncer).
//
// Thread-safe: Submit/TrySubmit/SubmitAsync/Position/DurableBatchOf/ClaimStream from ingest
// threads, Query and GetStatus from HTTP threads, the rest from the owner's thread. SubmitAsync's
// callbacks run on the syncer thread, in append order. The store and the metrics belong to the
// caller.
class Monitor final : public ingest::BatchSink,
                      public server::ViolationSource,
                      public server::StatusSource {
 public:
  // Replays `store`'s log (recovery) and returns a monitor ready to Start.
  // REQUIRES: `store`, `metrics` and `options.clock` outlive the monitor.
  static absl::StatusOr<std::unique_ptr<Monitor>> Open(store::Store* store,
                                                       server::DaemonMetrics* metrics,
                                                       MonitorOptions options);
  ~Monitor() override;
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Starts the engine thread.
  void Start();
  // Drains: refuses new batches (Unavailable), applies every queued one, stores the violations,
  // stops the engine thread and the window checks. Idempotent.
  void Stop();

  // The ingest service whose counters the periodic refresh exports (refusals by reason,
  // duplicate batches). May be null.
  void SetIngestCounters(const ingest::IngestCounters* counters);
  // The registry of accepted transaction ids, restored from the checkpoint and the log after it
  // at Open (the same Record calls in the same order per stream as before a restart: the same
  // ids are remembered).
  ingest::IdRegistry& id_registry() { return registry_; }
  // What the ingest service reports (refusals, backward watermarks), to be logged
  // (IngestLog). REQUIRES: the monitor outlives the service.
  ingest::IngestEvents ingest_events() { return ingest_log_.Events(); }

  // Ready: recovered and running, not draining.
  absl::Status Ready() const;
  // Transactions the live history refused after their batch was acknowledged (an id it already
  // holds; a history conflict the ConflictRegistry let through, which should not happen).
  uint64_t late_refusals() const { return engine_.late_refusals(); }
  // EngineLoop::AwaitTickForTest.
  bool AwaitTickForTest(absl::Duration timeout) { return engine_.AwaitTickForTest(timeout); }

  // ingest::BatchSink
  ingest::StreamPosition Position(std::string_view stream) override;
  absl::StatusOr<ingest::DurableBatch> DurableBatchOf(std::string_view stream,
                                                      uint64_t seq) override;
  absl::StatusOr<uint64_t> ClaimStream(std::string_view stream) override;
  absl::StatusOr<ingest::SinkAck> Submit(ingest::ValidatedBatch batch) override;
  absl::StatusOr<ingest::SinkAck> TrySubmit(ingest::ValidatedBatch batch) override;
  absl::StatusOr<std::vector<v1::Refusal>> SubmitAsync(ingest::ValidatedBatch batch,
                                                       DurableCallback on_durable) override;

  // server::ViolationSource
  absl::StatusOr<store::ViolationPage> Query(const store::ViolationFilter& filter, size_t limit,
                                             std::string_view page_token) override;
  absl::StatusOr<store::SummaryPage> QuerySummaries(const store::SummaryFilter& filter,
                                                    size_t limit,
                                                    std::string_view page_token) override;

  // server::StatusSource
  absl::StatusOr<server::DaemonStatus> GetStatus() override;

 private:
  Monitor(store::Store* store, server::DaemonMetrics* metrics, MonitorOptions options,
          std::unique_ptr<ViolationReporter> reporter, std::unique_ptr<WindowTracker> windows);

  // Declared in the order they are built; each part refers only to those above it.
  store::Store* const store_;
  const MonitorOptions options_;  // its clocks resolved: never null
  const int64_t start_unix_ms_;
  IngestLog ingest_log_;
  ingest::MemoryIdRegistry registry_;
  internal::BatchQueue queue_;
  std::unique_ptr<ViolationReporter> reporter_;
  std::unique_ptr<WindowTracker> windows_;  // null without window checkers
  DurableLog log_;
  EngineLoop engine_;

  mutable absl::Mutex mu_;
  bool recovered_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace isowatch::monitor
