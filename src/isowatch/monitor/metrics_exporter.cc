// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/metrics_exporter.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include <spdlog/spdlog.h>

#include "isowatch/ingest/validate.h"

namespace isowatch::monitor {

MetricsExporter::MetricsExporter(store::Store* store, server::DaemonMetrics* metrics,
                                 const MonitorOptions& options, int64_t start_unix_ms)
    : store_(store), metrics_(metrics), options_(options), start_unix_ms_(start_unix_ms) {}

void MetricsExporter::SetIngestCounters(const ingest::IngestCounters* counters) {
  absl::MutexLock l(&counters_mu_);
  counters_ = counters;
}

void MetricsExporter::AddGrowth(prometheus::Counter& counter, uint64_t total, uint64_t* last) {
  if (total > *last) counter.Increment(static_cast<double>(total - *last));
  *last = total;
}

void MetricsExporter::ExportEngineStats(int64_t now_ms, const engine::EngineStats& st) {
  engine::EngineStats& last = last_stats_;
  AddGrowth(metrics_->flip_flops(), st.flip_flops, &last.flip_flops);
  AddGrowth(metrics_->late_arrivals(), st.late_arrivals, &last.late_arrivals);
  const uint64_t misses_before = last.horizon_misses;
  AddGrowth(metrics_->horizon_misses(), st.horizon_misses, &last.horizon_misses);
  AddGrowth(metrics_->session_unjudged(), st.session_unjudged, &last.session_unjudged);
  // A read left unjudged is a check not made: say why, and what cures it, at most once a minute.
  if (st.horizon_misses > misses_before &&
      now_ms - last_horizon_warning_ms_ >= kHorizonWarningIntervalMs) {
    last_horizon_warning_ms_ = now_ms;
    spdlog::warn(
        "{} reads left unjudged so far: the versions they needed were already collected; raise "
        "engine.retention to the longest transaction, in the unit of the timestamps (bytes of WAL "
        "for PostgreSQL)",
        st.horizon_misses);
  }
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

uint64_t MetricsExporter::ExportIngestCounters(const ingest::IngestCounters& counters) {
  uint64_t refused_total = 0;
  last_refusals_.resize(ingest::kRefusalReasonCount, 0);
  for (int r = 0; r < ingest::kRefusalReasonCount; ++r) {
    // Relaxed: a running total read for export; nothing else is read through it.
    const uint64_t n = counters.refusals[r].load(std::memory_order_relaxed);
    refused_total += n;
    if (n > last_refusals_[r]) {
      metrics_->RefusedTransactions(ingest::RefusalReasonName(static_cast<v1::RefusalReason>(r)))
          .Increment(static_cast<double>(n - last_refusals_[r]));
      last_refusals_[r] = n;
    }
  }
  // Relaxed: as above.
  AddGrowth(metrics_->duplicate_batches(),
            counters.batches_duplicate.load(std::memory_order_relaxed), &last_duplicates_);
  AddGrowth(metrics_->streams_refused(), counters.streams_refused.load(std::memory_order_relaxed),
            &last_streams_refused_);
  return refused_total;
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
    // Lag: how long ago the stream's watermark last moved (its promise is that old).
    auto& last = last_watermark_[s.name];
    if (!watermark_moved_ms_.contains(s.name) || last != s.watermark) {
      watermark_moved_ms_[s.name] = now_ms;
      last = s.watermark;
    }
    if (!s.closed) {
      out.lag_seconds = static_cast<double>(now_ms - watermark_moved_ms_[s.name]) / 1000.0;
      metrics_->StreamLagSeconds(s.name).Set(*out.lag_seconds);
    } else {
      metrics_->StreamLagSeconds(s.name).Set(0);
    }
    if (s.watermark) {
      metrics_->StreamWatermark(s.name).Set(static_cast<double>(s.watermark->physical));
    }
    metrics_->StreamPendingTransactions(s.name).Set(static_cast<double>(s.pending));
    status.streams.push_back(std::move(out));
  }
  return ingested;
}

server::DaemonStatus MetricsExporter::Refresh(int64_t now_ms, LiveChecker& live, const Inputs& in) {
  metrics_->log_batches().Set(
      static_cast<double>(store_->next_log_position() - store_->first_log_position()));
  const engine::EngineStats& st = live.stats();
  ExportEngineStats(now_ms, st);
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
  const uint64_t refused_total = counters != nullptr ? ExportIngestCounters(*counters) : 0;

  server::DaemonStatus status;
  status.version = options_.version;
  status.start_unix_ms = start_unix_ms_;
  status.counts.ingested_transactions = ExportStreams(now_ms, live, status);
  status.counts.queued_batches = in.queued_batches;
  status.counts.violations = store_->CountViolations();
  status.counts.provisional_verdicts = st.provisional_reads;
  status.counts.flip_flops = st.flip_flops;
  status.counts.late_arrivals = st.late_arrivals;
  status.counts.horizon_misses = st.horizon_misses;
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
    const windows::CutterStats* cut = live.window_stats();
    const uint64_t late = cut != nullptr ? cut->late : 0;
    AddGrowth(metrics_->window_late_transactions(), late, &last_window_late_);
    status.windows = in.windows->Status();
    status.windows.late_transactions = late;
    metrics_->windows_queued().Set(static_cast<double>(status.windows.queued));
  }
  status.counts.refused_transactions = refused_total + in.late_refusals;
  if (counters != nullptr) {
    // Relaxed: a running total read for display.
    status.counts.duplicate_batches = counters->batches_duplicate.load(std::memory_order_relaxed);
  }
  return status;
}

}  // namespace isowatch::monitor
