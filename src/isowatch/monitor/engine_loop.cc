// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/ingest/arena_batch.h"
#include "isowatch/ingest/txn_fingerprint.h"

namespace isowatch::monitor {
namespace {

std::vector<uint32_t> AllIndices(const v1::IngestBatch& b) {
  std::vector<uint32_t> out(static_cast<size_t>(b.txns_size()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint32_t>(i);
  return out;
}

constexpr std::string_view kSpillSnapshotPrefix = "spill-checkpoint-";

// Removes the spill snapshots under `data_dir` but `keep` (a name under it; empty: keep none).
void RemoveSpillSnapshots(const std::string& data_dir, std::string_view keep) {
  if (data_dir.empty()) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kSpillSnapshotPrefix) || name == keep) continue;
    std::filesystem::remove_all(entry.path(), ec);
    if (ec) spdlog::warn("could not remove the old spill snapshot {}: {}", name, ec.message());
  }
}

}  // namespace

EngineLoop::EngineLoop(store::Store* store, server::DaemonMetrics* metrics,
                       const MonitorOptions& options, ViolationReporter* reporter,
                       ingest::MemoryIdRegistry* registry, internal::BatchQueue* queue,
                       DurableLog* log, WindowTracker* windows, int64_t start_unix_ms)
    : store_(store),
      metrics_(metrics),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : &common::SystemClock::Get()),
      reporter_(reporter),
      registry_(registry),
      queue_(queue),
      log_(log),
      windows_(windows),
      live_(options.live),
      exporter_(store, metrics, options, start_unix_ms) {}

// --- recovery ----------------------------------------------------------------------------------

absl::Status EngineLoop::Recover() {
  uint64_t batches = 0;
  const int64_t now = clock_->NowUnixMs();
  RETURN_IF_ERROR(exporter_.Restore());
  if (options_.checkpoint != nullptr) RETURN_IF_ERROR(RestoreCheckpoint(*options_.checkpoint, now));
  last_checkpoint_ms_ = now;
  const uint64_t first = store_->first_log_position();
  const uint64_t end = store_->next_log_position();
  if (end > first) {
    spdlog::info("recovering: replaying log positions {} to {}", first, end - 1);
  }
  // Progress once a second, in real time whatever the clock: it is for the operator.
  auto next_report = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  RETURN_IF_ERROR(store_->ReadLog(first, [&](const store::LogEntry& e) {
    if (std::chrono::steady_clock::now() >= next_report) {
      spdlog::info("recovering: {} of {} log entries replayed", e.position - first, end - first);
      next_report += std::chrono::seconds(1);
    }
    internal::DurableBatch q;
    q.batch = ingest::ParseArenaBatch(e.bytes);
    if (q.batch == nullptr) {
      return absl::DataLossError(
          fmt::format("the store's log entry {} (stream {}, batch {}) does not parse", e.position,
                      e.stream, e.seq));
    }
    for (const v1::Transaction& t : q.batch->txns()) {
      registry_->Record(q.batch->stream(), ingest::TxnIdString(t), ingest::TxnFingerprint(t));
    }
    // Decided again in the same order, the logged transactions are all kept.
    log_->RedecideConflicts(*q.batch, AllIndices(*q.batch));
    q.received_ms = now;
    ApplyOne(q, now);
    ++batches;
    return absl::OkStatus();
  }));
  queue_->set_next_position(store_->next_log_position());
  live_.Tick();
  SubmitWindows();
  // Violations found again are already stored (and counted before the restart); only those
  // that became final in the replay for the first time are new.
  RETURN_IF_ERROR(StoreViolations(now));
  exporter_.EndRecovery(live_, late_refusals(), reporter_->log_status());
  Refresh(now);
  if (batches > 0) {
    spdlog::info(
        "recovered {} batches from the store ({} transactions, {} violations stored, {} more "
        "counted in summaries)",
        batches, live_.history().size(), store_->CountViolations(), store_->CountSummarised());
  }
  return absl::OkStatus();
}

