// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/metrics_exporter.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::monitor {

namespace {

std::string RefusalSeries(std::string_view reason) {
  return fmt::format("isowatch_refused_transactions_total{{reason=\"{}\"}}", reason);
}

// The refusal reason of transactions the live history refuses after their batch was
// acknowledged: a transaction id it already holds.
constexpr std::string_view kHistoryConflict = "history_conflict";

// The anomalies the online engine reports at `level` (docs/engine.md): NOCONFLICT under SI only.
std::vector<verdict::Anomaly> OnlineAnomalies(verdict::IsolationLevel level) {
  std::vector<verdict::Anomaly> out = {verdict::Anomaly::kSession, verdict::Anomaly::kInt,
                                       verdict::Anomaly::kExt};
  if (level == verdict::IsolationLevel::kSnapshotIsolation) {
    out.push_back(verdict::Anomaly::kNoConflict);
  }
  return out;
}

}  // namespace

MetricsExporter::MetricsExporter(store::Store* store, server::DaemonMetrics* metrics,
                                 const MonitorOptions& options, int64_t start_unix_ms)
    : store_(store), metrics_(metrics), options_(options), start_unix_ms_(start_unix_ms) {
  for (int r = 0; r < ingest::kRefusalReasonCount; ++r) {
    kept_[r].series = RefusalSeries(ingest::RefusalReasonName(static_cast<v1::RefusalReason>(r)));
  }
  kept_[kHistoryConflicts].series = RefusalSeries(kHistoryConflict);
  kept_[kDuplicateBatches] = {.metric = &metrics_->duplicate_batches(),
                              .series = "isowatch_duplicate_batches_total"};
  kept_[kRefusedBatches] = {.metric = &metrics_->refused_batches(),
                            .series = "isowatch_refused_batches_total"};
  kept_[kStreamsRefused] = {.metric = &metrics_->streams_refused(),
                            .series = "isowatch_ingest_streams_refused_total"};
  kept_[kFencedBatches] = {.metric = &metrics_->fenced_batches(),
                           .series = "isowatch_ingest_fenced_batches_total"};
  kept_[kConflictingBatches] = {.metric = &metrics_->conflicting_batches(),
                                .series = "isowatch_ingest_conflicting_batches_total"};
  kept_[kStreamClaims] = {.metric = &metrics_->stream_claims(),
                          .series = "isowatch_ingest_stream_claims_total"};
  kept_[kWatermarkRegressions] = {.metric = &metrics_->watermark_regressions(),
                                  .series = "isowatch_watermark_regressions_total"};
  kept_[kFlipFlops] = {.metric = &metrics_->flip_flops(), .series = "isowatch_flip_flops_total"};
  kept_[kReportedFlipFlops] = {.metric = &metrics_->reported_flip_flops(),
                               .series = "isowatch_reported_flip_flops_total"};
  kept_[kLateArrivals] = {.metric = &metrics_->late_arrivals(),
                          .series = "isowatch_late_arrivals_total"};
  kept_[kHorizonMisses] = {.metric = &metrics_->horizon_misses(),
                           .series = "isowatch_horizon_misses_total"};
  kept_[kSessionUnjudged] = {.metric = &metrics_->session_unjudged(),
                             .series = "isowatch_session_unjudged_total"};
  kept_[kWindowLateTransactions] = {.metric = &metrics_->window_late_transactions(),
                                    .series = "isowatch_window_late_transactions_total"};
  kept_[kViolationsUnlogged] = {.metric = &metrics_->violations_unlogged(),
                                .series = "isowatch_violations_unlogged_total"};
}

void MetricsExporter::SetIngestCounters(const ingest::IngestCounters* counters) {
  absl::MutexLock l(&counters_mu_);
  counters_ = counters;
}

