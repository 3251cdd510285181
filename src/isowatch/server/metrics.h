// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace isowatch::server {

// Every metric isowatchd exports, in one prometheus-cpp registry, and its rendering in the
// Prometheus text exposition format (version 0.0.4). docs/operations.md lists them.
//
// Naming follows the Prometheus conventions: the `isowatch_` prefix, base units (`_seconds`,
// `_bytes`), `_total` on counters, and only low-cardinality labels (stream, reason, checker,
// level, anomaly): never a transaction id or a key. The process metrics keep the standard
// client-library names (`process_resident_memory_bytes`, `process_start_time_seconds`) so that
// existing dashboards and alerts apply.
//
// Thread-safety: thread-safe. The accessors may be called from any thread, and the metric objects
// they return are themselves thread-safe (prometheus-cpp uses atomics). A labelled accessor looks
// its child up under the family's lock; hot paths should keep the returned reference.
// Ownership: the registry and every metric belong to this object; returned references stay valid
// for its lifetime, except those of a stream removed with RemoveStream().
class DaemonMetrics {
 public:
  // `version` becomes the `version` label of isowatch_build_info. The start time is now.
  explicit DaemonMetrics(std::string_view version);
  ~DaemonMetrics();

  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // --- ingest ---
  // Transactions accepted from a stream (after validation and de-duplication).
  prometheus::Counter& IngestedTransactions(std::string_view stream);
  // Transactions refused at ingest; `reason` is a short fixed word ("missing_commit_ts", ...).
  prometheus::Counter& RefusedTransactions(std::string_view reason);
  // Batches recognised as already applied (same stream and sequence number) and skipped.
  prometheus::Counter& duplicate_batches() { return *duplicate_batches_; }
  // Batches refused whole (their transactions count in RefusedTransactions).
  prometheus::Counter& refused_batches() { return *refused_batches_; }
  // Watermarks below their stream's earlier one, ignored.
  prometheus::Counter& watermark_regressions() { return *watermark_regressions_; }
  // Batches refused because their stream would be one more than ingest.max_streams.
  prometheus::Counter& streams_refused() { return *streams_refused_; }
  // Batches refused because their writer is not the stream's current one (docs/ingest-protocol.md,
  // section 2), and batches refused because their (stream, seq) was durable with other content.
  prometheus::Counter& fenced_batches() { return *fenced_batches_; }
  prometheus::Counter& conflicting_batches() { return *conflicting_batches_; }
  // Claims of streams answered (new writers).
  prometheus::Counter& stream_claims() { return *stream_claims_; }
  // Batches received but not yet applied to the engine.
  prometheus::Gauge& queue_depth() { return *queue_depth_; }
  // Seconds from a batch's receipt to its durable acknowledgement.
  prometheus::Histogram& ingest_batch_latency() { return *ingest_batch_latency_; }
  // Transaction ids remembered, over all streams, to recognise transactions sent again.
  prometheus::Gauge& remembered_ids() { return *remembered_ids_; }

  // --- per stream ---
  // The physical part of the stream's watermark, in the stream's own units (TSO milliseconds,
  // hybrid-time microseconds, LSN, ...).
  prometheus::Gauge& StreamWatermark(std::string_view stream);
  // Wall-clock seconds between now and the stream's watermark, where the daemon can tell.
  prometheus::Gauge& StreamLagSeconds(std::string_view stream);
  // Transactions of the stream received but not yet final.
  prometheus::Gauge& StreamPendingTransactions(std::string_view stream);
  // Drops the stream's series (ingested, watermark, lag, pending), e.g. when a closed stream is
  // forgotten. References obtained for that stream become invalid.
  void RemoveStream(std::string_view stream);

