// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/metrics.h"

#include <array>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "isowatch/common/check.h"
#include "isowatch/server/http_server.h"
#include "isowatch/server/process_memory.h"

namespace isowatch::server {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Gauge;

// Arrival to final verdict: from a millisecond (in-memory check at the watermark) to a minute
// (a stream whose watermark lags).
constexpr std::array<double, 16> kCheckLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60};
// Receipt to durable acknowledgement: a RocksDB write, normally well under 10 ms.
constexpr std::array<double, 14> kIngestLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

}  // namespace

const std::vector<double>& DaemonMetrics::CheckLatencyBuckets() {
  static const std::vector<double> kBuckets(kCheckLatencyBuckets.begin(),
                                            kCheckLatencyBuckets.end());
  return kBuckets;
}

const std::vector<double>& DaemonMetrics::IngestLatencyBuckets() {
  static const std::vector<double> kBuckets(kIngestLatencyBuckets.begin(),
                                            kIngestLatencyBuckets.end());
  return kBuckets;
}

DaemonMetrics::DaemonMetrics(std::string_view version)
    : registry_(std::make_shared<prometheus::Registry>()),
      start_(std::chrono::steady_clock::now()) {
  prometheus::Registry& r = *registry_;

  ingested_family_ = &BuildCounter()
                          .Name("isowatch_ingested_transactions_total")
                          .Help("Transactions accepted at ingest, by stream.")
                          .Register(r);
  refused_family_ = &BuildCounter()
                         .Name("isowatch_refused_transactions_total")
                         .Help("Transactions refused at ingest, by reason.")
                         .Register(r);
  duplicate_batches_ = &BuildCounter()
                            .Name("isowatch_duplicate_batches_total")
                            .Help(
                                "Batches recognised as already applied (same stream and "
                                "sequence number) and skipped.")
                            .Register(r)
                            .Add({});
  refused_batches_ = &BuildCounter()
                          .Name("isowatch_refused_batches_total")
                          .Help(
                              "Batches refused whole; their transactions count in "
                              "isowatch_refused_transactions_total.")
                          .Register(r)
                          .Add({});
  watermark_regressions_ = &BuildCounter()
                                .Name("isowatch_watermark_regressions_total")
                                .Help(
                                    "Watermarks received below their stream's earlier one, and "
                                    "ignored.")
                                .Register(r)
                                .Add({});
  streams_refused_ = &BuildCounter()
                          .Name("isowatch_ingest_streams_refused_total")
                          .Help(
                              "Batches refused because their stream would exceed "
                              "ingest.max_streams.")
                          .Register(r)
                          .Add({});
  fenced_batches_ = &BuildCounter()
                         .Name("isowatch_ingest_fenced_batches_total")
                         .Help(
                             "Batches refused because a newer writer claimed their stream, or "
                             "their writer's epoch is unknown to the daemon.")
                         .Register(r)
                         .Add({});
  conflicting_batches_ = &BuildCounter()
                              .Name("isowatch_ingest_conflicting_batches_total")
                              .Help(
                                  "Batches refused because their stream and sequence number were "
                                  "durable with other content.")
                              .Register(r)
                              .Add({});
  stream_claims_ = &BuildCounter()
                        .Name("isowatch_ingest_stream_claims_total")
                        .Help("Claims of streams answered: writers that took a stream.")
                        .Register(r)
                        .Add({});
  queue_depth_ = &BuildGauge()
                      .Name("isowatch_ingest_queue_batches")
                      .Help("Batches received and not yet applied to the engine.")
                      .Register(r)
                      .Add({});
  ingest_batch_latency_ = &BuildHistogram()
                               .Name("isowatch_ingest_batch_latency_seconds")
                               .Help("Time from a batch's receipt to its durable acknowledgement.")
                               .Register(r)
                               .Add({}, IngestLatencyBuckets());
  remembered_ids_ = &BuildGauge()
                         .Name("isowatch_ingest_remembered_ids")
                         .Help(
                             "Transaction ids remembered, over all streams, to recognise "
                             "transactions sent again.")
                         .Register(r)
                         .Add({});

  watermark_family_ = &BuildGauge()
                           .Name("isowatch_stream_watermark")
                           .Help(
                               "Physical part of the stream's watermark, in the stream's own "
                               "timestamp units.")
                           .Register(r);
  lag_family_ = &BuildGauge()
                     .Name("isowatch_stream_lag_seconds")
                     .Help(
                         "Wall-clock seconds between now and the stream's watermark (for a "
                         "stream whose timestamps are no clock: since the watermark last moved).")
                     .Register(r);
  pending_family_ = &BuildGauge()
                         .Name("isowatch_stream_pending_transactions")
                         .Help("Transactions of the stream received and not yet final.")
                         .Register(r);

  violations_family_ = &BuildCounter()
                            .Name("isowatch_violations_total")
                            .Help("Final isolation violations, by checker, level and anomaly.")
                            .Register(r);
  summarised_family_ = &BuildCounter()
                            .Name("isowatch_violations_summarised_total")
                            .Help(
                                "Of the final violations, those counted in a summary instead of "
                                "stored in full (findings.max_per_key, max_per_txn, "
                                "max_store_bytes).")
                            .Register(r);
  violations_unlogged_ = &BuildCounter()
                              .Name("isowatch_violations_unlogged_total")
                              .Help(
                                  "Violations stored in full but not logged in full "
                                  "(findings.log_per_minute, max_log_bytes).")
                              .Register(r)
                              .Add({});
  violation_summaries_ = &BuildGauge()
                              .Name("isowatch_violation_summaries")
                              .Help("Summaries in the store that count at least one violation.")
                              .Register(r)
                              .Add({});
  violation_store_bytes_ = &BuildGauge()
                                .Name("isowatch_violation_store_bytes")
                                .Help(
                                    "Bytes of the stored violations, their ids and the "
                                    "summaries, as encoded (findings.max_store_bytes bounds it).")
                                .Register(r)
                                .Add({});
  {
    auto& limits = BuildGauge()
                       .Name("isowatch_findings_limit_reached")
                       .Help(
                           "1 while a limit on findings is reached: store (violations only "
                           "counted by kind) or log (violations no longer logged in full).")
                       .Register(r);
    store_limit_reached_ = &limits.Add({{"limit", "store"}});
    log_limit_reached_ = &limits.Add({{"limit", "log"}});
  }
  provisional_verdicts_ = &BuildGauge()
                               .Name("isowatch_provisional_verdicts")
                               .Help("Verdicts reported provisionally and not yet final.")
                               .Register(r)
                               .Add({});
  flip_flops_ = &BuildCounter()
                     .Name("isowatch_flip_flops_total")
                     .Help(
                         "Provisional verdicts a later arrival changed before they were final "
                         "(never reported).")
                     .Register(r)
                     .Add({});
  reported_flip_flops_ = &BuildCounter()
                              .Name("isowatch_reported_flip_flops_total")
                              .Help(
                                  "Transactions that arrived below the final point, after the "
                                  "reported verdicts they could reverse (an upper bound of "
                                  "reported flip-flops; 0 with watermarks).")
                              .Register(r)
                              .Add({});
  late_arrivals_ = &BuildCounter()
                        .Name("isowatch_late_arrivals_total")
                        .Help(
                            "Transactions whose commit timestamp was at or below their stream's "
                            "watermark when they arrived.")
                        .Register(r)
                        .Add({});
  horizon_misses_ = &BuildCounter()
                         .Name("isowatch_horizon_misses_total")
                         .Help(
                             "Reads left unjudged because the state they needed had already "
                             "been collected.")
                         .Register(r)
                         .Add({});
  session_unjudged_ = &BuildCounter()
                           .Name("isowatch_session_unjudged_total")
                           .Help(
                               "Committed transactions left out of their session's checks: their "
                               "session position lay too far past a position not delivered.")
                           .Register(r)
                           .Add({});
  check_latency_ = &BuildHistogram()
                        .Name("isowatch_check_latency_seconds")
                        .Help("Time from a transaction's arrival to the final verdict on it.")
                        .Register(r)
                        .Add({}, CheckLatencyBuckets());

  retained_versions_ = &BuildGauge()
                            .Name("isowatch_engine_retained_versions")
                            .Help("Committed versions held in the engine's per-key chains.")
                            .Register(r)
                            .Add({});
  retained_transactions_ = &BuildGauge()
                                .Name("isowatch_engine_retained_transactions")
                                .Help("Transactions held in the engine's memory.")
                                .Register(r)
                                .Add({});
  retained_provisional_reads_ = &BuildGauge()
                                     .Name("isowatch_engine_retained_provisional_reads")
                                     .Help(
                                         "Reads held in memory because their verdict is not "
                                         "final yet.")
                                     .Register(r)
                                     .Add({});
  engine_memory_bytes_ = &BuildGauge()
                              .Name("isowatch_engine_memory_bytes")
                              .Help(
                                  "Memory held by the engine's state, as the engine counts it "
                                  "(what the memory budget applies to).")
                              .Register(r)
                              .Add({});
  engine_history_bytes_ = &BuildGauge()
                               .Name("isowatch_engine_history_bytes")
                               .Help("Memory held by the live history of transaction contents.")
                               .Register(r)
                               .Add({});
  spill_bytes_ = &BuildGauge()
                      .Name("isowatch_engine_spill_bytes")
                      .Help("Bytes the version spill holds on disk (estimate).")
                      .Register(r)
                      .Add({});
  spilled_versions_ = &BuildCounter()
                           .Name("isowatch_engine_spilled_versions_total")
                           .Help("Versions moved from memory to the spill.")
                           .Register(r)
                           .Add({});
  spill_reloads_ = &BuildCounter()
                        .Name("isowatch_engine_spill_reloads_total")
                        .Help("Checks that read versions back from the spill.")
                        .Register(r)
                        .Add({});
  spill_errors_ = &BuildCounter()
                       .Name("isowatch_engine_spill_errors_total")
                       .Help("Failed spill reads or writes (the spill is then off).")
                       .Register(r)
                       .Add({});
  spill_pruned_ = &BuildCounter()
                       .Name("isowatch_engine_spill_pruned_versions_total")
                       .Help("Versions dropped from the spill below engine.spill_retention.")
                       .Register(r)
                       .Add({});
  evicted_keys_ = &BuildCounter()
                       .Name("isowatch_engine_evicted_keys_total")
                       .Help(
                           "Cold register keys whose last version and state the memory budget "
                           "moved to the spill.")
                       .Register(r)
                       .Add({});
  restored_keys_ =
      &BuildCounter()
           .Name("isowatch_engine_restored_keys_total")
           .Help("Evicted keys whose state a read or write brought back from the spill.")
           .Register(r)
           .Add({});
  resident_keys_ = &BuildGauge()
                        .Name("isowatch_engine_resident_keys")
                        .Help("Keys whose state the engine holds in memory.")
                        .Register(r)
                        .Add({});
  budget_collections_ = &BuildCounter()
                             .Name("isowatch_engine_budget_collections_total")
                             .Help("Collections cut at the final point by the memory budget.")
                             .Register(r)
                             .Add({});
  spill_pause_ = &BuildHistogram()
                      .Name("isowatch_engine_spill_pause_seconds")
                      .Help(
                          "Time each write of collected versions to the spill held up the "
                          "engine.")
                      .Register(r)
                      .Add({}, IngestLatencyBuckets());
  spill_reload_ = &BuildHistogram()
                       .Name("isowatch_engine_spill_reload_seconds")
                       .Help("Time each check that read the spill (a reload) took.")
                       .Register(r)
                       .Add({}, IngestLatencyBuckets());
  byte_collection_ = &BuildHistogram()
                          .Name("isowatch_history_byte_collection_seconds")
                          .Help(
                              "Time each collection of the live history's byte strings held up "
                              "the engine thread.")
                          .Register(r)
                          .Add({}, IngestLatencyBuckets());
  byte_strings_forgotten_ =
      &BuildCounter()
           .Name("isowatch_history_byte_strings_forgotten_total")
           .Help("Byte strings (values) the live history forgot because nothing held them.")
           .Register(r)
           .Add({});
  key_collection_ = &BuildHistogram()
                         .Name("isowatch_history_key_collection_seconds")
                         .Help(
                             "Time each collection of the live history's keys held up the engine "
                             "thread.")
                         .Register(r)
                         .Add({}, IngestLatencyBuckets());
  keys_forgotten_ = &BuildCounter()
                         .Name("isowatch_history_keys_forgotten_total")
                         .Help(
                             "Register keys the live history forgot because only the spill held "
                             "them.")
                         .Register(r)
                         .Add({});
  history_keys_ = &BuildGauge()
                       .Name("isowatch_history_keys")
                       .Help("Keys the live history holds.")
                       .Register(r)
                       .Add({});
  new_key_lookups_ =
      &BuildCounter()
           .Name("isowatch_engine_new_key_lookups_total")
           .Help(
               "Keys interned after keys were forgotten whose first read or write looked for a "
               "state in the spill and found none.")
           .Register(r)
           .Add({});
  checkpoints_ =
      &BuildCounter()
           .Name("isowatch_checkpoints_total")
           .Help("Checkpoints of the checking state saved (the log before each dropped).")
           .Register(r)
           .Add({});
  checkpoint_failures_ = &BuildCounter()
                              .Name("isowatch_checkpoint_failures_total")
                              .Help("Checkpoints that could not be saved (the log was kept).")
                              .Register(r)
                              .Add({});
  checkpoint_seconds_ = &BuildHistogram()
                             .Name("isowatch_checkpoint_seconds")
                             .Help("Time each checkpoint held up the engine thread.")
                             .Register(r)
                             .Add({}, CheckLatencyBuckets());
  checkpoint_bytes_ =
      &BuildGauge()
           .Name("isowatch_checkpoint_bytes")
           .Help("Size of the last checkpoint saved (without the spill's snapshot).")
           .Register(r)
           .Add({});
  checkpoint_windows_ =
      &BuildGauge()
           .Name("isowatch_checkpoint_windows")
           .Help("Windows saved with the last checkpoint, not yet done by every plug-in checker.")
           .Register(r)
           .Add({});
  log_batches_ = &BuildGauge()
                      .Name("isowatch_store_log_batches")
                      .Help("Batches in the store's log (those since the last checkpoint).")
                      .Register(r)
                      .Add({});
  rocksdb_memory_family_ = &BuildGauge()
                                .Name("isowatch_rocksdb_memory_bytes")
                                .Help(
                                    "Memory RocksDB holds for the daemon's database db, by kind "
                                    "(memtables, table_readers, block_cache).")
                                .Register(r);
  windows_sealed_ = &BuildCounter()
                         .Name("isowatch_windows_sealed_total")
                         .Help("Windows sealed for the plug-in checkers.")
                         .Register(r)
                         .Add({});
  windows_dropped_ = &BuildCounter()
                          .Name("isowatch_windows_dropped_total")
                          .Help("Sealed windows dropped unchecked: the worker pool fell behind.")
                          .Register(r)
                          .Add({});
  window_late_transactions_ =
      &BuildCounter()
           .Name("isowatch_window_late_transactions_total")
           .Help("Transactions that arrived after their window was sealed, so in no window.")
           .Register(r)
           .Add({});
  windows_queued_ = &BuildGauge()
                         .Name("isowatch_windows_queued")
                         .Help("Sealed windows waiting for a worker.")
                         .Register(r)
                         .Add({});
  window_checks_family_ =
      &BuildCounter()
           .Name("isowatch_window_checks_total")
           .Help(
               "Windows a plug-in checker finished (outcome checked) or ran out of time on "
               "(outcome unknown).")
           .Register(r);
  window_seconds_family_ = &BuildHistogram()
                                .Name("isowatch_window_check_seconds")
                                .Help("Time a plug-in checker took on one window.")
                                .Register(r);
  engine_memory_budget_bytes_ = &BuildGauge()
                                     .Name("isowatch_engine_memory_budget_bytes")
                                     .Help("The engine's configured memory budget; 0 when none.")
                                     .Register(r)
                                     .Add({});
  ready_ = &BuildGauge()
                .Name("isowatch_ready")
                .Help("1 while the daemon is ready to take ingest (as /readyz), else 0.")
                .Register(r)
                .Add({});
  http_connections_ = &BuildGauge()
                           .Name("isowatch_http_connections")
                           .Help("Connections open on the HTTP server.")
                           .Register(r)
                           .Add({});
  http_dropped_family_ = &BuildCounter()
                              .Name("isowatch_http_connections_dropped_total")
                              .Help(
                                  "Connections the HTTP server closed before their client did, "
                                  "by reason (a deadline passed, evicted or refused at the "
                                  "connection limit).")
                              .Register(r);
  for (HttpDrop drop : kAllHttpDrops) HttpConnectionsDropped(HttpDropName(drop));
  http_rejected_family_ = &BuildCounter()
                               .Name("isowatch_http_requests_rejected_total")
                               .Help(
                                   "HTTP requests answered without running their handler, by "
                                   "reason.")
                               .Register(r);
  for (HttpRejection rejection : kAllHttpRejections) {
    HttpRequestsRejected(HttpRejectionName(rejection));
  }
  internal_bugs_ = &BuildCounter()
                        .Name("isowatch_internal_bugs_total")
                        .Help("Internal inconsistencies the daemon detected and survived.")
                        .Register(r)
                        .Add({});

  BuildGauge()
      .Name("isowatch_build_info")
      .Help("Always 1; the labels describe the build.")
      .Register(r)
      .Add({{"version", std::string(version)}})
      .Set(1);
  uptime_seconds_ = &BuildGauge()
                         .Name("isowatch_uptime_seconds")
                         .Help("Seconds since the daemon started.")
                         .Register(r)
                         .Add({});
  start_time_seconds_ = &BuildGauge()
                             .Name("process_start_time_seconds")
                             .Help("Start time of the process since the Unix epoch, in seconds.")
                             .Register(r)
                             .Add({});
  start_time_seconds_->SetToCurrentTime();
  resident_memory_bytes_ = &BuildGauge()
                                .Name("process_resident_memory_bytes")
                                .Help("Resident memory size of the process, in bytes.")
                                .Register(r)
                                .Add({});
}

