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
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (queue_.size() >= std::max<size_t>(options_.max_queued, 1)) {
      dropped = std::move(queue_.front());
      queue_.pop_front();
    }
    queue_.push_back(std::move(window));
  }
  work_cv_.notify_one();
  if (dropped != nullptr && on_drop_) on_drop_(*dropped);
  // The dropped window counts as done for Drain.
  if (dropped != nullptr) idle_cv_.notify_all();
}

void CheckPool::Drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return (queue_.empty() && running_ == 0) || stopping_; });
}

void CheckPool::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    queue_.clear();
  }
  cancel_.store(true, std::memory_order_relaxed);
  work_cv_.notify_all();
  idle_cv_.notify_all();
}

size_t CheckPool::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t CheckPool::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

void CheckPool::Work() {
  using Clock = checkers::CheckLimits::Clock;
  for (;;) {
    std::shared_ptr<const Window> window;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
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
      outcome.cancelled = cancel_.load(std::memory_order_relaxed);
      if (!outcome.result.complete) outcome.result.violations.clear();
      if (on_result_) on_result_(*window, *checker, std::move(outcome));
    }
    {
      std::lock_guard lock(mu_);
      --running_;
    }
    idle_cv_.notify_all();
  }
}

}  // namespace isowatch::windows
