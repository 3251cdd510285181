// SPDX-License-Identifier: Apache-2.0
// Hand-written arrival orders: what each late arrival re-checks, and when a verdict is final.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"
#include "tests/unit/engine/engine_harness.h"

namespace isowatch::engine {
namespace {

using history::History;
using ::isowatch::testing::SummarizeAll;
using ::isowatch::testing::TestHistory;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using verdict::IsolationLevel;

// Seed 000, Figure 2, arrival order of Example 5: T1, T2, T3, T5, then T4. Before T4 arrives T5's
// read of x = 4 has no explanation (a provisional EXT alarm); T4's arrival clears it and reveals
// the conflict of T4 and T3, reported once.
TEST(EngineRecheckTest, Example5) {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1);
  t.Txn("T2", "b", 3, 4).R(kX, 1).W(kY, 1);
  t.Txn("T3", "c", 5, 9).W(kX, 3);
  t.Txn("T4", "d", 6, 7).R(kX, 1).W(kX, 4);
  t.Txn("T5", "e", 8, 10).R(kX, 4);
  Harness e(t);
  e.Deliver({"T1", "T2", "T3", "T5"}, /*watermark=*/6);
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().provisional_violations, 1u);  // T5's read of x
  EXPECT_GE(e.stats().provisional_reads, 1u);

  e.Deliver({"T4"}, /*watermark=*/10);
  EXPECT_EQ(e.stats().provisional_violations, 0u);
  EXPECT_EQ(e.stats().flip_flops, 1u);  // T5: wrong, then right
  EXPECT_THAT(e.Take(), ElementsAre("NOCONFLICT T4,T3 k=0"));
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().final_violations, 1u);
  EXPECT_EQ(e.stats().provisional_reads, 0u);
  EXPECT_EQ(e.stats().late_arrivals, 0u);
}

// A transaction that arrives at or below the final point comes after the verdicts it could
// reverse were final and reported: counted (an upper bound of reported flip-flops), and the
// reported verdict stands. Honest watermarks never give one (Example5 above).
TEST(EngineRecheckTest, AnArrivalBelowTheFinalPointIsCounted) {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1);
  t.Txn("T3", "c", 3, 4).W(kX, 2);
  t.Txn("T2", "b", 5, 6).R(kX, 2);
  Harness e(t);
  e.Deliver({"T1", "T2"}, /*watermark=*/10);
  EXPECT_THAT(e.Take(), ElementsAre(StartsWith("EXT")));  // T2 read a value nobody wrote yet
  EXPECT_EQ(e.stats().below_final_arrivals, 0u);
  e.Deliver({"T3"}, /*watermark=*/10);  // the watermark lied
  EXPECT_EQ(e.stats().late_arrivals, 1u);
  EXPECT_EQ(e.stats().below_final_arrivals, 1u);
  EXPECT_EQ(e.stats().flip_flops, 0u);
  EXPECT_THAT(e.Take(), IsEmpty());
}

// The same history with no watermark at all: Finish makes everything final, with the same result.
TEST(EngineRecheckTest, Example5FinishedWithoutWatermarks) {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1);
  t.Txn("T2", "b", 3, 4).R(kX, 1).W(kY, 1);
  t.Txn("T3", "c", 5, 9).W(kX, 3);
  t.Txn("T4", "d", 6, 7).R(kX, 1).W(kX, 4);
  t.Txn("T5", "e", 8, 10).R(kX, 4);
  Harness e(t);
  e.Deliver({"T5"});
  e.Deliver({"T3"});
  e.Deliver({"T2", "T4"});
  e.Deliver({"T1"});
  e.engine().Finish();
  EXPECT_THAT(e.Take(), ElementsAre("NOCONFLICT T4,T3 k=0"));
}