DaemonMetrics::~DaemonMetrics() = default;

Counter& DaemonMetrics::IngestedTransactions(std::string_view stream) {
  return ingested_family_->Add({{"stream", std::string(stream)}});
}

Counter& DaemonMetrics::RefusedTransactions(std::string_view reason) {
  return refused_family_->Add({{"reason", std::string(reason)}});
}

Counter& DaemonMetrics::HttpConnectionsDropped(std::string_view reason) {
  return http_dropped_family_->Add({{"reason", std::string(reason)}});
}

Counter& DaemonMetrics::HttpRequestsRejected(std::string_view reason) {
  return http_rejected_family_->Add({{"reason", std::string(reason)}});
}

Gauge& DaemonMetrics::StreamWatermark(std::string_view stream) {
  return watermark_family_->Add({{"stream", std::string(stream)}});
}

Gauge& DaemonMetrics::StreamLagSeconds(std::string_view stream) {
  return lag_family_->Add({{"stream", std::string(stream)}});
}

Gauge& DaemonMetrics::StreamPendingTransactions(std::string_view stream) {
  return pending_family_->Add({{"stream", std::string(stream)}});
}

void DaemonMetrics::RemoveStream(std::string_view stream) {
  const prometheus::Labels labels = {{"stream", std::string(stream)}};
  if (ingested_family_->Has(labels)) ingested_family_->Remove(&ingested_family_->Add(labels));
  if (watermark_family_->Has(labels)) watermark_family_->Remove(&watermark_family_->Add(labels));
  if (lag_family_->Has(labels)) lag_family_->Remove(&lag_family_->Add(labels));
  if (pending_family_->Has(labels)) pending_family_->Remove(&pending_family_->Add(labels));
}

