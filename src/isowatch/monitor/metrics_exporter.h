// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/engine/engine.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/ingest/service.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/monitor/monitor_options.h"
#include "isowatch/monitor/window_tracker.h"
#include "isowatch/rocks/rocksdb_memory.h"
#include "isowatch/server/metrics.h"
#include "isowatch/server/status_source.h"
#include "isowatch/store/store.h"

namespace isowatch::monitor {

// Exports what the daemon's parts count to its metrics (docs/operations.md, "Metrics") and builds
// the status /api/v1/status serves. The live engine and the ingest service keep running totals;
// the exporter remembers the totals it last exported and adds only what they grew by to the
// counters, sets the gauges, observes the check latency of the transactions that became final,
// and measures each stream's lag from when its watermark last moved.
//
// Restarts: the counters of what the daemon found or refused keep their totals. The violations'
// come from the store's counts by kind (Restore); the others ("kept" counters: refusals,
// duplicate and refused batches, streams over max_streams, backward watermarks, the engine's
// flip-flops (provisional and reported), late arrivals, horizon misses and unjudged transactions,
// late window transactions, violations not logged) are saved to the store (Store::SetCounterTotals)
// at every refresh where one grew, and restored from there. What the replay of the log at start-up
// counts again was counted before the restart (EndRecovery). The status's totals are those of the
// metrics.
//
// Engine-thread only (thread-compatible), but SetIngestCounters, which is thread-safe. Owns its
// bookkeeping only; the store, the metrics, the spill and the ingest counters belong to the
// caller and outlive it.
class MetricsExporter {
 public:
  // What the engine thread's other parts count, as of one refresh.
  struct Inputs {
    size_t queued_batches = 0;
    uint64_t late_refusals = 0;              // refused by the live history after their ack
    size_t remembered_ids = 0;               // by the ingest id registry
    const WindowTracker* windows = nullptr;  // nullptr: no windows are checked
    FindingsLogStatus findings_log;          // what the ViolationReporter logged
  };

  // The status says what `options` (the monitor's, which outlive this) say of the daemon: its
  // version, memory budget and spill; and that it started at `start_unix_ms`.
  MetricsExporter(store::Store* store, server::DaemonMetrics* metrics,
                  const MonitorOptions& options, int64_t start_unix_ms);
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // The ingest service whose counters Refresh exports (refusals by reason, duplicate batches).
  // May be null. Thread-safe.
  void SetIngestCounters(const ingest::IngestCounters* counters);

  // Creates at 0 the series of every label value the daemon can count (each refusal reason, each
  // anomaly the online engine reports at its level) and adds to the counters the totals the store
  // kept: the violations by kind (and those summarised), and the kept counters. Call once, before
  // the first Refresh. Errors: the store's totals cannot be read or do not parse.
  absl::Status Restore();
  // The replay of the store's log at start-up is over: what it counted again (the engine's
  // events, the live history's refusals) is in the restored totals, so the running totals now
  // reached are taken as exported. Call after Restore, before the first Refresh.
  // `findings_log`: what the ViolationReporter logged by then.
  void EndRecovery(const LiveChecker& live, uint64_t late_refusals,
                   const FindingsLogStatus& findings_log = {});

  // Exports what changed since the last call, as of wall-clock time `now_ms` (Unix ms), and
  // returns the daemon's status. Forgets in `live` the transactions that became final
  // (LiveChecker::CollectFinal), observing their check latency.
  server::DaemonStatus Refresh(int64_t now_ms, LiveChecker& live, const Inputs& in);

 private:
  // The kept counters: the refusals by reason (indices 0 to kRefusalReasonCount - 1), then these.
  enum KeptIndex : size_t {
    kHistoryConflicts = ingest::kRefusalReasonCount,  // refused by the live history, after the ack
    kDuplicateBatches,
    kRefusedBatches,
    kStreamsRefused,
    kFencedBatches,
    kConflictingBatches,
    kStreamClaims,
    kWatermarkRegressions,
    kFlipFlops,
    kReportedFlipFlops,
    kLateArrivals,
    kHorizonMisses,
    kSessionUnjudged,
    kWindowLateTransactions,
    kViolationsUnlogged,
    kKeptCount,
  };
  // A kept counter: the running total of the part that counts it (in this process, or since the
  // engine's restore) is its `source`, exported as growth; `total` is what was exported, the
  // restored total included.
  struct Kept {
    prometheus::Counter* metric = nullptr;
    std::string series;
    uint64_t total = 0;
    uint64_t source = 0;
  };
  using Sources = std::array<uint64_t, kKeptCount>;

  // Adds to `counter` what the running total grew by since `*last`, then remembers it.
  static void AddGrowth(prometheus::Counter& counter, uint64_t total, uint64_t* last);
  // The sources of the kept counters now. `counters` may be null.
  static Sources ReadSources(const LiveChecker& live, uint64_t late_refusals,
                             const FindingsLogStatus& findings_log,
                             const ingest::IngestCounters* counters);
  // The findings' part of the status, and their gauges.
  server::FindingsStatus ExportFindings(const FindingsLogStatus& log, server::StatusCounts& counts);
  // Exports the kept counters' growth and saves their totals to the store if one grew.
  void ExportKept(const Sources& sources, int64_t now_ms);
  void ExportEngineStats(const engine::EngineStats& st);
  uint64_t KeptTotal(size_t i) const { return kept_[i].total; }
  // Sets database `db`'s RocksDB memory gauges and adds it to `out`.
  void ReportRocksDbMemory(std::string_view db, const rocks::RocksDbMemory& m,
                           server::MemoryStatus& out);
  // Builds the status of each stream and sets its gauges; returns the transactions ingested.
  uint64_t ExportStreams(int64_t now_ms, const LiveChecker& live, server::DaemonStatus& status);

  store::Store* const store_;
  server::DaemonMetrics* const metrics_;
  const MonitorOptions& options_;
  const int64_t start_unix_ms_;

  absl::Mutex counters_mu_;
  const ingest::IngestCounters* counters_ ABSL_GUARDED_BY(counters_mu_) = nullptr;

  // The totals last exported.
  engine::EngineStats last_stats_;
  std::array<Kept, kKeptCount> kept_;
  bool kept_restored_ = false;  // the store had totals
  bool kept_changed_ = false;   // since they were last saved
  // The horizon-miss warning, and the warning that the totals could not be saved, are logged at
  // most once a minute.
  static constexpr int64_t kWarningIntervalMs = 60'000;
  int64_t last_horizon_warning_ms_ = -kWarningIntervalMs;
  int64_t last_save_warning_ms_ = -kWarningIntervalMs;
  // When each stream's watermark last moved (wall-clock ms), and to what.
  absl::flat_hash_map<std::string, int64_t> watermark_moved_ms_;
  absl::flat_hash_map<std::string, std::optional<history::Timestamp>> last_watermark_;
  std::vector<int64_t> latencies_;  // scratch
};

}  // namespace isowatch::monitor