absl::Status MetricsExporter::Restore() {
  // Every series a label value can take exists from the start, at 0: Prometheus' increase()
  // then sees the first violation or refusal of each kind.
  for (int r = 1; r < ingest::kRefusalReasonCount; ++r) {
    kept_[r].metric = &metrics_->RefusedTransactions(
        ingest::RefusalReasonName(static_cast<v1::RefusalReason>(r)));
  }
  kept_[kHistoryConflicts].metric = &metrics_->RefusedTransactions(kHistoryConflict);
  const verdict::IsolationLevel level = options_.live.engine.level;
  for (verdict::Anomaly anomaly : OnlineAnomalies(level)) {
    metrics_->Violations(store::Store::kOnlineChecker, verdict::IsolationLevelName(level),
                         verdict::AnomalyName(anomaly));
    metrics_->ViolationsSummarised(store::Store::kOnlineChecker, verdict::IsolationLevelName(level),
                                   verdict::AnomalyName(anomaly));
  }
  for (const auto& [kind, count] : store_->CountViolationsByKind()) {
    metrics_->Violations(kind.checker, kind.level, kind.anomaly)
        .Increment(static_cast<double>(count));
  }
  for (const auto& [kind, count] : store_->CountSummarisedByKind()) {
    metrics_->ViolationsSummarised(kind.checker, kind.level, kind.anomaly)
        .Increment(static_cast<double>(count));
  }
  ASSIGN_OR_RETURN(const std::string blob, store_->CounterTotals());
  if (blob.empty()) return absl::OkStatus();
  v1::CounterTotals saved;
  if (!saved.ParseFromString(blob)) {
    return absl::DataLossError("the store's counter totals do not parse");
  }
  for (const v1::CounterTotals::Counter& c : saved.counters()) {
    for (size_t i = 0; i < kKeptCount; ++i) {
      if (kept_[i].series != c.series()) continue;
      if (kept_[i].metric == nullptr) {
        kept_[i].metric = &metrics_->RefusedTransactions(
            ingest::RefusalReasonName(static_cast<v1::RefusalReason>(i)));
      }
      kept_[i].total = c.total();
      kept_[i].metric->Increment(static_cast<double>(c.total()));
    }
  }
  kept_restored_ = true;
  return absl::OkStatus();
}

void MetricsExporter::EndRecovery(const LiveChecker& live, uint64_t late_refusals,
                                  const FindingsLogStatus& findings_log) {
  const Sources sources = ReadSources(live, late_refusals, findings_log, nullptr);
  for (size_t i = 0; i < kKeptCount; ++i) {
    // Without saved totals (a new store, or one written before they were kept) the replay's
    // counts are all there is. The violations not logged during the replay were found for the
    // first time (those found again are neither logged nor counted): they count.
    if (kept_restored_ && i != kViolationsUnlogged) kept_[i].source = sources[i];
  }
}

void MetricsExporter::AddGrowth(prometheus::Counter& counter, uint64_t total, uint64_t* last) {
  if (total > *last) counter.Increment(static_cast<double>(total - *last));
  *last = total;
}

MetricsExporter::Sources MetricsExporter::ReadSources(const LiveChecker& live,
                                                      uint64_t late_refusals,
                                                      const FindingsLogStatus& findings_log,
                                                      const ingest::IngestCounters* counters) {
  Sources out{};
  if (counters != nullptr) {
    // Relaxed: running totals read for export; nothing else is read through them.
    for (int r = 0; r < ingest::kRefusalReasonCount; ++r) {
      out[r] = counters->refusals[r].load(std::memory_order_relaxed);
    }
    out[kDuplicateBatches] = counters->batches_duplicate.load(std::memory_order_relaxed);
    out[kRefusedBatches] = counters->batches_refused.load(std::memory_order_relaxed);
    out[kStreamsRefused] = counters->streams_refused.load(std::memory_order_relaxed);
    out[kFencedBatches] = counters->batches_fenced.load(std::memory_order_relaxed);
    out[kConflictingBatches] = counters->batches_conflicting.load(std::memory_order_relaxed);
    out[kStreamClaims] = counters->claims.load(std::memory_order_relaxed);
    out[kWatermarkRegressions] = counters->watermark_regressions.load(std::memory_order_relaxed);
  }
  out[kHistoryConflicts] = late_refusals;
  const engine::EngineStats& st = live.stats();
  out[kFlipFlops] = st.flip_flops;
  out[kReportedFlipFlops] = st.below_final_arrivals;
  out[kLateArrivals] = st.late_arrivals;
  out[kHorizonMisses] = st.horizon_misses;
  out[kSessionUnjudged] = st.session_unjudged;
  if (const windows::CutterStats* cut = live.window_stats(); cut != nullptr) {
    out[kWindowLateTransactions] = cut->late;
  }
  out[kViolationsUnlogged] = findings_log.unlogged;
  return out;
}

