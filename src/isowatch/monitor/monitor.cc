// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/monitor.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/checkers/registry.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/arena_batch.h"
#include "isowatch/ingest/txn_fingerprint.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/report/check_report.h"
#include "isowatch/server/process_memory.h"
#include "isowatch/windows/saved_window.h"

namespace isowatch::monitor {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<uint32_t> AllIndices(const v1::IngestBatch& b) {
  std::vector<uint32_t> out(static_cast<size_t>(b.txns_size()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint32_t>(i);
  return out;
}

std::string View(absl::string_view s) { return std::string(s.data(), s.size()); }

// The refusal reason label of transactions the live history refuses after their batch was
// acknowledged: a transaction id it already holds. Key kinds and session numbering are decided
// before the ack (ConflictRegistry); the live history's own check of them stays as a safety net.
constexpr std::string_view kHistoryConflict = "history_conflict";

}  // namespace

Monitor::Monitor(store::Store* store, server::DaemonMetrics* metrics, MonitorOptions options)
    : store_(store),
      metrics_(metrics),
      options_(std::move(options)),
      start_unix_ms_(NowUnixMs()),
      registry_(options_.remembered_ids),
      live_(options_.live),
      conflicts_(options_.live.default_model) {}

absl::StatusOr<std::unique_ptr<Monitor>> Monitor::Open(store::Store* store,
                                                       server::DaemonMetrics* metrics,
                                                       MonitorOptions options) {
  std::unique_ptr<Monitor> m(new Monitor(store, metrics, std::move(options)));
  if (!m->options_.window_checkers.empty()) {
    if (!m->options_.live.windows) {
      return absl::InvalidArgumentError("window checkers need windows (LiveOptions::windows)");
    }
    std::vector<std::unique_ptr<checkers::Checker>> checkers;
    for (const auto& [name, checker_options] : m->options_.window_checkers) {
      ASSIGN_OR_RETURN(std::unique_ptr<checkers::Checker> checker,
                       checkers::CreateChecker(name, checker_options));
      m->checker_status_.push_back({.name = std::string(checker->name())});
      checkers.push_back(std::move(checker));
    }
    m->last_checker_ = checkers.back().get();
    ASSIGN_OR_RETURN(m->windows_skip_, store->WindowsDone());
    m->windows_done_ = m->windows_skip_;
    Monitor* raw = m.get();
    m->pool_ = std::make_unique<windows::CheckPool>(
        m->options_.pool, std::move(checkers),
        [raw](const windows::Window& w, const checkers::Checker& c, windows::CheckOutcome o) {
          raw->OnWindowResult(w, c, std::move(o));
        },
        [raw](const windows::Window& w) { raw->OnWindowDropped(w); });
  }
  RETURN_IF_ERROR(m->Recover());
  m->syncer_ = std::thread([raw = m.get()] { raw->RunSyncer(); });
  return m;
}

Monitor::~Monitor() {
  Stop();
  {
    std::lock_guard<std::mutex> l(mu_);
    syncer_stop_ = true;
  }
  sync_cv_.notify_all();
  if (syncer_.joinable()) syncer_.join();
}

namespace {

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

absl::Status Monitor::Recover() {
  uint64_t batches = 0;
  const int64_t now = NowUnixMs();
  if (options_.checkpoint != nullptr) {
    const v1::DaemonCheckpoint& c = *options_.checkpoint;
    RETURN_IF_ERROR(live_.RestoreCheckpoint(c.live(), now));
    RETURN_IF_ERROR(registry_.Restore(c.ids()));
    if (c.live().started()) {
      // The registry was not saved: it starts from what the history decided, which is what it
      // had decided for the same batches.
      absl::MutexLock order(&append_mu_);
      conflicts_.StartFrom(live_.builder());
    }
    // The transactions it applied count as ingested, as they would if the log were replayed.
    for (const LiveStreamStatus& st : live_.Streams()) {
      if (st.delivered > 0) {
        metrics_->IngestedTransactions(st.name).Increment(static_cast<double>(st.delivered));
      }
    }
    checkpoint_position_ = store_->first_log_position();
    RemoveSpillSnapshots(options_.data_dir, c.spill_snapshot());
    RETURN_IF_ERROR(RestoreWindows(c));
    spdlog::info("restored the checkpoint saved before log position {} ({} transactions held)",
                 checkpoint_position_,
                 live_.history().txns().size() + live_.history().retired_count());
  }
  last_checkpoint_ms_ = now;
  RETURN_IF_ERROR(store_->ReadLog(store_->first_log_position(), [&](const store::LogEntry& e) {
    Queued q;
    q.batch = ingest::ParseArenaBatch(e.bytes);
    if (q.batch == nullptr) {
      return absl::DataLossError(
          fmt::format("the store's log entry {} (stream {}, batch {}) does not parse", e.position,
                      e.stream, e.seq));
    }
    for (const v1::Transaction& t : q.batch->txns()) {
      registry_.Record(q.batch->stream(), ingest::TxnIdString(t), ingest::TxnFingerprint(t));
    }
    {
      // Decided again in the same order, the logged transactions are all kept (a log written
      // before these checks may hold some that are not: the live history refuses them too).
      absl::MutexLock order(&append_mu_);
      conflicts_.Decide(*q.batch, AllIndices(*q.batch));
    }
    q.received_ms = now;
    ApplyOne(q, now);
    ++batches;
    return absl::OkStatus();
  }));
  next_position_ = store_->next_log_position();
  live_.Tick();
  SubmitWindows();
  // Violations found again are already stored (and counted before the restart); only those
  // that became final in the replay for the first time are new.
  RETURN_IF_ERROR(StoreViolations(now, /*count=*/true));
  Refresh(now);
  if (batches > 0) {
    spdlog::info("recovered {} batches from the store ({} transactions, {} violations stored)",
                 batches, live_.history().size(), store_->CountViolations());
  }
  std::lock_guard<std::mutex> l(mu_);
  recovered_ = true;
  return absl::OkStatus();
}

absl::Status Monitor::RestoreWindows(const v1::DaemonCheckpoint& c) {
  if (pool_ == nullptr) return absl::OkStatus();
  if (const windows::CutterStats* cut = live_.window_stats(); cut != nullptr) {
    std::lock_guard<std::mutex> l(windows_mu_);
    windows_sealed_ = cut->sealed;
  }
  size_t submitted = 0;
  for (const v1::SavedWindow& saved : c.windows()) {
    if (saved.index() < windows_skip_) continue;  // done after the checkpoint was saved
    ASSIGN_OR_RETURN(windows::Window w, windows::LoadWindow(saved));
    SubmitWindow(std::make_shared<const windows::Window>(std::move(w)));
    ++submitted;
  }
  if (submitted > 0) {
    spdlog::info("{} windows saved with the checkpoint are checked again", submitted);
  }
  return absl::OkStatus();
}

void Monitor::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (running_ || stopped_) return;
  running_ = true;
  thread_ = std::thread([this] { Run(); });
}

void Monitor::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;
    draining_ = true;
  }
  cv_.notify_all();
  room_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Window checks still running are cancelled and those queued dropped: the windows are not
  // recorded as done, so they are checked again after a restart.
  if (pool_ != nullptr) pool_->Stop();
  pool_.reset();
  std::lock_guard<std::mutex> l(mu_);
  stopped_ = true;
}

