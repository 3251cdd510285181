// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/window_tracker.h"

#include <cstdint>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/checkers/registry.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/windows/saved_window.h"

namespace isowatch::monitor {

absl::StatusOr<std::unique_ptr<WindowTracker>> WindowTracker::Create(
    store::Store* store, server::DaemonMetrics* metrics, ViolationReporter* reporter,
    const common::Clock* clock,
    const std::vector<std::pair<std::string, checkers::CheckerOptions>>& checkers,
    windows::PoolOptions pool) {
  if (checkers.empty()) return absl::InvalidArgumentError("no window checkers");
  std::vector<std::unique_ptr<checkers::Checker>> created;
  std::vector<server::CheckerStatus> status;
  for (const auto& [name, checker_options] : checkers) {
    ASSIGN_OR_RETURN(std::unique_ptr<checkers::Checker> checker,
                     checkers::CreateChecker(name, checker_options));
    // Its window checks, and each (level, anomaly) it may report, are counted from 0 (some pairs
    // never occur).
    metrics->WindowChecks(name, "checked");
    metrics->WindowChecks(name, "unknown");
    if (const checkers::CheckerInfo* info = checkers::FindChecker(name); info != nullptr) {
      for (verdict::IsolationLevel level : checker->levels()) {
        for (verdict::Anomaly anomaly : info->anomalies) {
          metrics->Violations(name, verdict::IsolationLevelName(level),
                              verdict::AnomalyName(anomaly));
          metrics->ViolationsSummarised(name, verdict::IsolationLevelName(level),
                                        verdict::AnomalyName(anomaly));
        }
      }
    }
    status.push_back({.name = std::string(checker->name())});
    created.push_back(std::move(checker));
  }
  ASSIGN_OR_RETURN(const uint64_t done_before, store->WindowsDone());
  std::unique_ptr<WindowTracker> t(new WindowTracker(store, metrics, reporter, clock, done_before));
  t->last_checker_ = created.back().get();
  {
    absl::MutexLock l(&t->mu_);
    t->checker_status_ = std::move(status);
  }
  WindowTracker* raw = t.get();
  t->pool_ = std::make_unique<windows::CheckPool>(
      pool, std::move(created),
      [raw](const windows::Window& w, const checkers::Checker& c, windows::CheckOutcome o) {
        raw->OnResult(w, c, std::move(o));
      },
      [raw](const windows::Window& w) { raw->OnDropped(w); });
  return t;
}

WindowTracker::WindowTracker(store::Store* store, server::DaemonMetrics* metrics,
                             ViolationReporter* reporter, const common::Clock* clock,
                             uint64_t done_before)
    : store_(store),
      metrics_(metrics),
      reporter_(reporter),
      clock_(clock),
      done_before_(done_before) {
  absl::MutexLock l(&mu_);
  done_ = done_before;
}

WindowTracker::~WindowTracker() { Stop(); }

void WindowTracker::Stop() {
  if (pool_ == nullptr) return;
  pool_->Stop();
  pool_.reset();
}

absl::Status WindowTracker::Restore(const v1::DaemonCheckpoint& c, const LiveChecker& live) {
  if (const windows::CutterStats* cut = live.window_stats(); cut != nullptr) {
    absl::MutexLock l(&mu_);
    sealed_ = cut->sealed;
  }
  size_t submitted = 0;
  for (const v1::SavedWindow& saved : c.windows()) {
    if (saved.index() < done_before_) continue;  // done after the checkpoint was saved
    ASSIGN_OR_RETURN(windows::Window w, windows::LoadWindow(saved));
    Submit(std::make_shared<const windows::Window>(std::move(w)), live);
    ++submitted;
  }
  if (submitted > 0) {
    spdlog::info("{} windows saved with the checkpoint are checked again", submitted);
  }
  return absl::OkStatus();
}

void WindowTracker::SubmitSealed(std::vector<windows::Window> sealed, const LiveChecker& live) {
  if (sealed.empty()) return;
  {
    absl::MutexLock l(&mu_);
    sealed_ += sealed.size();
  }
  metrics_->windows_sealed().Increment(static_cast<double>(sealed.size()));
  for (windows::Window& w : sealed) {
    if (w.scope.index < done_before_) continue;  // done before a restart
    Submit(std::make_shared<const windows::Window>(std::move(w)), live);
  }
}

void WindowTracker::Submit(std::shared_ptr<const windows::Window> w, const LiveChecker& live) {
  {
    absl::MutexLock l(&mu_);
    while (stream_names_.size() < UINT16_MAX) {
      const std::string_view name = live.stream_name(static_cast<uint16_t>(stream_names_.size()));
      if (name.empty()) break;
      stream_names_.emplace_back(name);
    }
    unfinished_[w->scope.index] = w;
  }
  pool_->Submit(std::move(w));
}

absl::Status WindowTracker::SaveUnfinished(v1::DaemonCheckpoint& c) const {
  // Those done by the time the checkpoint is stored are checked again after a restart from it;
  // their violations are stored once (by id).
  std::vector<std::shared_ptr<const windows::Window>> unfinished;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [index, w] : unfinished_) unfinished.push_back(w);
  }
  for (const std::shared_ptr<const windows::Window>& w : unfinished) {
    RETURN_IF_ERROR(windows::SaveWindow(*w, c.add_windows()));
  }
  return absl::OkStatus();
}