void MetricsExporter::ExportKept(const Sources& sources, int64_t now_ms) {
  const uint64_t misses_before = kept_[kHorizonMisses].total;
  for (size_t i = 0; i < kKeptCount; ++i) {
    Kept& k = kept_[i];
    // A source only grows, but the engine's restart from a checkpoint zeroes its own.
    if (sources[i] > k.source) {
      const uint64_t growth = sources[i] - k.source;
      if (k.metric == nullptr) {
        k.metric = &metrics_->RefusedTransactions(
            ingest::RefusalReasonName(static_cast<v1::RefusalReason>(i)));
      }
      k.metric->Increment(static_cast<double>(growth));
      k.total += growth;
      kept_changed_ = true;
    }
    k.source = sources[i];
  }
  // A read left unjudged is a check not made: say why, and what cures it, at most once a minute.
  const uint64_t misses = kept_[kHorizonMisses].total;
  if (misses > misses_before && now_ms - last_horizon_warning_ms_ >= kWarningIntervalMs) {
    last_horizon_warning_ms_ = now_ms;
    spdlog::warn(
        "{} reads left unjudged so far: the versions they needed were already collected; raise "
        "engine.retention to the longest transaction, in the unit of the timestamps (bytes of WAL "
        "for PostgreSQL)",
        misses);
  }
  if (!kept_changed_) return;
  v1::CounterTotals totals;
  for (const Kept& k : kept_) {
    if (k.total == 0) continue;
    v1::CounterTotals::Counter* c = totals.add_counters();
    c->set_series(k.series);
    c->set_total(k.total);
  }
  if (absl::Status s = store_->SetCounterTotals(totals.SerializeAsString()); !s.ok()) {
    if (now_ms - last_save_warning_ms_ >= kWarningIntervalMs) {
      last_save_warning_ms_ = now_ms;
      spdlog::warn("the counter totals could not be saved (a restart may lose some): {}",
                   common::StdView(s.message()));
    }
    return;
  }
  kept_changed_ = false;
}

void MetricsExporter::ExportEngineStats(const engine::EngineStats& st) {
  engine::EngineStats& last = last_stats_;
  AddGrowth(metrics_->spilled_versions(), st.spilled_versions, &last.spilled_versions);
  AddGrowth(metrics_->spill_reloads(), st.reloads, &last.reloads);
  AddGrowth(metrics_->spill_errors(), st.spill_errors, &last.spill_errors);
  AddGrowth(metrics_->spill_pruned(), st.spill_pruned, &last.spill_pruned);
  AddGrowth(metrics_->evicted_keys(), st.evicted_keys, &last.evicted_keys);
  AddGrowth(metrics_->restored_keys(), st.restored_keys, &last.restored_keys);
  AddGrowth(metrics_->new_key_lookups(), st.new_key_lookups, &last.new_key_lookups);
  AddGrowth(metrics_->budget_collections(), st.budget_collections, &last.budget_collections);
  last_stats_ = st;
  metrics_->spill_bytes().Set(static_cast<double>(st.spill_bytes));
  metrics_->provisional_verdicts().Set(static_cast<double>(st.provisional_reads));
  metrics_->retained_versions().Set(static_cast<double>(st.retained_versions));
  metrics_->resident_keys().Set(static_cast<double>(st.resident_keys));
  metrics_->retained_transactions().Set(static_cast<double>(st.retained_txns));
  metrics_->retained_provisional_reads().Set(static_cast<double>(st.provisional_reads));
}