void Monitor::SetIngestCounters(const ingest::IngestCounters* counters) {
  std::lock_guard<std::mutex> l(mu_);
  ingest_counters_ = counters;
}

absl::Status Monitor::Ready() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!recovered_) return absl::UnavailableError("recovering from the store");
  if (draining_) return absl::UnavailableError("draining");
  if (!running_) return absl::UnavailableError("not started");
  if (!engine_error_.ok()) return engine_error_;
  return absl::OkStatus();
}

uint64_t Monitor::late_refusals() const {
  std::lock_guard<std::mutex> l(mu_);
  return late_refusals_;
}

ingest::StreamPosition Monitor::Position(std::string_view stream) {
  absl::StatusOr<store::StreamRecord> r = store_->GetStream(stream);
  if (!r.ok()) return {};
  return ingest::StreamPosition{
      .durable_seq = r->durable_seq, .watermark = r->watermark, .closed = r->closed};
}

absl::StatusOr<std::vector<v1::Refusal>> Monitor::RefusalsOf(std::string_view stream,
                                                             uint64_t seq) {
  ASSIGN_OR_RETURN(const std::string bytes, store_->BatchRefusals(stream, seq));
  v1::IngestAck kept;
  if (!kept.ParseFromString(bytes)) {
    return absl::DataLossError(
        fmt::format("the refusals kept with batch {} of stream \"{}\" do not decode", seq, stream));
  }
  return std::vector<v1::Refusal>(kept.refusals().begin(), kept.refusals().end());
}

