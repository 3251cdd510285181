// SPDX-License-Identifier: Apache-2.0
// The engine's invariant checks (Engine::CheckInvariantsForTest): they hold along a run, and they
// trip when a part's state is broken behind its back.
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/common/check.h"
#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/internal/engine_impl.h"
#include "isowatch/history/history.h"

#include "tests/testing/test_history.h"

namespace isowatch::engine {

// Reaches the engine's parts, to break what they keep.
class EnginePeer {
 public:
  static EngineStats& Stats(Engine& e) { return e.impl_->ctx_.stats(); }
  static internal::KeyState& State(Engine& e, KeyId key) { return *e.impl_->keys_.Find(key); }
};

namespace {

using history::History;
using history::Timestamp;
using ::isowatch::testing::TestHistory;

constexpr int64_t kX = 0;

// Seed 000, Figure 2: T5 reads x = 4 before T4, which wrote it, arrives.
TestHistory Example5() {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1);
  t.Txn("T2", "b", 3, 4).R(kX, 1).W(1, 1);
  t.Txn("T3", "c", 5, 9).W(kX, 3);
  t.Txn("T4", "d", 6, 7).R(kX, 1).W(kX, 4);
  t.Txn("T5", "e", 8, 10).R(kX, 4);
  return t;
}

class EngineInvariantsTest : public ::testing::Test {
 protected:
  EngineInvariantsTest() : h_(Example5().Build()), engine_(h_, {.clock = &clock_}) {
    stream_ = engine_.AddStream("test");
  }

  void Deliver(std::initializer_list<std::string_view> names, std::optional<int64_t> watermark) {
    std::vector<TxnId> ids;
    for (std::string_view n : names) ids.push_back(h_.FindTxn(n));
    engine_.Deliver(stream_, ids,
                    watermark ? std::optional<Timestamp>(Timestamp{*watermark, 0}) : std::nullopt);
  }
  // Leaves T5's read of x pending (provisionally wrong) and x with versions to collect.
  void DeliverAllButT4() { Deliver({"T1", "T2", "T3", "T5"}, /*watermark=*/6); }
  internal::KeyState& X() { return EnginePeer::State(engine_, h_.FindIntKey(kX)); }

  common::ManualClock clock_{0};
  History h_;
  Engine engine_;
  StreamId stream_ = 0;
};

TEST_F(EngineInvariantsTest, HoldAlongARun) {
  engine_.CheckInvariantsForTest();
  DeliverAllButT4();
  engine_.CheckInvariantsForTest();
  Deliver({"T4"}, /*watermark=*/10);
  engine_.CheckInvariantsForTest();
  engine_.Finish();
  engine_.CheckInvariantsForTest();
  EXPECT_EQ(engine_.TakeFinalViolations().size(), 1u);
}

using EngineInvariantsDeathTest = EngineInvariantsTest;

TEST_F(EngineInvariantsDeathTest, MiscountedPendingReadTrips) {
  if (!common::kDebugChecks) GTEST_SKIP() << "checks run only without NDEBUG";
  DeliverAllButT4();
  ++EnginePeer::Stats(engine_).provisional_reads;
  EXPECT_DEATH(engine_.CheckInvariantsForTest(), "provisional_reads out of step");
}

TEST_F(EngineInvariantsDeathTest, StaleVerdictTrips) {
  if (!common::kDebugChecks) GTEST_SKIP() << "checks run only without NDEBUG";
  DeliverAllButT4();
  internal::ReadInfo& read = X().readers.begin().value();
  ASSERT_TRUE(read.wrong);  // x = 4 read, x = 1 visible at T5's start
  read.wrong = false;
  --EnginePeer::Stats(engine_).provisional_violations;
  EXPECT_DEATH(engine_.CheckInvariantsForTest(), "a pending read's verdict is stale");
}

TEST_F(EngineInvariantsDeathTest, LostFinalityEntryTrips) {
  if (!common::kDebugChecks) GTEST_SKIP() << "checks run only without NDEBUG";
  DeliverAllButT4();
  X().finality_at = Timestamp::Max();
  EXPECT_DEATH(engine_.CheckInvariantsForTest(), "finality_at is not the first pending read's");
}

TEST_F(EngineInvariantsDeathTest, UnscheduledCollectionTrips) {
  if (!common::kDebugChecks) GTEST_SKIP() << "checks run only without NDEBUG";
  DeliverAllButT4();
  ASSERT_GE(X().versions.size(), 2u);
  X().in_gc = false;
  EXPECT_DEATH(engine_.CheckInvariantsForTest(), "not in the collection queue");
}

TEST_F(EngineInvariantsDeathTest, MiscountedVersionTrips) {
  if (!common::kDebugChecks) GTEST_SKIP() << "checks run only without NDEBUG";
  DeliverAllButT4();
  --EnginePeer::Stats(engine_).retained_versions;
  EXPECT_DEATH(engine_.CheckInvariantsForTest(), "retained_versions out of step");
}

}  // namespace
}  // namespace isowatch::engine