  // --- verdicts ---
  // Final violations, by the checker that found them, the isolation level and the anomaly kind.
  prometheus::Counter& Violations(std::string_view checker, std::string_view level,
                                  std::string_view anomaly);
  // Of them, those counted in a summary instead of stored in full (docs/operations.md, "Bounded
  // findings").
  prometheus::Counter& ViolationsSummarised(std::string_view checker, std::string_view level,
                                            std::string_view anomaly);
  // Violations stored in full but not logged in full (the log's rate or budget).
  prometheus::Counter& violations_unlogged() { return *violations_unlogged_; }
  // Summaries that count at least one violation, and the violations' bytes in the store.
  prometheus::Gauge& violation_summaries() { return *violation_summaries_; }
  prometheus::Gauge& violation_store_bytes() { return *violation_store_bytes_; }
  // 1 while the store's limit for violations is reached, and while the log's budget is spent.
  prometheus::Gauge& store_limit_reached() { return *store_limit_reached_; }
  prometheus::Gauge& log_limit_reached() { return *log_limit_reached_; }
  // Verdicts reported provisionally and not yet final.
  prometheus::Gauge& provisional_verdicts() { return *provisional_verdicts_; }
  // Provisional verdicts that a later arrival changed (never reported).
  prometheus::Counter& flip_flops() { return *flip_flops_; }
  // Transactions that arrived below the final point, after the reported verdicts they could
  // reverse: an upper bound of reported verdicts a later arrival reversed. 0 with watermarks.
  prometheus::Counter& reported_flip_flops() { return *reported_flip_flops_; }
  // Transactions that arrived with a commit timestamp at or below their stream's watermark.
  prometheus::Counter& late_arrivals() { return *late_arrivals_; }
  // Reads that could not be judged because the state they needed had been collected.
  prometheus::Counter& horizon_misses() { return *horizon_misses_; }
  // Committed transactions left out of their session's checks (a session position far past the
  // first one of the session not delivered yet).
  prometheus::Counter& session_unjudged() { return *session_unjudged_; }
  // Seconds from a transaction's arrival to the final verdict on it.
  prometheus::Histogram& check_latency() { return *check_latency_; }

  // --- engine state and memory ---
  prometheus::Gauge& retained_versions() { return *retained_versions_; }
  prometheus::Gauge& retained_transactions() { return *retained_transactions_; }
  prometheus::Gauge& retained_provisional_reads() { return *retained_provisional_reads_; }
  prometheus::Gauge& engine_memory_bytes() { return *engine_memory_bytes_; }
  // The configured memory budget of the engine; 0 when there is none.
  prometheus::Gauge& engine_memory_budget_bytes() { return *engine_memory_budget_bytes_; }
  // Bytes held by the live history the engine reads (transaction contents).
  prometheus::Gauge& engine_history_bytes() { return *engine_history_bytes_; }
  // The version spill (docs/spill-format.md).
  prometheus::Gauge& spill_bytes() { return *spill_bytes_; }
  prometheus::Counter& spilled_versions() { return *spilled_versions_; }
  prometheus::Counter& spill_reloads() { return *spill_reloads_; }
  prometheus::Counter& spill_errors() { return *spill_errors_; }
  prometheus::Counter& spill_pruned() { return *spill_pruned_; }
  prometheus::Counter& evicted_keys() { return *evicted_keys_; }
  prometheus::Counter& restored_keys() { return *restored_keys_; }
  prometheus::Gauge& resident_keys() { return *resident_keys_; }
  prometheus::Counter& budget_collections() { return *budget_collections_; }
  // Seconds each write to the spill held up the engine.
  prometheus::Histogram& spill_pause() { return *spill_pause_; }
  prometheus::Histogram& spill_reload() { return *spill_reload_; }
  // Collections of the live history's byte strings (docs/engine.md, "Byte strings").
  prometheus::Histogram& byte_collection() { return *byte_collection_; }
  prometheus::Counter& byte_strings_forgotten() { return *byte_strings_forgotten_; }
  // Collections of the live history's keys (docs/engine.md, "Forgetting keys").
  prometheus::Histogram& key_collection() { return *key_collection_; }
  prometheus::Counter& keys_forgotten() { return *keys_forgotten_; }
  prometheus::Gauge& history_keys() { return *history_keys_; }
  prometheus::Counter& new_key_lookups() { return *new_key_lookups_; }
  // Checkpoints of the checking state (docs/operations.md, "Checkpoints").
  prometheus::Counter& checkpoints() { return *checkpoints_; }
  prometheus::Counter& checkpoint_failures() { return *checkpoint_failures_; }
  prometheus::Histogram& checkpoint_seconds() { return *checkpoint_seconds_; }
  prometheus::Gauge& checkpoint_bytes() { return *checkpoint_bytes_; }
  prometheus::Gauge& checkpoint_windows() { return *checkpoint_windows_; }
  // Batches in the log, from its first position to its end.
  prometheus::Gauge& log_batches() { return *log_batches_; }
  // Memory RocksDB holds for database `db` ("store", "spill"), by `kind` ("memtables",
  // "table_readers", "block_cache").
  prometheus::Gauge& RocksDbMemoryBytes(std::string_view db, std::string_view kind);