absl::StatusOr<ingest::SinkAck> Monitor::Submit(ingest::ValidatedBatch batch) {
  return SubmitAndWait(std::move(batch), /*wait=*/true);
}

absl::StatusOr<ingest::SinkAck> Monitor::TrySubmit(ingest::ValidatedBatch batch) {
  return SubmitAndWait(std::move(batch), /*wait=*/false);
}

absl::StatusOr<std::vector<v1::Refusal>> Monitor::SubmitAsync(ingest::ValidatedBatch batch,
                                                              DurableCallback on_durable) {
  return SubmitImpl(std::move(batch), /*wait=*/true, std::move(on_durable));
}

absl::StatusOr<ingest::SinkAck> Monitor::SubmitAndWait(ingest::ValidatedBatch batch, bool wait) {
  struct Result {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::StatusOr<ingest::SinkAck> durable;
  };
  auto result = std::make_shared<Result>();
  RETURN_IF_ERROR(
      SubmitImpl(std::move(batch), wait, [result](absl::StatusOr<ingest::SinkAck> durable) {
        std::lock_guard<std::mutex> l(result->mu);
        result->durable = std::move(durable);
        result->done = true;
        result->cv.notify_all();
      }).status());
  std::unique_lock<std::mutex> l(result->mu);
  result->cv.wait(l, [&] { return result->done; });
  return result->durable;
}

absl::StatusOr<std::vector<v1::Refusal>> Monitor::SubmitImpl(ingest::ValidatedBatch vb, bool wait,
                                                             DurableCallback on_durable) {
  const auto started = std::chrono::steady_clock::now();
  const size_t capacity = std::max<size_t>(options_.queue_batches, 1);
  {
    std::unique_lock<std::mutex> l(mu_);
    auto full = [&] { return queue_.size() + reserved_ >= capacity; };
    if (draining_) return absl::UnavailableError("isowatchd is shutting down");
    if (full()) {
      if (!wait) {
        return absl::ResourceExhaustedError(
            fmt::format("the ingest queue is full ({} batches); retry later", capacity));
      }
      room_cv_.wait(l, [&] { return !full() || draining_; });
      if (draining_) return absl::UnavailableError("isowatchd is shutting down");
    }
    ++reserved_;
  }
  // From here to the append, the order of the log is fixed: batches decide their history
  // conflicts in the order in which they are appended, which is the order the live history
  // applies them in.
  absl::MutexLock order(&append_mu_);
  const v1::IngestBatch& in = *vb.batch;
  ingest::ConflictRegistry::Decision decision = conflicts_.Decide(in, vb.accepted);
  // What the log keeps: the transactions kept with the batch's header, watermark and end.
  // When every transaction is kept that is the batch itself, and the bytes the collector sent
  // are kept as they are (when the service has them); else the batch is encoded again.
  std::shared_ptr<const v1::IngestBatch> logged;
  std::string bytes;
  if (!vb.whole_batch_refused && decision.kept.size() == static_cast<size_t>(in.txns_size())) {
    bytes = vb.wire.empty() ? in.SerializeAsString() : std::move(vb.wire);
    logged = std::move(vb.batch);
  } else {
    auto filtered = std::make_shared<v1::IngestBatch>();
    filtered->set_stream(in.stream());
    filtered->set_seq(in.seq());
    if (in.has_header()) *filtered->mutable_header() = in.header();
    if (in.has_watermark()) *filtered->mutable_watermark() = in.watermark();
    filtered->set_end_of_stream(in.end_of_stream());
    if (!vb.whole_batch_refused) {
      for (uint32_t index : decision.kept) {
        if (index < static_cast<uint32_t>(in.txns_size())) {
          *filtered->add_txns() = in.txns(static_cast<int>(index));
        }
      }
    }
    bytes = filtered->SerializeAsString();
    logged = std::move(filtered);
  }
  std::optional<history::Timestamp> watermark;
  if (logged->has_watermark()) {
    watermark = history::Timestamp{logged->watermark().physical(), logged->watermark().logical()};
  }
  // The ack's refusals, kept with the batch so that the ack of a re-sent batch repeats them.
  std::string refusals;
  if (!vb.refusals.empty() || !decision.refusals.empty()) {
    v1::IngestAck kept;
    for (v1::Refusal& r : ingest::MergeRefusals(vb.refusals, decision.refusals)) {
      *kept.add_refusals() = std::move(r);
    }
    refusals = kept.SerializeAsString();
  }
  // Unsynced: the syncer makes it durable together with whatever else was appended meanwhile.
  absl::StatusOr<uint64_t> position =
      store_->AppendBatch(logged->stream(), logged->seq(), watermark, logged->end_of_stream(),
                          bytes, /*sync=*/false, refusals);
  if (!position.ok()) {
    conflicts_.Undo();
    {
      std::lock_guard<std::mutex> l(mu_);
      --reserved_;
    }
    cv_.notify_one();
    room_cv_.notify_one();
    return position.status();
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    const uint64_t seq = logged->seq();
    unsynced_.push_back(Unsynced{.position = *position,
                                 .queued = Queued{.batch = std::move(logged), .received_ms = 0},
                                 .seq = seq,
                                 .refusals = decision.refusals,
                                 .on_durable = std::move(on_durable),
                                 .started = started});
  }
  sync_cv_.notify_one();
  return std::move(decision.refusals);
}