Counter& DaemonMetrics::Violations(std::string_view checker, std::string_view level,
                                   std::string_view anomaly) {
  return violations_family_->Add({{"checker", std::string(checker)},
                                  {"level", std::string(level)},
                                  {"anomaly", std::string(anomaly)}});
}

Counter& DaemonMetrics::ViolationsSummarised(std::string_view checker, std::string_view level,
                                             std::string_view anomaly) {
  return summarised_family_->Add({{"checker", std::string(checker)},
                                  {"level", std::string(level)},
                                  {"anomaly", std::string(anomaly)}});
}

Gauge& DaemonMetrics::RocksDbMemoryBytes(std::string_view db, std::string_view kind) {
  return rocksdb_memory_family_->Add({{"db", std::string(db)}, {"kind", std::string(kind)}});
}

Counter& DaemonMetrics::WindowChecks(std::string_view checker, std::string_view outcome) {
  return window_checks_family_->Add(
      {{"checker", std::string(checker)}, {"outcome", std::string(outcome)}});
}

prometheus::Histogram& DaemonMetrics::WindowCheckSeconds(std::string_view checker) {
  static const std::vector<double>* const kBuckets =
      new std::vector<double>{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300};
  return window_seconds_family_->Add({{"checker", std::string(checker)}}, *kBuckets);
}

std::string DaemonMetrics::Serialize() {
  if (std::optional<uint64_t> rss = ProcessResidentMemoryBytes()) {
    resident_memory_bytes_->Set(static_cast<double>(*rss));
  }
  uptime_seconds_->Set(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  // Bugs caught by ISOWATCH_BUG anywhere in the process since the last scrape. Only the scrape
  // that raises the exported mark adds the difference, so concurrent scrapes count each once.
  const uint64_t bugs = common::InternalBugCount();
  uint64_t exported = bugs_exported_.load(std::memory_order_relaxed);
  while (bugs > exported &&
         !bugs_exported_.compare_exchange_weak(exported, bugs, std::memory_order_relaxed)) {
  }
  if (bugs > exported) internal_bugs_->Increment(static_cast<double>(bugs - exported));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return std::move(out).str();
}

}  // namespace isowatch::server