void MetricsExporter::ReportRocksDbMemory(std::string_view db, const rocks::RocksDbMemory& m,
                                          server::MemoryStatus& out) {
  metrics_->RocksDbMemoryBytes(db, "memtables").Set(static_cast<double>(m.memtables));
  metrics_->RocksDbMemoryBytes(db, "table_readers").Set(static_cast<double>(m.table_readers));
  metrics_->RocksDbMemoryBytes(db, "block_cache").Set(static_cast<double>(m.block_cache));
  out.rocksdb.push_back(server::RocksDbMemoryStatus{.db = std::string(db),
                                                    .memtables = m.memtables,
                                                    .table_readers = m.table_readers,
                                                    .block_cache = m.block_cache});
  out.rocksdb_bytes += m.total();
}

uint64_t MetricsExporter::ExportStreams(int64_t now_ms, const LiveChecker& live,
                                        server::DaemonStatus& status) {
  uint64_t ingested = 0;
  for (const LiveStreamStatus& s : live.Streams()) {
    server::StreamStatus out;
    out.name = s.name;
    out.watermark = s.watermark;
    out.closed = s.closed;
    out.pending_transactions = s.pending;
    out.ingested_transactions = s.delivered;
    out.committed_transactions = s.committed;
    ingested += s.delivered;
    // Lag (docs/operations.md, "Streams"): wall-clock time minus the watermark where the
    // stream's timestamps are a clock (0 if the watermark is ahead of this clock); otherwise how
    // long ago the watermark last moved (its promise is that old).
    auto& last = last_watermark_[s.name];
    if (!watermark_moved_ms_.contains(s.name) || last != s.watermark) {
      watermark_moved_ms_[s.name] = now_ms;
      last = s.watermark;
    }
    if (s.closed) {
      metrics_->StreamLagSeconds(s.name).Set(0);
    } else {
      if (s.clock_ns > 0 && s.watermark) {
        const double watermark_s =
            static_cast<double>(s.watermark->physical) * static_cast<double>(s.clock_ns) / 1e9;
        out.lag_seconds = std::max(0.0, static_cast<double>(now_ms) / 1000.0 - watermark_s);
      } else {
        out.lag_seconds = static_cast<double>(now_ms - watermark_moved_ms_[s.name]) / 1000.0;
      }
      metrics_->StreamLagSeconds(s.name).Set(*out.lag_seconds);
    }
    if (s.watermark) {
      metrics_->StreamWatermark(s.name).Set(static_cast<double>(s.watermark->physical));
    }
    metrics_->StreamPendingTransactions(s.name).Set(static_cast<double>(s.pending));
    status.streams.push_back(std::move(out));
  }
  return ingested;
}

server::FindingsStatus MetricsExporter::ExportFindings(const FindingsLogStatus& log,
                                                       server::StatusCounts& counts) {
  counts.violations = 0;
  for (const auto& [kind, n] : store_->CountViolationsByKind()) counts.violations += n;
  counts.violations_summarised = store_->CountSummarised();
  counts.violations_stored = store_->CountViolations();
  const store::ViolationSpace space = store_->violation_space();
  server::FindingsStatus out;
  out.state = space.limit_reached                ? "store_limit_reached"
              : counts.violations_summarised > 0 ? "summarising"
                                                 : "complete";
  out.summaries = space.summaries;
  out.store_bytes = space.bytes;
  out.max_store_bytes = store_->violation_bounds().max_bytes;
  out.log_state = log.budget_spent   ? "budget_spent"
                  : log.unlogged > 0 ? "rate_limited"
                                     : "complete";
  out.logged = log.logged;
  out.unlogged = KeptTotal(kViolationsUnlogged);
  out.log_bytes = log.log_bytes;
  out.max_log_bytes = options_.findings_log.max_log_bytes;
  metrics_->violation_summaries().Set(static_cast<double>(space.summaries));
  metrics_->violation_store_bytes().Set(static_cast<double>(space.bytes));
  metrics_->store_limit_reached().Set(space.limit_reached ? 1 : 0);
  metrics_->log_limit_reached().Set(log.budget_spent ? 1 : 0);
  return out;
}