void Monitor::RunSyncer() {
  std::vector<Unsynced> work;
  while (true) {
    {
      std::unique_lock<std::mutex> l(mu_);
      sync_cv_.wait(l, [&] { return !unsynced_.empty() || syncer_stop_; });
      if (unsynced_.empty()) break;
      work.swap(unsynced_);
    }
    // Covers every batch of `work`: each was appended before it was handed over.
    const absl::Status synced = store_->SyncLog();
    if (!synced.ok()) {
      // The conflict registry keeps what it decided for these batches: the store now refuses
      // every append, and the restart that follows rebuilds the registry from the log as it is.
      spdlog::error("syncing the ingest log failed: {}", View(synced.message()));
    }
    const int64_t now = NowUnixMs();
    {
      std::lock_guard<std::mutex> l(mu_);
      for (Unsynced& u : work) {
        --reserved_;
        if (synced.ok()) {
          u.queued.received_ms = now;
          queue_.emplace(u.position, std::move(u.queued));
        }
      }
    }
    cv_.notify_one();
    room_cv_.notify_all();
    const auto done = std::chrono::steady_clock::now();
    for (Unsynced& u : work) {
      if (synced.ok()) {
        metrics_->ingest_batch_latency().Observe(
            std::chrono::duration<double>(done - u.started).count());
        u.on_durable(ingest::SinkAck{.durable_seq = u.seq, .refusals = std::move(u.refusals)});
      } else {
        u.on_durable(synced);
      }
    }
    work.clear();
  }
}

void Monitor::Run() {
  auto last_tick = std::chrono::steady_clock::now();
  const auto tick = std::chrono::milliseconds(std::max<int64_t>(options_.tick_ms, 1));
  std::vector<Queued> work;
  while (true) {
    bool done = false;
    {
      std::unique_lock<std::mutex> l(mu_);
      auto ready = [&] {
        if (queue_.empty()) return false;
        // A gap in the log positions with no Submit still writing: a position the store gave
        // out but did not write (a failed write). Skip it rather than wait forever.
        return queue_.begin()->first == next_position_ || reserved_ == 0;
      };
      cv_.wait_until(l, last_tick + tick, [&] { return ready() || draining_; });
      while (ready()) {
        auto it = queue_.begin();
        next_position_ = it->first + 1;
        work.push_back(std::move(it->second));
        queue_.erase(it);
      }
      done = draining_ && queue_.empty() && reserved_ == 0;
    }
    room_cv_.notify_all();
    const int64_t now = NowUnixMs();
    for (Queued& q : work) ApplyOne(q, now);
    work.clear();
    const auto steady_now = std::chrono::steady_clock::now();
    if (done || steady_now - last_tick >= tick) {
      last_tick = steady_now;
      live_.Tick();
      SubmitWindows();
      if (absl::Status s = StoreViolations(now, /*count=*/true); !s.ok()) {
        spdlog::error("storing violations failed: {}", View(s.message()));
        std::lock_guard<std::mutex> l(mu_);
        engine_error_ = s;
      }
      Refresh(now);
      MaybeCheckpoint(now, /*now=*/done);
    }
    if (done) break;
  }
  std::lock_guard<std::mutex> l(mu_);
  running_ = false;
}