absl::Status EngineLoop::RestoreCheckpoint(const v1::DaemonCheckpoint& c, int64_t now_ms) {
  RETURN_IF_ERROR(live_.RestoreCheckpoint(c.live(), now_ms));
  RETURN_IF_ERROR(registry_->Restore(c.ids()));
  if (c.live().started()) {
    // The conflict registry was not saved: it starts from what the history decided, which is
    // what it had decided for the same batches.
    log_->RestoreConflicts(live_.builder());
  }
  // The transactions it applied count as ingested, as they would if the log were replayed.
  for (const LiveStreamStatus& st : live_.Streams()) {
    if (st.delivered > 0) {
      metrics_->IngestedTransactions(st.name).Increment(static_cast<double>(st.delivered));
    }
  }
  checkpoint_position_ = store_->first_log_position();
  RemoveSpillSnapshots(options_.data_dir, c.spill_snapshot());
  if (windows_ != nullptr) RETURN_IF_ERROR(windows_->Restore(c, live_));
  spdlog::info("restored the checkpoint saved before log position {} ({} transactions held)",
               checkpoint_position_,
               live_.history().txns().size() + live_.history().retired_count());
  return absl::OkStatus();
}

// --- the thread --------------------------------------------------------------------------------

void EngineLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void EngineLoop::Join() {
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::Run() {
  const int64_t tick_us = std::max<int64_t>(options_.tick_ms, 1) * 1000;
  int64_t last_tick_us = clock_->NowMicros();
  uint64_t served = 0;  // tick requests served
  std::vector<internal::DurableBatch> work;
  while (true) {
    // Acquire: pairs with AwaitTickForTest's release, so that this round's Take sees every batch
    // queued before the request.
    const uint64_t requested = tick_requests_.load(std::memory_order_acquire);
    const int64_t wait_us = last_tick_us + tick_us - clock_->NowMicros();
    const bool done = queue_->Take(absl::Microseconds(std::max<int64_t>(wait_us, 0)), &work);
    const int64_t now = clock_->NowUnixMs();
    for (internal::DurableBatch& q : work) ApplyOne(q, now);
    work.clear();
    const int64_t steady_now_us = clock_->NowMicros();
    if (done || steady_now_us - last_tick_us >= tick_us || requested > served) {
      last_tick_us = steady_now_us;
      Tick(now, /*last=*/done);
      served = requested;
      absl::MutexLock l(&mu_);
      ticks_served_ = served;
    }
    if (done) break;
  }
}

void EngineLoop::Tick(int64_t now_ms, bool last) {
  live_.Tick();
  SubmitWindows();
  if (absl::Status s = StoreViolations(now_ms); !s.ok()) {
    spdlog::error("storing violations failed: {}", common::StdView(s.message()));
    SetError(std::move(s));
  }
  reporter_->Tick(/*now=*/last);
  Refresh(now_ms);
  MaybeCheckpoint(now_ms, /*now=*/last);
}

void EngineLoop::ApplyOne(internal::DurableBatch& q, int64_t now_ms) {
  const v1::IngestBatch& b = *q.batch;
  const uint64_t ignored_before = live_.ignored_headers();
  std::vector<TxnRefusal> refused = live_.Apply(b, AllIndices(b), q.received_ms);
  SubmitWindows();
  if (live_.ignored_headers() != ignored_before) {
    spdlog::warn("stream {}: batch {}: header ignored (the history already has transactions)",
                 b.stream(), b.seq());
  }
  uint64_t held_back = 0;
  if (!refused.empty() && late_refusal_log_.Allow(clock_->NowMicros() / 1000, &held_back)) {
    spdlog::warn(
        "stream {}: batch {}: {} transactions refused after their ack (history_conflict); "
        "transaction {}: {}{}",
        b.stream(), b.seq(), refused.size(), refused.front().txn_id, refused.front().detail,
        held_back == 0
            ? std::string()
            : fmt::format(" ({} more batches with such refusals not logged)", held_back));
  }
  const auto delivered = static_cast<double>(b.txns_size()) - static_cast<double>(refused.size());
  if (delivered > 0) metrics_->IngestedTransactions(b.stream()).Increment(delivered);
  // Relaxed: a counter; the status reads it on the next refresh.
  if (!refused.empty()) late_refusals_.fetch_add(refused.size(), std::memory_order_relaxed);
  // Keep violations flowing out during a long replay.
  if (live_.history().size() % 4096 < static_cast<size_t>(b.txns_size())) {
    if (absl::Status s = StoreViolations(now_ms); !s.ok()) {
      spdlog::error("storing violations failed: {}", common::StdView(s.message()));
    }
  }
}

absl::Status EngineLoop::StoreViolations(int64_t now_ms) {
  return reporter_->Report(live_.TakeViolations(now_ms)).status();
}

void EngineLoop::SubmitWindows() {
  std::vector<windows::Window> sealed = live_.TakeSealedWindows();
  if (windows_ != nullptr) windows_->SubmitSealed(std::move(sealed), live_);
}

void EngineLoop::Refresh(int64_t now_ms) {
  server::DaemonStatus status =
      exporter_.Refresh(now_ms, live_,
                        MetricsExporter::Inputs{.queued_batches = queue_->size(),
                                                .late_refusals = late_refusals(),
                                                .remembered_ids = registry_->size(),
                                                .windows = windows_,
                                                .findings_log = reporter_->log_status()});
  absl::MutexLock l(&mu_);
  status_ = std::move(status);
}

// --- checkpoints -------------------------------------------------------------------------------

void EngineLoop::MaybeCheckpoint(int64_t now_ms, bool now) {
  if (options_.checkpoint_interval_ms <= 0) return;
  if (!now && now_ms - last_checkpoint_ms_ < options_.checkpoint_interval_ms) return;
  last_checkpoint_ms_ = now_ms;
  if (!error().ok()) return;
  const int64_t start_us = clock_->NowMicros();
  const absl::StatusOr<bool> saved = Checkpoint(now_ms);
  if (!saved.ok()) {
    metrics_->checkpoint_failures().Increment();
    spdlog::warn("checkpoint not saved (the log is kept whole): {}",
                 common::StdView(saved.status().message()));
    return;
  }
  if (!*saved) return;
  const double seconds = clock_->SecondsSince(start_us);
  metrics_->checkpoints().Increment();
  metrics_->checkpoint_seconds().Observe(seconds);
  spdlog::debug("checkpoint saved before log position {} in {:.3f} s", checkpoint_position_,
                seconds);
}

absl::StatusOr<bool> EngineLoop::Checkpoint(int64_t now_ms) {
  // Every batch below it has been applied (the engine thread takes them in position order).
  const uint64_t position = queue_->next_position();
  if (position <= checkpoint_position_) return false;
  // What became final is stored first: the restored checker does not report it again.
  RETURN_IF_ERROR(StoreViolations(now_ms));
  SubmitWindows();
  v1::DaemonCheckpoint c;
  RETURN_IF_ERROR(live_.SaveCheckpoint(c.mutable_live()));
  // The windows not done yet are saved with it: a restart from it checks them.
  if (windows_ != nullptr) RETURN_IF_ERROR(windows_->SaveUnfinished(c));
  c.set_saved_unix_ms(now_ms);
  registry_->Save(c.mutable_ids());
  if (options_.rocks_spill != nullptr) {
    // Taken at the same point as the engine's state, which refers to what it holds.
    const std::string name = fmt::format("{}{}", kSpillSnapshotPrefix, position);
    const std::filesystem::path dir = std::filesystem::path(options_.data_dir) / name;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // left by a checkpoint that failed
    RETURN_IF_ERROR(options_.rocks_spill->Snapshot(dir.string()));
    c.set_spill_snapshot(name);
  }
  const std::string blob = c.SerializeAsString();
  RETURN_IF_ERROR(store_->PutCheckpoint(position, blob));
  checkpoint_position_ = position;
  metrics_->checkpoint_bytes().Set(static_cast<double>(blob.size()));
  RemoveSpillSnapshots(options_.data_dir, c.spill_snapshot());
  metrics_->checkpoint_windows().Set(static_cast<double>(c.windows_size()));
  return true;
}

// --- what other threads read -------------------------------------------------------------------

server::DaemonStatus EngineLoop::status() const {
  absl::MutexLock l(&mu_);
  return status_;
}

absl::Status EngineLoop::error() const {
  absl::MutexLock l(&mu_);
  return error_;
}

void EngineLoop::SetError(absl::Status error) {
  absl::MutexLock l(&mu_);
  error_ = std::move(error);
}

bool EngineLoop::AwaitTickForTest(absl::Duration timeout) {
  // Release: pairs with the acquire in Run.
  const uint64_t request = tick_requests_.fetch_add(1, std::memory_order_release) + 1;
  absl::MutexLock l(&mu_);
  auto served = [this, request]()
                    ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ticks_served_ >= request; };
  return mu_.AwaitWithTimeout(absl::Condition(&served), timeout);
}

}  // namespace isowatch::monitor