  // --- windows and plug-in checkers (docs/windows.md) ---
  prometheus::Counter& windows_sealed() { return *windows_sealed_; }
  // Sealed windows dropped unchecked because the worker pool fell behind.
  prometheus::Counter& windows_dropped() { return *windows_dropped_; }
  // Transactions that arrived after their window was sealed (in no window).
  prometheus::Counter& window_late_transactions() { return *window_late_transactions_; }
  // Sealed windows waiting for a worker.
  prometheus::Gauge& windows_queued() { return *windows_queued_; }
  // Windows a checker finished (`outcome` "checked") or ran out of time on ("unknown").
  prometheus::Counter& WindowChecks(std::string_view checker, std::string_view outcome);
  // Seconds a checker took on one window.
  prometheus::Histogram& WindowCheckSeconds(std::string_view checker);

  // 1 while the daemon is ready to take ingest, else 0. HttpApi sets it from its readiness check
  // at every scrape of /metrics.
  prometheus::Gauge& ready() { return *ready_; }

  // --- the HTTP server (docs/operations.md, "HTTP under load") ---
  // Connections open; HttpApi sets it at every scrape of /metrics.
  prometheus::Gauge& http_connections() { return *http_connections_; }
  // Connections the server closed before their client did, by `reason` (HttpDropName); every
  // reason is there, at 0, from the start.
  prometheus::Counter& HttpConnectionsDropped(std::string_view reason);
  // Requests answered without running their handler, by `reason` (HttpRejectionName).
  prometheus::Counter& HttpRequestsRejected(std::string_view reason);

  // "Can't happen" conditions the daemon survived: those counted here directly, and at every
  // Serialize() those ISOWATCH_BUG caught (common/check.h).
  prometheus::Counter& internal_bugs() { return *internal_bugs_; }

  // The registry, to add metrics of other components or to collect it directly. Serialize()
  // refreshes the process metrics first; a direct Collect() sees them as of the last Serialize().
  prometheus::Registry& registry() { return *registry_; }

  // Refreshes the scrape-time metrics (resident memory from /proc/self/statm) and renders the
  // whole registry in the Prometheus text format, version 0.0.4.
  std::string Serialize();

  // The Content-Type of Serialize()'s output.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  // Bucket upper bounds of check_latency() and ingest_batch_latency(), in seconds.
  static const std::vector<double>& CheckLatencyBuckets();
  static const std::vector<double>& IngestLatencyBuckets();