void Monitor::ApplyOne(Queued& q, int64_t now_ms) {
  const v1::IngestBatch& b = *q.batch;
  const uint64_t ignored_before = live_.ignored_headers();
  std::vector<TxnRefusal> refused = live_.Apply(b, AllIndices(b), q.received_ms);
  SubmitWindows();
  if (live_.ignored_headers() != ignored_before) {
    spdlog::warn("stream {}: batch {}: header ignored (the history already has transactions)",
                 b.stream(), b.seq());
  }
  for (const TxnRefusal& r : refused) {
    spdlog::warn("stream {}: batch {}: transaction {} refused: {}", b.stream(), b.seq(), r.txn_id,
                 r.detail);
    metrics_->RefusedTransactions(kHistoryConflict).Increment();
  }
  const auto delivered = static_cast<double>(b.txns_size()) - static_cast<double>(refused.size());
  if (delivered > 0) metrics_->IngestedTransactions(b.stream()).Increment(delivered);
  if (!refused.empty()) {
    std::lock_guard<std::mutex> l(mu_);
    late_refusals_ += refused.size();
  }
  // Keep violations flowing out during a long replay.
  if (live_.history().size() % 4096 < static_cast<size_t>(b.txns_size())) {
    if (absl::Status s = StoreViolations(now_ms, /*count=*/true); !s.ok()) {
      spdlog::error("storing violations failed: {}", View(s.message()));
    }
  }
}

void Monitor::MaybeCheckpoint(int64_t now_ms, bool now) {
  if (options_.checkpoint_interval_ms <= 0) return;
  if (!now && now_ms - last_checkpoint_ms_ < options_.checkpoint_interval_ms) return;
  last_checkpoint_ms_ = now_ms;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!engine_error_.ok()) return;
  }
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<bool> saved = Checkpoint(now_ms);
  if (!saved.ok()) {
    metrics_->checkpoint_failures().Increment();
    spdlog::warn("checkpoint not saved (the log is kept whole): {}",
                 View(saved.status().message()));
    return;
  }
  if (!*saved) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_->checkpoints().Increment();
  metrics_->checkpoint_seconds().Observe(seconds);
  spdlog::debug("checkpoint saved before log position {} in {:.3f} s", checkpoint_position_,
                seconds);
}