// Every stream closed makes everything delivered final, but not what a stream opened later will
// deliver: its reader arrives before its writer, and the writer still clears the alarm. (The final
// point once was Max after the last close, so the reader was judged at once: EXT.)
TEST(EngineRecheckTest, AStreamOpenedAfterEveryCloseHoldsFinalityBack) {
  TestHistory t;
  t.Txn("W1", "a", 1, 2).W(kX, 1);
  t.Txn("W2", "b", 3, 4).W(kX, 2);
  t.Txn("R", "c", 5, 6).R(kX, 2);
  Harness e(t);
  e.Deliver({"W1"});
  e.engine().CloseStream(e.stream());
  EXPECT_EQ(e.engine().final_point(), Ts(2));
  const StreamId late = e.engine().AddStream("late");
  e.engine().Deliver(late, Ids(e.h(), {"R"}), std::nullopt);
  EXPECT_EQ(e.stats().provisional_violations, 1u);
  EXPECT_THAT(e.Take(), IsEmpty());
  e.engine().Deliver(late, Ids(e.h(), {"W2"}), std::nullopt);
  EXPECT_EQ(e.stats().provisional_violations, 0u);
  e.engine().CloseStream(late);
  EXPECT_EQ(e.engine().final_point(), Ts(6));
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().provisional_reads, 0u);
  EXPECT_EQ(e.stats().below_final_arrivals, 0u);
}

// A reader arrives before the writer of the value it read: a provisional alarm that the writer's
// arrival clears; nothing is ever reported.
TEST(EngineRecheckTest, LateWriterClearsAnExtAlarm) {
  TestHistory t;
  t.Txn("W", "a", 1, 2).W(kX, 1);
  t.Txn("R", "b", 3, 4).R(kX, 1);
  Harness e(t);
  e.Deliver({"R"});
  EXPECT_EQ(e.stats().provisional_violations, 1u);
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({"W"}, /*watermark=*/4);
  EXPECT_EQ(e.stats().provisional_violations, 0u);
  EXPECT_EQ(e.stats().flip_flops, 1u);
  EXPECT_THAT(e.Take(), IsEmpty());
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().final_violations, 0u);
}