 private:
  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>* ingested_family_;
  prometheus::Family<prometheus::Counter>* refused_family_;
  prometheus::Family<prometheus::Counter>* violations_family_;
  prometheus::Family<prometheus::Counter>* summarised_family_;
  prometheus::Counter* violations_unlogged_;
  prometheus::Gauge* violation_summaries_;
  prometheus::Gauge* violation_store_bytes_;
  prometheus::Gauge* store_limit_reached_;
  prometheus::Gauge* log_limit_reached_;
  prometheus::Family<prometheus::Gauge>* watermark_family_;
  prometheus::Family<prometheus::Gauge>* lag_family_;
  prometheus::Family<prometheus::Gauge>* pending_family_;

  prometheus::Counter* duplicate_batches_;
  prometheus::Counter* refused_batches_;
  prometheus::Counter* watermark_regressions_;
  prometheus::Counter* streams_refused_;
  prometheus::Counter* fenced_batches_;
  prometheus::Counter* conflicting_batches_;
  prometheus::Counter* stream_claims_;
  prometheus::Gauge* queue_depth_;
  prometheus::Histogram* ingest_batch_latency_;
  prometheus::Gauge* remembered_ids_;
  prometheus::Gauge* provisional_verdicts_;
  prometheus::Counter* flip_flops_;
  prometheus::Counter* reported_flip_flops_;
  prometheus::Counter* late_arrivals_;
  prometheus::Counter* horizon_misses_;
  prometheus::Counter* session_unjudged_;
  prometheus::Histogram* check_latency_;
  prometheus::Gauge* retained_versions_;
  prometheus::Gauge* retained_transactions_;
  prometheus::Gauge* retained_provisional_reads_;
  prometheus::Gauge* engine_memory_bytes_;
  prometheus::Gauge* engine_memory_budget_bytes_;
  prometheus::Gauge* engine_history_bytes_;
  prometheus::Gauge* spill_bytes_;
  prometheus::Counter* spilled_versions_;
  prometheus::Counter* spill_reloads_;
  prometheus::Counter* spill_errors_;
  prometheus::Counter* spill_pruned_;
  prometheus::Counter* evicted_keys_;
  prometheus::Counter* restored_keys_;
  prometheus::Gauge* resident_keys_;
  prometheus::Counter* budget_collections_;
  prometheus::Histogram* spill_pause_;
  prometheus::Histogram* byte_collection_;
  prometheus::Counter* byte_strings_forgotten_;
  prometheus::Histogram* key_collection_;
  prometheus::Counter* keys_forgotten_;
  prometheus::Gauge* history_keys_;
  prometheus::Counter* new_key_lookups_;
  prometheus::Counter* checkpoints_;
  prometheus::Counter* checkpoint_failures_;
  prometheus::Histogram* checkpoint_seconds_;
  prometheus::Gauge* checkpoint_bytes_;
  prometheus::Gauge* checkpoint_windows_;
  prometheus::Gauge* log_batches_;
  prometheus::Histogram* spill_reload_;
  prometheus::Family<prometheus::Gauge>* rocksdb_memory_family_;
  prometheus::Counter* windows_sealed_;
  prometheus::Counter* windows_dropped_;
  prometheus::Counter* window_late_transactions_;
  prometheus::Gauge* windows_queued_;
  prometheus::Family<prometheus::Counter>* window_checks_family_;
  prometheus::Family<prometheus::Histogram>* window_seconds_family_;
  prometheus::Gauge* ready_;
  prometheus::Gauge* http_connections_;
  prometheus::Family<prometheus::Counter>* http_dropped_family_;
  prometheus::Family<prometheus::Counter>* http_rejected_family_;
  prometheus::Counter* internal_bugs_;
  // common::InternalBugCount() as last added to internal_bugs_. Relaxed: a mark only raised.
  std::atomic<uint64_t> bugs_exported_{0};
  prometheus::Gauge* resident_memory_bytes_;
  prometheus::Gauge* start_time_seconds_;
  prometheus::Gauge* uptime_seconds_;

  std::chrono::steady_clock::time_point start_;
};

}  // namespace isowatch::server
