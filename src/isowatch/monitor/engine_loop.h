// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "isowatch/common/clock.h"
#include "isowatch/common/rate_limiter.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/monitor/durable_log.h"
#include "isowatch/monitor/ingest_log.h"
#include "isowatch/monitor/internal/batch_queue.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/monitor/metrics_exporter.h"
#include "isowatch/monitor/monitor_options.h"
#include "isowatch/monitor/violation_reporter.h"
#include "isowatch/monitor/window_tracker.h"
#include "isowatch/server/metrics.h"
#include "isowatch/server/status_source.h"
#include "isowatch/store/store.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::monitor {

// The engine thread (docs/operations.md, "How the daemon works"). It takes the durable batches
// from the BatchQueue in log order and applies them to the LiveChecker, reports each violation
// that becomes final (ViolationReporter: stored under its stable id, or summarised), and hands the
// windows the cutter seals to the WindowTracker. Every tick (MonitorOptions::tick_ms of steady
// time, and once more at the end) it finalises what timed out, logs the summaries that grew,
// refreshes the metrics and the status (MetricsExporter) and, every checkpoint interval and when it
// drains, saves a checkpoint and drops the log before it (docs/operations.md, "Checkpoints").
// Before the thread starts, Recover restores the last checkpoint and replays the log after it
// through the same steps.
//
// Thread-safety: the LiveChecker and the loop's bookkeeping are engine-thread only (Recover runs
// on the owner's thread before Start, and Join orders everything after the thread's end);
// status(), error(), late_refusals() and AwaitTickForTest() are thread-safe. Owns the
// LiveChecker, the MetricsExporter and the thread; the store, the metrics, the reporter, the id
// registry, the queue, the log, the window tracker (nullable) and the clock belong to the caller
// and outlive it.
class EngineLoop {
 public:
  EngineLoop(store::Store* store, server::DaemonMetrics* metrics, const MonitorOptions& options,
             ViolationReporter* reporter, ingest::MemoryIdRegistry* registry,
             internal::BatchQueue* queue, DurableLog* log, WindowTracker* windows,
             int64_t start_unix_ms);
  // REQUIRES: Join() was called if Start() was.
  ~EngineLoop() = default;
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Restores MonitorOptions::checkpoint, if any, then replays the store's log after it. Call
  // once, before Start. Errors: the checkpoint or a log entry does not load; the store fails.
  absl::Status Recover();
  // Starts the engine thread. Call at most once.
  void Start();
  // Waits until the thread has ended: once the queue drains, it applies what is left, takes a
  // last tick (with a checkpoint) and ends. Does nothing if the thread was never started.
  void Join();

  // MetricsExporter::SetIngestCounters. Thread-safe.
  void SetIngestCounters(const ingest::IngestCounters* counters) {
    exporter_.SetIngestCounters(counters);
  }
  // The status as of the last tick (or recovery). Thread-safe.
  server::DaemonStatus status() const;
  // OK, or why storing violations failed (the daemon is then not ready). Thread-safe.
  absl::Status error() const;
  // Transactions the live history refused after their batch was acknowledged. Thread-safe.
  uint64_t late_refusals() const {
    // Relaxed: a counter read on its own.
    return late_refusals_.load(std::memory_order_relaxed);
  }
  // Has the engine thread take one more tick, whatever the clock says (it sees the request within
  // MonitorOptions::tick_ms of real time), and waits until it has: every batch acknowledged
  // before the call (with every batch below it in the log) is applied, what was final by then is
  // stored and the status refreshed. Returns false if `timeout` (real time) passes first.
  bool AwaitTickForTest(absl::Duration timeout);

 private:
  void Run();
  // One tick at wall-clock `now_ms`: see the class comment. `last`: the loop's final tick.
  void Tick(int64_t now_ms, bool last);
  // Applies one durable batch and stores what became final.
  void ApplyOne(internal::DurableBatch& q, int64_t now_ms);
  absl::Status StoreViolations(int64_t now_ms);
  // Hands the windows sealed since the last call to the window tracker.
  void SubmitWindows();
  void Refresh(int64_t now_ms);
  void SetError(absl::Status error);

  // Checkpoints (engine_loop_checkpoint.cc).
  absl::Status RestoreCheckpoint(const v1::DaemonCheckpoint& c, int64_t now_ms);
  void MaybeCheckpoint(int64_t now_ms, bool now);
  // Saves a checkpoint at the next log position to apply and drops the log before it; returns
  // whether there was anything new to save. Between batches.
  absl::StatusOr<bool> Checkpoint(int64_t now_ms);

  store::Store* const store_;
  server::DaemonMetrics* const metrics_;
  const MonitorOptions& options_;  // the monitor's; outlives this
  const common::Clock* const clock_;
  ViolationReporter* const reporter_;
  ingest::MemoryIdRegistry* const registry_;
  internal::BatchQueue* const queue_;
  DurableLog* const log_;
  WindowTracker* const windows_;

  // Engine thread only (and Recover, before it starts).
  LiveChecker live_;
  MetricsExporter exporter_;
  int64_t last_checkpoint_ms_ = 0;
  // Bounds the lines of the live history's refusals (IngestLog's limits).
  RateLimiter late_refusal_log_{IngestLog::kIntervalMs, IngestLog::kBurst};
  uint64_t checkpoint_position_ = 0;  // log position of the last checkpoint saved or restored

  // Counter, bumped by the engine thread and read by any. Relaxed: read on its own, it orders
  // nothing else.
  std::atomic<uint64_t> late_refusals_{0};
  // Counter of the ticks AwaitTickForTest asked for. Release (the request) and acquire (the
  // engine thread's read): the batches acknowledged before a request are queued when it is seen.
  std::atomic<uint64_t> tick_requests_{0};

  mutable absl::Mutex mu_;
  server::DaemonStatus status_ ABSL_GUARDED_BY(mu_);  // refreshed at each tick
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // The tick requests seen before the last finished tick's round began.
  uint64_t ticks_served_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;  // started by Start, joined by Join (on the owner's thread)
};

}  // namespace isowatch::monitor