// A reader that looked right becomes wrong when a newer version arrives inside its snapshot;
// the violation is final only once the watermark passes the reader's start.
TEST(EngineRecheckTest, LateWriterCreatesAnExtViolation) {
  TestHistory t;
  t.Txn("W1", "a", 1, 2).W(kX, 1);
  t.Txn("W2", "b", 3, 4).W(kX, 2);
  t.Txn("R", "c", 5, 6).R(kX, 1);
  Harness e(t);
  e.Deliver({"W1", "R"}, /*watermark=*/2);
  EXPECT_EQ(e.stats().provisional_violations, 0u);
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({"W2"}, /*watermark=*/4);  // below R's start (5): not final yet
  EXPECT_EQ(e.stats().provisional_violations, 1u);
  EXPECT_EQ(e.stats().flip_flops, 1u);
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({}, /*watermark=*/6);
  const std::vector<verdict::Violation> v = e.TakeFull();
  EXPECT_THAT(SummarizeAll(e.h(), v), ElementsAre("EXT/before R,W1 k=0"));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].expected, "2");
  EXPECT_EQ(v[0].observed, "1");
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// The same at SER: the read point is the commit, so a writer committed between the reader's start
// and commit matters.
TEST(EngineRecheckTest, LateWriterCreatesAnExtViolationAtSer) {
  TestHistory t;
  t.Txn("W1", "a", 1, 2).W(kX, 1);
  t.Txn("W2", "b", 3, 4).W(kX, 2);
  t.Txn("R", "c", 2, 6).R(kX, 1).W(kY, 1);
  Harness e(t, IsolationLevel::kSerializable);
  e.Deliver({"W1", "R"}, /*watermark=*/2);
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({"W2"}, /*watermark=*/6);
  EXPECT_THAT(e.Take(), ElementsAre("EXT/before R,W1 k=0"));
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// A list reader sees a prefix that a late append completes.
TEST(EngineRecheckTest, LateAppendClearsAListAlarm) {
  TestHistory t;
  t.Txn("A1", "a", 1, 2).A(kX, 1);
  t.Txn("A2", "b", 3, 4).A(kX, 2);
  t.Txn("R", "c", 5, 6).L(kX, {1, 2});
  Harness e(t);
  e.Deliver({"A2", "R"});
  EXPECT_EQ(e.stats().provisional_violations, 1u);
  e.Deliver({"A1"}, /*watermark=*/6);
  EXPECT_EQ(e.stats().provisional_violations, 0u);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// Two writers of x overlap; the conflict is found when the second one arrives, and reported
// once, with the first committer first.
TEST(EngineRecheckTest, LateOverlappingWriter) {
  TestHistory t;
  t.Txn("T1", "a", 1, 4).W(kX, 1);
  t.Txn("T2", "b", 2, 3).W(kX, 2);
  t.Txn("T3", "c", 5, 6).R(kX, 1);
  Harness e(t);
  e.Deliver({"T1"});
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({"T3"});
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({"T2"}, /*watermark=*/6);
  EXPECT_THAT(e.Take(), ElementsAre("NOCONFLICT T2,T1 k=0"));
  e.Deliver({}, /*watermark=*/100);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().final_violations, 1u);
}

// The session predecessor arrives after its successor, which started before it committed.
TEST(EngineRecheckTest, LateSessionPredecessor) {
  TestHistory t;
  t.Txn("P", "s", 1, 5).W(kX, 1);
  t.Txn("T", "s", 3, 4).R(kY, std::nullopt);
  Harness e(t);
  e.Deliver({"T"});
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({"P"}, /*watermark=*/5);
  EXPECT_THAT(e.Take(), ElementsAre("SESSION T,P"));
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// The same pair in order is fine when the predecessor committed by the successor's start.
TEST(EngineRecheckTest, SessionInOrderIsFine) {
  TestHistory t;
  t.Txn("P", "s", 1, 3).W(kX, 1);
  t.Txn("T", "s", 3, 4).R(kX, 1);
  Harness e(t);
  e.Deliver({"T"});
  e.Deliver({"P"}, /*watermark=*/4);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// A transaction delivered below a watermark that already passed its commit is counted as late,
// and still checked.
TEST(EngineRecheckTest, LateArrivalBelowThePassedWatermark) {
  TestHistory t;
  t.Txn("W", "a", 1, 2).W(kX, 1);
  t.Txn("L", "b", 3, 4).R(kX, 5);  // reads a value nobody wrote
  t.Txn("U", "c", 5, 10).W(kY, 1);
  Harness e(t);
  e.Deliver({"W", "U"}, /*watermark=*/10);
  EXPECT_THAT(e.Take(), IsEmpty());
  e.Deliver({"L"}, /*watermark=*/10);
  EXPECT_EQ(e.stats().late_arrivals, 1u);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), ElementsAre("EXT/never L k=0"));
  EXPECT_EQ(e.stats().checked, 3u);
}

// A transaction delivered twice is checked once: its violation is reported once.
TEST(EngineRecheckTest, DuplicateDeliveryIsIgnored) {
  TestHistory t;
  t.Txn("W", "a", 1, 2).W(kX, 1);
  t.Txn("R", "b", 3, 4).R(kX, 7);
  Harness e(t);
  e.Deliver({"R", "R"});
  EXPECT_EQ(e.stats().duplicates, 1u);
  e.Deliver({"W"}, /*watermark=*/4);
  EXPECT_THAT(e.Take(), ElementsAre("EXT/never R k=0"));
  e.Deliver({"R", "W"}, /*watermark=*/4);  // again, after the verdict was final
  EXPECT_EQ(e.stats().duplicates, 3u);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().checked, 2u);
  EXPECT_EQ(e.stats().final_violations, 1u);
}