server::WindowsStatus WindowTracker::Status() const {
  const size_t queued = pool_->queued();
  const size_t running = pool_->running();
  absl::MutexLock l(&mu_);
  return server::WindowsStatus{.enabled = true,
                               .sealed = sealed_,
                               .done = done_,
                               .dropped = dropped_,
                               .queued = queued,
                               .running = running,
                               .late_transactions = 0,
                               .checkers = checker_status_};
}

void WindowTracker::OnResult(const windows::Window& w, const checkers::Checker& c,
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
  std::vector<store::ViolationRecord> found;
  found.reserve(outcome.result.violations.size());
  for (const verdict::Violation& v : outcome.result.violations) found.push_back(Render(w, v));
  uint64_t stored = 0;
  if (absl::StatusOr<uint64_t> fresh =
          reporter_->Report(found, fmt::format(", window {}", w.scope.index));
      fresh.ok()) {
    stored = *fresh;
  } else {
    spdlog::error("storing the violations of window {} failed: {}", w.scope.index,
                  common::StdView(fresh.status().message()));
  }
  {
    absl::MutexLock l(&mu_);
    for (server::CheckerStatus& s : checker_status_) {
      if (s.name != name || outcome.cancelled) continue;
      ++(complete ? s.checked : s.unknown);
      s.violations += stored;
      s.seconds += outcome.seconds;
    }
  }
  if (!outcome.cancelled && &c == last_checker_) Done(w.scope.index);
}

void WindowTracker::OnDropped(const windows::Window& w) {
  metrics_->windows_dropped().Increment();
  spdlog::warn(
      "window {} ({} transactions, commits {} to {}) dropped unchecked: the window checkers fell "
      "behind (windows.max_queued); the online checks go on",
      w.scope.index, w.own, w.first_commit.physical, w.last_commit.physical);
  {
    absl::MutexLock l(&mu_);
    ++dropped_;
  }
  Done(w.scope.index);
}

void WindowTracker::Done(uint64_t index) {
  absl::MutexLock l(&mu_);
  unfinished_.erase(index);
  if (index < done_) return;
  done_above_.insert(index);
  const uint64_t before = done_;
  while (done_above_.erase(done_) > 0) ++done_;
  if (done_ == before) return;
  if (absl::Status s = store_->SetWindowsDone(done_); !s.ok()) {
    spdlog::error("recording the windows done failed: {}", common::StdView(s.message()));
  }
}

store::ViolationRecord WindowTracker::Render(const windows::Window& w,
                                             const verdict::Violation& v) {
  store::ViolationRecord r;
  {
    absl::MutexLock l(&mu_);
    // Called by RenderViolation, under mu_.
    auto stream_of = [&](TxnId id) ABSL_SHARED_LOCKS_REQUIRED(mu_) -> std::string_view {
      if (id.value() >= w.origins.size() || w.origins[id.value()] >= stream_names_.size()) {
        return {};
      }
      return stream_names_[w.origins[id.value()]];
    };
    r = RenderViolation(w.history, v, stream_of);
  }
  r.finalised_unix_ms = clock_->NowUnixMs();
  // The window it was found in, as one more field of the object.
  if (!r.json.empty() && r.json.back() == '}') {
    r.json.pop_back();
    r.json += fmt::format(
        R"(,"window":{{"index":{},"first_commit":{},"last_commit":{},"transactions":{},"lead_in":{}}}}})",
        w.scope.index, w.first_commit.physical, w.last_commit.physical, w.own, w.lead_in);
  }
  return r;
}

}  // namespace isowatch::monitor