absl::StatusOr<bool> Monitor::Checkpoint(int64_t now_ms) {
  // Every batch below it has been applied (the engine thread takes them in position order).
  const uint64_t position = next_position_;
  if (position <= checkpoint_position_) return false;
  // What became final is stored first: the restored checker does not report it again.
  RETURN_IF_ERROR(StoreViolations(now_ms, /*count=*/true));
  SubmitWindows();
  v1::DaemonCheckpoint c;
  RETURN_IF_ERROR(live_.SaveCheckpoint(c.mutable_live()));
  // The windows not done yet are saved with it: a restart from it checks them. Those done by
  // the time it is stored are checked again; their violations are stored once (by id).
  std::vector<std::shared_ptr<const windows::Window>> unfinished;
  {
    std::lock_guard<std::mutex> l(windows_mu_);
    for (const auto& [index, w] : windows_unfinished_) unfinished.push_back(w);
  }
  for (const std::shared_ptr<const windows::Window>& w : unfinished) {
    RETURN_IF_ERROR(windows::SaveWindow(*w, c.add_windows()));
  }
  c.set_saved_unix_ms(now_ms);
  registry_.Save(c.mutable_ids());
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

absl::Status Monitor::StoreViolations(int64_t now_ms, bool count) {
  for (const store::ViolationRecord& r : live_.TakeViolations(now_ms)) {
    ASSIGN_OR_RETURN(bool inserted, store_->PutViolation(r));
    if (!inserted) continue;
    if (count) metrics_->Violations(r.checker, r.level, r.anomaly).Increment();
    spdlog::warn("violation {} ({} {}{}): {}", r.id, r.level, r.anomaly,
                 r.ext_kind.empty() ? "" : "/" + r.ext_kind, r.json);
  }
  return absl::OkStatus();
}

void Monitor::SubmitWindows() {
  std::vector<windows::Window> sealed = live_.TakeSealedWindows();
  if (sealed.empty() || pool_ == nullptr) return;
  {
    std::lock_guard<std::mutex> l(windows_mu_);
    windows_sealed_ += sealed.size();
  }
  metrics_->windows_sealed().Increment(static_cast<double>(sealed.size()));
  for (windows::Window& w : sealed) {
    if (w.scope.index < windows_skip_) continue;  // done before a restart
    SubmitWindow(std::make_shared<const windows::Window>(std::move(w)));
  }
}

void Monitor::SubmitWindow(std::shared_ptr<const windows::Window> w) {
  {
    std::lock_guard<std::mutex> l(windows_mu_);
    while (stream_names_.size() < UINT16_MAX) {
      const std::string_view name = live_.stream_name(static_cast<uint16_t>(stream_names_.size()));
      if (name.empty()) break;
      stream_names_.emplace_back(name);
    }
    windows_unfinished_[w->scope.index] = w;
  }
  pool_->Submit(std::move(w));
}

void Monitor::OnWindowResult(const windows::Window& w, const checkers::Checker& c,
                             windows::CheckOutcome outcome) {
  const std::string name(c.name());
  const bool complete = outcome.result.complete;
  if (!w.defect.empty() && &c == last_checker_) {
    metrics_->internal_bugs().Increment();
    spdlog::error("window {} could not be built ({}); every checker's verdict on it is UNKNOWN",
                  w.scope.index, w.defect);
  }
  if (!outcome.cancelled) {
    metrics_->WindowChecks(name, complete ? "checked" : "unknown").Increment();
    metrics_->WindowCheckSeconds(name).Observe(outcome.seconds);
    if (!complete) {
      spdlog::warn(
          "window {} ({} transactions): {} ran out of time after {:.1f} s; its verdict on the "
          "window is UNKNOWN",
          w.scope.index, w.own, name, outcome.seconds);
    }
  }
  uint64_t stored = 0;
  for (const verdict::Violation& v : outcome.result.violations) {
    store::ViolationRecord r = RenderWindowViolation(w, v);
    absl::StatusOr<bool> inserted = store_->PutViolation(r);
    if (!inserted.ok()) {
      spdlog::error("storing a violation of window {} failed: {}", w.scope.index,
                    View(inserted.status().message()));
      continue;
    }
    if (!*inserted) continue;
    ++stored;
    metrics_->Violations(r.checker, r.level, r.anomaly).Increment();
    spdlog::warn("violation {} ({} {} {}, window {}): {}", r.id, r.checker, r.level, r.anomaly,
                 w.scope.index, r.json);
  }
  {
    std::lock_guard<std::mutex> l(windows_mu_);
    for (server::CheckerStatus& s : checker_status_) {
      if (s.name != name || outcome.cancelled) continue;
      ++(complete ? s.checked : s.unknown);
      s.violations += stored;
      s.seconds += outcome.seconds;
    }
  }
  if (!outcome.cancelled && &c == last_checker_) WindowDone(w.scope.index);
}

void Monitor::OnWindowDropped(const windows::Window& w) {
  metrics_->windows_dropped().Increment();
  spdlog::warn(
      "window {} ({} transactions, commits {} to {}) dropped unchecked: the window checkers fell "
      "behind (windows.max_queued); the online checks go on",
      w.scope.index, w.own, w.first_commit.physical, w.last_commit.physical);
  {
    std::lock_guard<std::mutex> l(windows_mu_);
    ++windows_dropped_;
  }
  WindowDone(w.scope.index);
}

void Monitor::WindowDone(uint64_t index) {
  std::lock_guard<std::mutex> l(windows_mu_);
  windows_unfinished_.erase(index);
  if (index < windows_done_) return;
  windows_done_above_.insert(index);
  const uint64_t before = windows_done_;
  while (windows_done_above_.erase(windows_done_) > 0) ++windows_done_;
  if (windows_done_ == before) return;
  if (absl::Status s = store_->SetWindowsDone(windows_done_); !s.ok()) {
    spdlog::error("recording the windows done failed: {}", View(s.message()));
  }
}

store::ViolationRecord Monitor::RenderWindowViolation(const windows::Window& w,
                                                      const verdict::Violation& v) {
  store::ViolationRecord r;
  {
    std::lock_guard<std::mutex> l(windows_mu_);
    r = RenderViolation(w.history, v, [&](TxnId id) -> std::string_view {
      if (id.value() >= w.origins.size() || w.origins[id.value()] >= stream_names_.size()) {
        return {};
      }
      return stream_names_[w.origins[id.value()]];
    });
  }
  r.finalised_unix_ms = NowUnixMs();
  // The window it was found in, as one more field of the object.
  if (!r.json.empty() && r.json.back() == '}') {
    r.json.pop_back();
    r.json += fmt::format(
        R"(,"window":{{"index":{},"first_commit":{},"last_commit":{},"transactions":{},"lead_in":{}}}}})",
        w.scope.index, w.first_commit.physical, w.last_commit.physical, w.own, w.lead_in);
  }
  return r;
}

void Monitor::ReportRocksDbMemory(std::string_view db, const rocks::RocksDbMemory& m,
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

void Monitor::Refresh(int64_t now_ms) {
  metrics_->log_batches().Set(
      static_cast<double>(store_->next_log_position() - store_->first_log_position()));
  const engine::EngineStats& st = live_.stats();
  auto add = [](prometheus::Counter& c, uint64_t now, uint64_t before) {
    if (now > before) c.Increment(static_cast<double>(now - before));
  };
  add(metrics_->flip_flops(), st.flip_flops, last_stats_.flip_flops);
  add(metrics_->late_arrivals(), st.late_arrivals, last_stats_.late_arrivals);
  add(metrics_->horizon_misses(), st.horizon_misses, last_stats_.horizon_misses);
  add(metrics_->session_unjudged(), st.session_unjudged, last_stats_.session_unjudged);
  // A read left unjudged is a check not made: say why, and what cures it, at most once a minute.
  if (st.horizon_misses > last_stats_.horizon_misses &&
      now_ms - last_horizon_warning_ms_ >= kHorizonWarningIntervalMs) {
    last_horizon_warning_ms_ = now_ms;
    spdlog::warn(
        "{} reads left unjudged so far: the versions they needed were already collected; raise "
        "engine.retention to the longest transaction, in the unit of the timestamps (bytes of WAL "
        "for PostgreSQL)",
        st.horizon_misses);
  }
  add(metrics_->spilled_versions(), st.spilled_versions, last_stats_.spilled_versions);
  add(metrics_->spill_reloads(), st.reloads, last_stats_.reloads);
  add(metrics_->spill_errors(), st.spill_errors, last_stats_.spill_errors);
  add(metrics_->spill_pruned(), st.spill_pruned, last_stats_.spill_pruned);
  add(metrics_->evicted_keys(), st.evicted_keys, last_stats_.evicted_keys);
  add(metrics_->restored_keys(), st.restored_keys, last_stats_.restored_keys);
  add(metrics_->new_key_lookups(), st.new_key_lookups, last_stats_.new_key_lookups);
  add(metrics_->budget_collections(), st.budget_collections, last_stats_.budget_collections);
  last_stats_ = st;
  metrics_->spill_bytes().Set(static_cast<double>(st.spill_bytes));
  metrics_->provisional_verdicts().Set(static_cast<double>(st.provisional_reads));
  metrics_->retained_versions().Set(static_cast<double>(st.retained_versions));
  metrics_->resident_keys().Set(static_cast<double>(st.resident_keys));
  metrics_->retained_transactions().Set(static_cast<double>(st.retained_txns));
  metrics_->retained_provisional_reads().Set(static_cast<double>(st.provisional_reads));
  const auto history_bytes = static_cast<uint64_t>(live_.history_bytes());
  metrics_->engine_history_bytes().Set(static_cast<double>(history_bytes));
  metrics_->history_keys().Set(static_cast<double>(live_.history_keys()));
  metrics_->engine_memory_bytes().Set(static_cast<double>(st.memory_bytes));
  metrics_->remembered_ids().Set(static_cast<double>(registry_.size()));

  latencies_.clear();
  live_.CollectFinal(now_ms, &latencies_);
  for (int64_t ms : latencies_) {
    metrics_->check_latency().Observe(static_cast<double>(std::max<int64_t>(ms, 0)) / 1000.0);
  }

  const ingest::IngestCounters* counters = nullptr;
  size_t queued = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    counters = ingest_counters_;
    queued = queue_.size();
  }
  metrics_->queue_depth().Set(static_cast<double>(queued));
  uint64_t refused_total = 0;
  if (counters != nullptr) {
    last_refusals_.resize(ingest::kRefusalReasonCount, 0);
    for (int r = 0; r < ingest::kRefusalReasonCount; ++r) {
      const uint64_t n = counters->refusals[r].load(std::memory_order_relaxed);
      refused_total += n;
      if (n > last_refusals_[r]) {
        metrics_->RefusedTransactions(ingest::RefusalReasonName(static_cast<v1::RefusalReason>(r)))
            .Increment(static_cast<double>(n - last_refusals_[r]));
        last_refusals_[r] = n;
      }
    }
    const uint64_t dup = counters->batches_duplicate.load(std::memory_order_relaxed);
    add(metrics_->duplicate_batches(), dup, last_duplicates_);
    last_duplicates_ = dup;
  }

  server::DaemonStatus status;
  status.version = options_.version;
  status.start_unix_ms = start_unix_ms_;
  uint64_t ingested = 0;
  for (const LiveStreamStatus& s : live_.Streams()) {
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
  status.counts.ingested_transactions = ingested;
  status.counts.queued_batches = queued;
  status.counts.violations = store_->CountViolations();
  status.counts.provisional_verdicts = st.provisional_reads;
  status.counts.flip_flops = st.flip_flops;
  status.counts.late_arrivals = st.late_arrivals;
  status.counts.horizon_misses = st.horizon_misses;
  status.memory.engine_bytes = st.memory_bytes;
  status.memory.history_bytes = history_bytes;
  status.memory.spill_bytes = st.spill_bytes;
  status.memory.budget_bytes = options_.live.memory_budget;
  status.memory.retained_versions = st.retained_versions;
  status.memory.retained_transactions = st.retained_txns;
  status.memory.retained_provisional_reads = st.provisional_reads;
  ReportRocksDbMemory("store", store_->rocksdb_memory(), status.memory);
  if (options_.rocks_spill != nullptr) {
    ReportRocksDbMemory("spill", options_.rocks_spill->rocksdb_memory(), status.memory);
  }
  if (pool_ != nullptr) {
    const windows::CutterStats* cut = live_.window_stats();
    const uint64_t late = cut != nullptr ? cut->late : 0;
    std::lock_guard<std::mutex> l(windows_mu_);
    add(metrics_->window_late_transactions(), late, window_late_seen_);
    window_late_seen_ = late;
    status.windows = server::WindowsStatus{.enabled = true,
                                           .sealed = windows_sealed_,
                                           .done = windows_done_,
                                           .dropped = windows_dropped_,
                                           .queued = pool_->queued(),
                                           .running = pool_->running(),
                                           .late_transactions = late,
                                           .checkers = checker_status_};
    metrics_->windows_queued().Set(static_cast<double>(status.windows.queued));
  }
  std::lock_guard<std::mutex> l(mu_);
  status.counts.refused_transactions = refused_total + late_refusals_;
  if (counters != nullptr) {
    status.counts.duplicate_batches = counters->batches_duplicate.load(std::memory_order_relaxed);
  }
  status_ = std::move(status);
}

absl::StatusOr<store::ViolationPage> Monitor::Query(const store::ViolationFilter& filter,
                                                    size_t limit, std::string_view page_token) {
  return store_->QueryViolations(filter, limit, page_token);
}

absl::StatusOr<server::DaemonStatus> Monitor::GetStatus() {
  server::DaemonStatus status;
  {
    std::lock_guard<std::mutex> l(mu_);
    status = status_;
  }
  status.uptime_seconds = static_cast<double>(NowUnixMs() - start_unix_ms_) / 1000.0;
  status.memory.resident_bytes = server::ProcessResidentMemoryBytes().value_or(0);
  for (server::StreamStatus& s : status.streams) {
    if (absl::StatusOr<store::StreamRecord> r = store_->GetStream(s.name); r.ok()) {
      s.acked_sequence = r->durable_seq;
    }
  }
  return status;
}

}  // namespace isowatch::monitor
