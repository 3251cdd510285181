// SPDX-License-Identifier: Apache-2.0
#include "isowatch/windows/check_pool.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <gtest/gtest.h>

namespace isowatch::windows {
namespace {

using namespace std::chrono_literals;

constexpr absl::Duration kWait = absl::Seconds(60);

// A checker whose behaviour the test controls: it reports one violation per window, or, while
// blocked, waits until released or out of time.
class FakeChecker final : public checkers::Checker {
 public:
  explicit FakeChecker(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  const std::vector<verdict::IsolationLevel>& levels() const override { return levels_; }
  checkers::CheckerResult Check(const history::History& /*h*/, const checkers::WindowScope* scope,
                                const checkers::CheckLimits& limits) const override {
    checkers::CheckerResult r;
    absl::MutexLock lock(&mu_);
    ++started_;
    // Like a real checker, it polls its limits every few milliseconds of work.
    auto released = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !blocked_; };
    while (!mu_.AwaitWithTimeout(absl::Condition(&released), absl::Milliseconds(1))) {
      if (limits.expired()) {
        r.complete = false;
        r.violations.push_back(verdict::Violation{});  // must not reach the caller
        return r;
      }
    }
    verdict::Violation v;
    v.checker = name_;
    v.explanation = fmt_index(scope);
    r.violations.push_back(v);
    return r;
  }
  static std::string fmt_index(const checkers::WindowScope* scope) {
    return scope == nullptr ? "none" : std::to_string(scope->index);
  }