// A stream without watermarks: a verdict becomes final once the timeout has passed since the
// transaction arrived, not before; a writer that arrives within the timeout still counts.
TEST(EngineRecheckTest, TimeoutWithoutWatermarks) {
  TestHistory t;
  t.Txn("W", "a", 1, 2).W(kX, 1);
  t.Txn("R1", "b", 3, 4).R(kX, 9);  // wrong whatever arrives
  t.Txn("R2", "c", 5, 6).R(kX, 1);  // right once W arrives
  Harness e(t, IsolationLevel::kSnapshotIsolation, /*timeout_ms=*/1000);
  e.clock().Set(100);
  e.Deliver({"R1", "R2"});
  e.engine().Tick();
  EXPECT_THAT(e.Take(), IsEmpty());
  e.clock().Set(600);
  e.Deliver({"W"});
  e.engine().Tick();
  EXPECT_THAT(e.Take(), IsEmpty());
  e.clock().Set(1099);  // arrival + timeout - 1
  e.engine().Tick();
  EXPECT_THAT(e.Take(), IsEmpty());
  e.clock().Set(1101);
  e.engine().Tick();
  EXPECT_THAT(e.Take(), ElementsAre("EXT/never R1 k=0"));
  EXPECT_EQ(e.stats().provisional_reads, 0u);  // R2's verdict is final too (right)
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// A verdict that has already timed out is final: a later writer does not change what was
// reported, and what is reported is never withdrawn.
TEST(EngineRecheckTest, TimedOutVerdictStays) {
  TestHistory t;
  t.Txn("W", "a", 1, 2).W(kX, 1);
  t.Txn("R", "b", 3, 4).R(kX, 1);
  Harness e(t, IsolationLevel::kSnapshotIsolation, /*timeout_ms=*/100);
  e.Deliver({"R"});
  e.clock().Set(500);
  e.engine().Tick();
  const std::vector<std::string> first = e.Take();
  EXPECT_EQ(first.size(), 1u);  // R's read of x = 1 is unexplained when it times out
  e.Deliver({"W"});
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// Flip-flops: the verdict on R's read goes wrong -> right -> wrong as versions arrive.
TEST(EngineRecheckTest, FlipFlopsCounted) {
  TestHistory t;
  t.Txn("W1", "a", 1, 2).W(kX, 2);
  t.Txn("W2", "b", 3, 4).W(kX, 3);
  t.Txn("R", "c", 5, 6).R(kX, 2);
  Harness e(t);
  e.Deliver({"R"});
  EXPECT_EQ(e.stats().provisional_violations, 1u);  // expects the initial value
  e.Deliver({"W1"});
  EXPECT_EQ(e.stats().provisional_violations, 0u);
  e.Deliver({"W2"}, /*watermark=*/6);
  EXPECT_EQ(e.stats().flip_flops, 2u);
  const std::vector<verdict::Violation> v = e.TakeFull();
  EXPECT_THAT(SummarizeAll(e.h(), v), ElementsAre("EXT/before R,W1 k=0"));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].expected, "3");
  EXPECT_EQ(v[0].observed, "2");
}

// A transaction longer than every one seen before it, arriving once the final point has passed
// its start, needs versions that may already be collected: a horizon miss, unless the engine
// retains versions that far below the final point.
TEST(EngineRecheckTest, LongTransactionNeedsRetention) {
  TestHistory t;
  t.Txn("1", "a", 2, 3).A(kX, 8);
  t.Txn("2", "a", 11, 14).A(kX, 39).L(kX, {8, 39});
  t.Txn("3", "a", 15, 18);
  t.Txn("4", "b", 11, 19).L(kX, {8});  // its snapshot (start 11) holds [8]
  for (int64_t retention : {0, 8}) {
    Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, retention);
    e.Deliver({"1"}, 3);
    e.Deliver({"2"}, 14);
    e.Deliver({"3"}, 18);
    e.Deliver({"4"}, 19);
    e.engine().Finish();
    const std::vector<std::string> got = e.Take();
    if (retention == 0) {
      // Transaction 4 is longer than any before it: what its read could see was collected, so
      // the read goes unjudged and counted, never a false alarm.
      EXPECT_EQ(e.stats().horizon_misses, 1u);
      EXPECT_THAT(got, IsEmpty());
    } else {
      EXPECT_EQ(e.stats().horizon_misses, 0u);
      EXPECT_THAT(got, IsEmpty());
    }
  }
}

// Whatever the order, the final violations are Chronos's, with the same values and wording of
// expected/observed.
TEST(EngineRecheckTest, AllOrdersOfASmallHistoryAgreeWithChronos) {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1).W(kY, 1);
  t.Txn("T2", "b", 3, 6).R(kX, 1).W(kX, 2);
  t.Txn("T3", "c", 4, 5).R(kY, 1).W(kX, 3);
  t.Txn("T4", "a", 5, 7).R(kX, 3).R(kY, 1);
  t.Txn("T5", "d", 8, 9).R(kX, 3).W(kY, 5);
  const History h = t.Build();
  for (IsolationLevel level : {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
    std::vector<std::string> expected =
        SummarizeAll(h, checkers::RunChronos(h, {.level = level}).violations);
    std::sort(expected.begin(), expected.end());
    std::vector<uint32_t> perm = {0, 1, 2, 3, 4};
    do {
      common::ManualClock clock;
      Engine engine(h, {.level = level, .clock = &clock});
      const StreamId s = engine.AddStream("x");
      for (uint32_t i : perm) {
        const TxnId id(i);
        engine.Deliver(s, std::span<const TxnId>(&id, 1));
      }
      engine.Finish();
      std::vector<std::string> got = SummarizeAll(h, engine.TakeFinalViolations());
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, expected) << "order " << perm[0] << perm[1] << perm[2] << perm[3] << perm[4];
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

}  // namespace
}  // namespace isowatch::engine
