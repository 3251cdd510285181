// SPDX-License-Identifier: Apache-2.0
#include "isowatch/windows/check_pool.h"

#include <algorithm>
#include <utility>

namespace isowatch::windows {
namespace {

size_t DefaultThreads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? cores - 1 : 1;
}

}  // namespace

CheckPool::CheckPool(PoolOptions options, std::vector<std::unique_ptr<checkers::Checker>> checkers,
                     ResultFn on_result, DropFn on_drop)
    : options_(options),
      checkers_(std::move(checkers)),
      on_result_(std::move(on_result)),
      on_drop_(std::move(on_drop)) {
  const size_t n = options_.threads > 0 ? options_.threads : DefaultThreads();
  workers_.reserve(n);
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] { Work(); });
}

CheckPool::~CheckPool() {
  Stop();
  for (std::thread& t : workers_) t.join();
}

void CheckPool::Submit(Window window) { Submit(std::make_shared<const Window>(std::move(window))); }

void CheckPool::Submit(std::shared_ptr<const Window> window) {
  std::shared_ptr<const Window> dropped;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (queue_.size() >= std::max<size_t>(options_.max_queued, 1)) {
      dropped = std::move(queue_.front());
      queue_.pop_front();
    }
    queue_.push_back(std::move(window));
  }
  // The dropped window counts as done for Drain, which sees it gone from the queue.
  if (dropped != nullptr && on_drop_) on_drop_(*dropped);
}

void CheckPool::Drain() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return (queue_.empty() && running_ == 0) || stopping_;
  };
  mu_.Await(absl::Condition(&idle));
}

void CheckPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    queue_.clear();
  }
  // Relaxed: see cancel_.
  cancel_.store(true, std::memory_order_relaxed);
}

size_t CheckPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

size_t CheckPool::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

void CheckPool::Work() {
  using Clock = checkers::CheckLimits::Clock;
  for (;;) {
    std::shared_ptr<const Window> window;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]()
                          ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&has_work));
      if (stopping_) return;
      window = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    for (const std::unique_ptr<checkers::Checker>& checker : checkers_) {
      const Clock::time_point started = Clock::now();
      const checkers::CheckLimits limits(started + options_.time_limit, &cancel_);
      CheckOutcome outcome;
      if (window->defect.empty()) {
        outcome.result = checker->Check(window->history, &window->scope, limits);
      } else {
        outcome.result.complete = false;  // a window that could not be built: UNKNOWN
      }
      outcome.seconds = std::chrono::duration<double>(Clock::now() - started).count();
      outcome.cancelled = cancel_.load(std::memory_order_relaxed);  // relaxed: see cancel_
      if (!outcome.result.complete) outcome.result.violations.clear();
      if (on_result_) on_result_(*window, *checker, std::move(outcome));
    }
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace isowatch::windows
