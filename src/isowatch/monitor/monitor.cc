// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/monitor.h"

#include <utility>

#include "isowatch/common/status_macros.h"
#include "isowatch/server/process_memory.h"

namespace isowatch::monitor {

absl::StatusOr<std::unique_ptr<Monitor>> Monitor::Open(store::Store* store,
                                                       server::DaemonMetrics* metrics,
                                                       MonitorOptions options) {
  // One clock for every part, the live checker's included.
  if (options.clock == nullptr) options.clock = &common::SystemClock::Get();
  if (options.live.engine.clock == nullptr) options.live.engine.clock = options.clock;
  auto reporter =
      std::make_unique<ViolationReporter>(store, metrics, options.clock, options.findings_log);
  std::unique_ptr<WindowTracker> windows;
  if (!options.window_checkers.empty()) {
    if (!options.live.windows) {
      return absl::InvalidArgumentError("window checkers need windows (LiveOptions::windows)");
    }
    ASSIGN_OR_RETURN(windows, WindowTracker::Create(store, metrics, reporter.get(), options.clock,
                                                    options.window_checkers, options.pool));
  }
  std::unique_ptr<Monitor> m(
      new Monitor(store, metrics, std::move(options), std::move(reporter), std::move(windows)));
  RETURN_IF_ERROR(m->engine_.Recover());
  {
    absl::MutexLock l(&m->mu_);
    m->recovered_ = true;
  }
  m->log_.Start();
  return m;
}

Monitor::Monitor(store::Store* store, server::DaemonMetrics* metrics, MonitorOptions options,
                 std::unique_ptr<ViolationReporter> reporter,
                 std::unique_ptr<WindowTracker> windows)
    : store_(store),
      options_(std::move(options)),
      start_unix_ms_(options_.clock->NowUnixMs()),
      ingest_log_(options_.clock),
      registry_(options_.remembered_ids),
      queue_(options_.queue_batches),
      reporter_(std::move(reporter)),
      windows_(std::move(windows)),
      log_(store, metrics, &queue_, options_.clock, options_.live.default_model),
      engine_(store, metrics, options_, reporter_.get(), &registry_, &queue_, &log_, windows_.get(),
              start_unix_ms_) {}

Monitor::~Monitor() {
  Stop();
  // Last, once nothing can append: every batch appended is synced and reported first.
  log_.Stop();
}

void Monitor::Start() {
  absl::MutexLock l(&mu_);
  if (started_ || stopped_) return;
  started_ = true;
  engine_.Start();
}

void Monitor::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
  }
  queue_.Drain();
  engine_.Join();
  // Window checks still running are cancelled and those queued dropped: the windows are not
  // recorded as done, so they are checked again after a restart.
  if (windows_ != nullptr) windows_->Stop();
  absl::MutexLock l(&mu_);
  stopped_ = true;
}

void Monitor::SetIngestCounters(const ingest::IngestCounters* counters) {
  engine_.SetIngestCounters(counters);
}

absl::Status Monitor::Ready() const {
  bool recovered = false;
  bool started = false;
  {
    absl::MutexLock l(&mu_);
    recovered = recovered_;
    started = started_;
  }
  if (!recovered) return absl::UnavailableError("recovering from the store");
  if (queue_.draining()) return absl::UnavailableError("draining");
  if (!started) return absl::UnavailableError("not started");
  return engine_.error();
}

ingest::StreamPosition Monitor::Position(std::string_view stream) { return log_.Position(stream); }

absl::StatusOr<ingest::DurableBatch> Monitor::DurableBatchOf(std::string_view stream,
                                                             uint64_t seq) {
  return log_.DurableBatchOf(stream, seq);
}

absl::StatusOr<uint64_t> Monitor::ClaimStream(std::string_view stream) {
  return log_.ClaimStream(stream);
}

absl::StatusOr<ingest::SinkAck> Monitor::Submit(ingest::ValidatedBatch batch) {
  return log_.AppendAndWait(std::move(batch), /*wait=*/true);
}

absl::StatusOr<ingest::SinkAck> Monitor::TrySubmit(ingest::ValidatedBatch batch) {
  return log_.AppendAndWait(std::move(batch), /*wait=*/false);
}

absl::StatusOr<std::vector<v1::Refusal>> Monitor::SubmitAsync(ingest::ValidatedBatch batch,
                                                              DurableCallback on_durable) {
  return log_.Append(std::move(batch), /*wait=*/true, std::move(on_durable));
}

absl::StatusOr<store::ViolationPage> Monitor::Query(const store::ViolationFilter& filter,
                                                    size_t limit, std::string_view page_token) {
  return store_->QueryViolations(filter, limit, page_token);
}

absl::StatusOr<store::SummaryPage> Monitor::QuerySummaries(const store::SummaryFilter& filter,
                                                           size_t limit,
                                                           std::string_view page_token) {
  return store_->QuerySummaries(filter, limit, page_token);
}

absl::StatusOr<server::DaemonStatus> Monitor::GetStatus() {
  server::DaemonStatus status = engine_.status();
  status.uptime_seconds =
      static_cast<double>(options_.clock->NowUnixMs() - start_unix_ms_) / 1000.0;
  status.memory.resident_bytes = server::ProcessResidentMemoryBytes().value_or(0);
  for (server::StreamStatus& s : status.streams) {
    if (absl::StatusOr<store::StreamRecord> r = store_->GetStream(s.name); r.ok()) {
      s.acked_sequence = r->durable_seq;
    }
  }
  return status;
}

}  // namespace isowatch::monitor