server::DaemonStatus MetricsExporter::Refresh(int64_t now_ms, LiveChecker& live, const Inputs& in) {
  metrics_->log_batches().Set(
      static_cast<double>(store_->next_log_position() - store_->first_log_position()));
  const engine::EngineStats& st = live.stats();
  ExportEngineStats(st);
  const auto history_bytes = static_cast<uint64_t>(live.history_bytes());
  metrics_->engine_history_bytes().Set(static_cast<double>(history_bytes));
  metrics_->history_keys().Set(static_cast<double>(live.history_keys()));
  metrics_->engine_memory_bytes().Set(static_cast<double>(st.memory_bytes));
  metrics_->remembered_ids().Set(static_cast<double>(in.remembered_ids));

  latencies_.clear();
  live.CollectFinal(now_ms, &latencies_);
  for (int64_t ms : latencies_) {
    metrics_->check_latency().Observe(static_cast<double>(std::max<int64_t>(ms, 0)) / 1000.0);
  }

  const ingest::IngestCounters* counters = nullptr;
  {
    absl::MutexLock l(&counters_mu_);
    counters = counters_;
  }
  metrics_->queue_depth().Set(static_cast<double>(in.queued_batches));
  ExportKept(ReadSources(live, in.late_refusals, in.findings_log, counters), now_ms);

  server::DaemonStatus status;
  status.version = options_.version;
  status.start_unix_ms = start_unix_ms_;
  status.counts.ingested_transactions = ExportStreams(now_ms, live, status);
  status.counts.queued_batches = in.queued_batches;
  status.findings = ExportFindings(in.findings_log, status.counts);
  status.counts.provisional_verdicts = st.provisional_reads;
  status.counts.flip_flops = KeptTotal(kFlipFlops);
  status.counts.reported_flip_flops = KeptTotal(kReportedFlipFlops);
  status.counts.late_arrivals = KeptTotal(kLateArrivals);
  status.counts.horizon_misses = KeptTotal(kHorizonMisses);
  status.memory.engine_bytes = st.memory_bytes;
  status.memory.history_bytes = history_bytes;
  status.memory.spill_bytes = st.spill_bytes;
  status.memory.budget_bytes = options_.live.engine.memory_budget;
  status.memory.retained_versions = st.retained_versions;
  status.memory.retained_transactions = st.retained_txns;
  status.memory.retained_provisional_reads = st.provisional_reads;
  ReportRocksDbMemory("store", store_->rocksdb_memory(), status.memory);
  if (options_.rocks_spill != nullptr) {
    ReportRocksDbMemory("spill", options_.rocks_spill->rocksdb_memory(), status.memory);
  }
  if (in.windows != nullptr) {
    status.windows = in.windows->Status();
    status.windows.late_transactions = KeptTotal(kWindowLateTransactions);
    metrics_->windows_queued().Set(static_cast<double>(status.windows.queued));
  }
  uint64_t refused = KeptTotal(kHistoryConflicts);
  for (int r = 0; r < ingest::kRefusalReasonCount; ++r) refused += KeptTotal(r);
  status.counts.refused_transactions = refused;
  status.counts.duplicate_batches = KeptTotal(kDuplicateBatches);
  return status;
}

}  // namespace isowatch::monitor
