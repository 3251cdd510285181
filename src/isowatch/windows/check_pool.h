// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/checkers/plugin.h"
#include "isowatch/windows/window_cutter.h"

namespace isowatch::windows {

struct PoolOptions {
  // Worker threads; 0: one fewer than the cores, at least one.
  size_t threads = 0;
  // Sealed windows waiting for a worker; when one more comes, the oldest waiting one is dropped.
  size_t max_queued = 16;
  // Time a checker may spend on one window; out of time, it reports UNKNOWN for that window.
  std::chrono::milliseconds time_limit{60'000};
};

// What one checker made of one window.
struct CheckOutcome {
  checkers::CheckerResult result;  // result.complete false: UNKNOWN (out of time or stopped)
  double seconds = 0;
  bool cancelled = false;  // stopped by Stop, not by the time limit
};

// A fixed pool of threads running every configured checker on each sealed window, each with its
// own time limit (docs/windows.md). Submit never blocks the caller (the online engine): when the
// queue is full the oldest waiting window is dropped and reported through `on_drop`.
//
// Thread-safe. The callbacks run on the worker threads (on_drop on the caller of Submit), and
// may run concurrently with one another. Owns the checkers and the worker threads (joined by the
// destructor).
class CheckPool {
 public:
  using ResultFn = std::function<void(const Window&, const checkers::Checker&, CheckOutcome)>;
  using DropFn = std::function<void(const Window&)>;

  CheckPool(PoolOptions options, std::vector<std::unique_ptr<checkers::Checker>> checkers,
            ResultFn on_result, DropFn on_drop);
  // Stop(), then joins the workers.
  ~CheckPool();
  CheckPool(const CheckPool&) = delete;
  CheckPool& operator=(const CheckPool&) = delete;

  // Queues a sealed window for every checker.
  void Submit(Window window);
  // The same, for a window the caller keeps a share of (to save it until its checks are done).
  void Submit(std::shared_ptr<const Window> window);
  // Waits until every window submitted so far has been checked or dropped.
  void Drain();
  // Cancels the running checks (their outcome is UNKNOWN, `cancelled`), drops the queued
  // windows without calling on_drop, and stops the workers. Idempotent.
  void Stop();

  size_t threads() const { return workers_.size(); }
  size_t queued() const;   // waiting for a worker
  size_t running() const;  // being checked
  const std::vector<std::unique_ptr<checkers::Checker>>& checkers() const { return checkers_; }

 private:
  void Work();

  const PoolOptions options_;
  const std::vector<std::unique_ptr<checkers::Checker>> checkers_;
  const ResultFn on_result_;
  const DropFn on_drop_;
  // Flag, set once by Stop and polled by the running checks (CheckLimits). Relaxed: it orders
  // nothing; what the checks must see of the stop is only the flag itself.
  std::atomic<bool> cancel_{false};
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<const Window>> queue_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;  // started by the constructor, joined by the destructor
};

}  // namespace isowatch::windows
