// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/checkers/plugin.h"
#include "isowatch/common/clock.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/monitor/violation_reporter.h"
#include "isowatch/server/metrics.h"
#include "isowatch/server/status_source.h"
#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/verdict/violation.h"
#include "isowatch/windows/check_pool.h"
#include "isowatch/windows/window_cutter.h"

namespace isowatch::monitor {

// The windows the plug-in checkers judge (docs/windows.md), from the cutter to the store. The
// engine thread hands over each window the live checker seals; the tracker keeps it until every
// checker is done with it (saved with each checkpoint meanwhile, so that a restart checks it
// again), queues it on the CheckPool, reports the violations the checkers find (the
// ViolationReporter stores them under their stable ids, or summarises them), and records in the
// store how far the windows are done (windows below that number are not checked again after a
// restart).
//
// Invariants (under mu_):
//  1. Every window below done_ is done (checked by every checker, or dropped), and so is every
//     window in done_above_, all of them above done_; the store holds done_ or a lower number.
//  2. unfinished_ holds exactly the windows submitted and not done.
//  3. stream_names_ has a name for every origin of every window submitted.
//
// Thread-safe: SubmitSealed, Restore, SaveUnfinished and Status come from the engine thread (or
// recovery, before it starts); the outcomes arrive on the pool's worker threads. Owns the
// CheckPool and its checkers; the store, the metrics, the reporter and the clock belong to the
// caller and outlive it.
class WindowTracker {
 public:
  // Creates the checkers named in `checkers`, with their options, and the pool that runs them.
  // Errors: an unknown checker or bad options (InvalidArgument), reading the store.
  static absl::StatusOr<std::unique_ptr<WindowTracker>> Create(
      store::Store* store, server::DaemonMetrics* metrics, ViolationReporter* reporter,
      const common::Clock* clock,
      const std::vector<std::pair<std::string, checkers::CheckerOptions>>& checkers,
      windows::PoolOptions pool);
  // Stop().
  ~WindowTracker();
  WindowTracker(const WindowTracker&) = delete;
  WindowTracker& operator=(const WindowTracker&) = delete;

  // Recovery from checkpoint `c`, whose live checker `live` was restored: the windows the cutter
  // had sealed count as sealed, and those saved with the checkpoint and not done since are
  // checked again. Errors: a saved window does not load.
  absl::Status Restore(const v1::DaemonCheckpoint& c, const LiveChecker& live);
  // Engine thread: queues the windows `live` sealed (but those done before a restart).
  void SubmitSealed(std::vector<windows::Window> sealed, const LiveChecker& live);
  // Engine thread: adds the windows not done yet to checkpoint `c`.
  absl::Status SaveUnfinished(v1::DaemonCheckpoint& c) const;
  // The windows' part of the status, but late_transactions (the cutter counts those).
  // REQUIRES: before Stop.
  server::WindowsStatus Status() const;
  // Cancels the checks running and drops those queued: those windows are not recorded as done,
  // so they are checked again after a restart. Joins the workers. Idempotent.
  void Stop();

 private:
  WindowTracker(store::Store* store, server::DaemonMetrics* metrics, ViolationReporter* reporter,
                const common::Clock* clock, uint64_t done_before);

  // Keeps `w` until it is done and queues it for the checkers.
  void Submit(std::shared_ptr<const windows::Window> w, const LiveChecker& live);
  // Worker threads: one checker's outcome on one window; a dropped window.
  void OnResult(const windows::Window& w, const checkers::Checker& c,
                windows::CheckOutcome outcome);
  void OnDropped(const windows::Window& w);
  // Window `index` is done (checked by every checker, or dropped).
  void Done(uint64_t index);
  store::ViolationRecord Render(const windows::Window& w, const verdict::Violation& v);

  store::Store* const store_;
  server::DaemonMetrics* const metrics_;
  ViolationReporter* const reporter_;
  const common::Clock* const clock_;
  // Windows below it were done before the restart: not checked again.
  const uint64_t done_before_;
  // The last checker to run on a window: the window is done after its outcome. Set by Create.
  const checkers::Checker* last_checker_ = nullptr;
  // Created by Create, reset by Stop; used by the engine thread only before Stop (the monitor
  // joins the engine thread before it stops the tracker), so it needs no lock.
  std::unique_ptr<windows::CheckPool> pool_;

  mutable absl::Mutex mu_;
  std::vector<std::string> stream_names_ ABSL_GUARDED_BY(mu_);  // by origin
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> done_above_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<const windows::Window>> unfinished_ ABSL_GUARDED_BY(mu_);
  uint64_t sealed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<server::CheckerStatus> checker_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isowatch::monitor