  void set_blocked(bool blocked) {
    absl::MutexLock lock(&mu_);
    blocked_ = blocked;
  }
  int started() const {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  // Waits until `n` checks have started; false after kWait.
  bool AwaitStarted(int n) const {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }

 private:
  std::string name_;
  std::vector<verdict::IsolationLevel> levels_ = {verdict::IsolationLevel::kSerializable};
  mutable absl::Mutex mu_;
  mutable int started_ ABSL_GUARDED_BY(mu_) = 0;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
};

Window MakeWindow(uint64_t index) {
  Window w;
  w.scope.index = index;
  return w;
}

struct Recorded {
  uint64_t window = 0;
  std::string checker;
  bool complete = false;
  bool cancelled = false;
  size_t violations = 0;
  std::string explanation;
};

class Recorder {
 public:
  CheckPool::ResultFn OnResult() {
    return [this](const Window& w, const checkers::Checker& c, CheckOutcome o) {
      absl::MutexLock lock(&mu);
      results.push_back(
          {.window = w.scope.index,
           .checker = std::string(c.name()),
           .complete = o.result.complete,
           .cancelled = o.cancelled,
           .violations = o.result.violations.size(),
           .explanation = o.result.violations.empty() ? "" : o.result.violations[0].explanation});
    };
  }
  CheckPool::DropFn OnDrop() {
    return [this](const Window& w) {
      absl::MutexLock lock(&mu);
      dropped.push_back(w.scope.index);
    };
  }
  absl::Mutex mu;
  // Read by the test once the pool has drained or stopped; written under mu.
  std::vector<Recorded> results;
  std::vector<uint64_t> dropped;
};

TEST(CheckPool, RunsEveryCheckerOnEveryWindow) {
  Recorder rec;
  std::vector<std::unique_ptr<checkers::Checker>> cs;
  cs.push_back(std::make_unique<FakeChecker>("a"));
  cs.push_back(std::make_unique<FakeChecker>("b"));
  CheckPool pool({.threads = 2, .max_queued = 100, .time_limit = 10s}, std::move(cs),
                 rec.OnResult(), rec.OnDrop());
  EXPECT_EQ(pool.threads(), 2u);
  for (uint64_t i = 0; i < 10; ++i) pool.Submit(MakeWindow(i));
  pool.Drain();
  EXPECT_EQ(pool.queued(), 0u);
  EXPECT_EQ(pool.running(), 0u);
  ASSERT_EQ(rec.results.size(), 20u);
  std::vector<int> seen(10, 0);
  for (const Recorded& r : rec.results) {
    EXPECT_TRUE(r.complete);
    EXPECT_FALSE(r.cancelled);
    ASSERT_EQ(r.violations, 1u);
    EXPECT_EQ(r.explanation, std::to_string(r.window));  // the checker saw the window's scope
    ++seen[r.window];
  }
  for (int n : seen) EXPECT_EQ(n, 2);
  EXPECT_TRUE(rec.dropped.empty());
}

TEST(CheckPool, OutOfTimeIsUnknownWithoutFindings) {
  Recorder rec;
  auto slow = std::make_unique<FakeChecker>("slow");
  slow->set_blocked(true);
  std::vector<std::unique_ptr<checkers::Checker>> cs;
  cs.push_back(std::move(slow));
  cs.push_back(std::make_unique<FakeChecker>("fast"));
  CheckPool pool({.threads = 1, .max_queued = 4, .time_limit = 20ms}, std::move(cs), rec.OnResult(),
                 rec.OnDrop());
  pool.Submit(MakeWindow(7));
  pool.Drain();
  ASSERT_EQ(rec.results.size(), 2u);
  EXPECT_EQ(rec.results[0].checker, "slow");
  EXPECT_FALSE(rec.results[0].complete);
  EXPECT_FALSE(rec.results[0].cancelled);
  EXPECT_EQ(rec.results[0].violations, 0u);
  // The next checker on the same window gets a time limit of its own.
  EXPECT_EQ(rec.results[1].checker, "fast");
  EXPECT_TRUE(rec.results[1].complete);
  EXPECT_EQ(rec.results[1].violations, 1u);
}

TEST(CheckPool, ADefectiveWindowIsUnknownForEveryChecker) {
  Recorder rec;
  auto a = std::make_unique<FakeChecker>("a");
  FakeChecker* pa = a.get();
  std::vector<std::unique_ptr<checkers::Checker>> cs;
  cs.push_back(std::move(a));
  cs.push_back(std::make_unique<FakeChecker>("b"));
  CheckPool pool({.threads = 1, .max_queued = 4, .time_limit = 10s}, std::move(cs), rec.OnResult(),
                 rec.OnDrop());
  Window w = MakeWindow(3);
  w.defect = "could not be built";
  pool.Submit(std::move(w));
  pool.Drain();
  ASSERT_EQ(rec.results.size(), 2u);
  for (const Recorded& r : rec.results) {
    EXPECT_FALSE(r.complete) << r.checker;
    EXPECT_FALSE(r.cancelled);
    EXPECT_EQ(r.violations, 0u);
  }
  EXPECT_EQ(pa->started(), 0);  // not even run
}

TEST(CheckPool, FullQueueDropsTheOldestWaitingWindow) {
  Recorder rec;
  auto gate = std::make_unique<FakeChecker>("gate");
  FakeChecker* g = gate.get();
  g->set_blocked(true);
  std::vector<std::unique_ptr<checkers::Checker>> cs;
  cs.push_back(std::move(gate));
  CheckPool pool({.threads = 1, .max_queued = 2, .time_limit = 60s}, std::move(cs), rec.OnResult(),
                 rec.OnDrop());
  pool.Submit(MakeWindow(0));
  ASSERT_TRUE(g->AwaitStarted(1));                               // window 0 is running
  for (uint64_t i = 1; i <= 4; ++i) pool.Submit(MakeWindow(i));  // the queue holds two
  EXPECT_EQ(pool.queued(), 2u);
  {
    absl::MutexLock lock(&rec.mu);
    EXPECT_EQ(rec.dropped, (std::vector<uint64_t>{1, 2}));
  }
  g->set_blocked(false);
  pool.Drain();
  ASSERT_EQ(rec.results.size(), 3u);
  EXPECT_EQ(rec.results[0].window, 0u);
  EXPECT_EQ(rec.results[1].window, 3u);
  EXPECT_EQ(rec.results[2].window, 4u);
}

TEST(CheckPool, StopCancelsTheRunningCheckAndDropsTheQueue) {
  Recorder rec;
  auto gate = std::make_unique<FakeChecker>("gate");
  FakeChecker* g = gate.get();
  g->set_blocked(true);
  std::vector<std::unique_ptr<checkers::Checker>> cs;
  cs.push_back(std::move(gate));
  auto pool =
      std::make_unique<CheckPool>(PoolOptions{.threads = 1, .max_queued = 8, .time_limit = 60s},
                                  std::move(cs), rec.OnResult(), rec.OnDrop());
  pool->Submit(MakeWindow(0));
  pool->Submit(MakeWindow(1));
  ASSERT_TRUE(g->AwaitStarted(1));
  pool->Stop();
  pool->Stop();                 // idempotent
  pool->Drain();                // returns at once once stopping
  pool->Submit(MakeWindow(2));  // ignored
  const int started = g->started();
  pool.reset();  // joins, and destroys the checker
  ASSERT_EQ(rec.results.size(), 1u);
  EXPECT_EQ(rec.results[0].window, 0u);
  EXPECT_FALSE(rec.results[0].complete);
  EXPECT_TRUE(rec.results[0].cancelled);
  EXPECT_EQ(started, 1);
  EXPECT_TRUE(rec.dropped.empty());  // Stop drops without reporting drops
}

}  // namespace
}  // namespace isowatch::windows
