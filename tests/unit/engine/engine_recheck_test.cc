// SPDX-License-Identifier: Apache-2.0
// Hand-written arrival orders: what each late arrival re-checks, and when a verdict is final.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/history.h"

#include "tests/testing/test_history.h"

namespace isowatch::engine {
namespace {

using history::History;
using history::Timestamp;
using ::isowatch::testing::SummarizeAll;
using ::isowatch::testing::TestHistory;
using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Lt;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using verdict::IsolationLevel;

constexpr int64_t kX = 0;
constexpr int64_t kY = 1;

std::vector<TxnId> Ids(const History& h, std::initializer_list<std::string_view> names) {
  std::vector<TxnId> out;
  for (std::string_view n : names) {
    const TxnId id = h.FindTxn(n);
    if (!id.valid()) std::abort();
    out.push_back(id);
  }
  return out;
}

Timestamp Ts(int64_t t) { return {t, 0}; }

// One engine over a small history, one stream, a clock that moves only when told.
class Harness {
 public:
  explicit Harness(const TestHistory& t, IsolationLevel level = IsolationLevel::kSnapshotIsolation,
                   int64_t timeout_ms = 5000, int64_t retention = 0, VersionSpill* spill = nullptr,
                   bool spill_collected = true, uint64_t memory_budget = 0,
                   int64_t spill_retention = 0)
      : h_(t.Build()),
        engine_(h_, {.level = level,
                     .finality_timeout_ms = timeout_ms,
                     .clock = &clock_,
                     .retention = retention,
                     .spill = spill,
                     .spill_collected = spill_collected,
                     .memory_budget = memory_budget,
                     .spill_retention = spill_retention,
                     .on_reload = [this](double seconds) { reload_seconds_.push_back(seconds); }}),
        stream_(engine_.AddStream("test")) {}

  void Deliver(std::initializer_list<std::string_view> names,
               std::optional<int64_t> watermark = std::nullopt) {
    const std::vector<TxnId> ids = Ids(h_, names);
    engine_.Deliver(stream_, ids,
                    watermark ? std::optional<Timestamp>(Ts(*watermark)) : std::nullopt);
  }
  // The violations that became final since the last call, summarised.
  std::vector<std::string> Take() { return SummarizeAll(h_, engine_.TakeFinalViolations()); }
  std::vector<verdict::Violation> TakeFull() { return engine_.TakeFinalViolations(); }

  const History& h() const { return h_; }
  // The durations EngineOptions::on_reload reported.
  const std::vector<double>& reload_seconds() const { return reload_seconds_; }
  Engine& engine() { return engine_; }
  common::ManualClock& clock() { return clock_; }
  StreamId stream() const { return stream_; }
  const EngineStats& stats() const { return engine_.stats(); }

 private:
  common::ManualClock clock_{0};
  History h_;
  Engine engine_;
  StreamId stream_;
  std::vector<double> reload_seconds_;
};

// What Chronos reports for `h` at SI, summarised: the set the engine must reach.
std::vector<std::string> ChronosSi(const History& h) {
  return SummarizeAll(
      h, checkers::RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation}).violations);
}

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

// The history of the spill tests: transactions 1 to 3 on the list x and the register y, then
// "4", which starts at 11 and commits at 19, after the rest has been collected. Each case adds
// a different "4" and gives what Chronos reports.
struct LateCase {
  std::string name;
  std::function<void(TestHistory&)> late;
  std::vector<std::string> expected;
};

std::vector<LateCase> LateCases() {
  return {
      {"list read as of its snapshot",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).L(kX, {8}); },
       {}},
      {"list read past its snapshot",
       [](TestHistory& t) {
         t.Txn("4", "b", 11, 19).L(kX, {8, 39});
       },
       {"EXT/uncommitted 4,2 k=0"}},
      {"register read of a collected version",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).R(kY, 4); },
       {}},
      {"register read past its snapshot",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).R(kY, 9); },
       {"EXT/after 4,2b k=1"}},
      {"writer overlapping collected writers",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).W(kY, 7); },
       {"NOCONFLICT 2b,4 k=1", "NOCONFLICT 2c,4 k=1", "NOCONFLICT 3,4 k=1"}},
  };
}

TestHistory LateHistory(const LateCase& c) {
  TestHistory t;
  t.Txn("1", "a", 2, 3).A(kX, 8).W(kY, 4);
  t.Txn("2", "a", 11, 14).A(kX, 39).L(kX, {8, 39});
  t.Txn("2b", "c", 12, 13).W(kY, 9);
  t.Txn("2c", "c", 14, 15).W(kY, 10);
  t.Txn("3", "a", 15, 18).W(kY, 6);
  c.late(t);
  return t;
}

// Delivers LateHistory: "4" last, after everything else is final.
void DeliverLate(Harness& e) {
  e.Deliver({"1"}, 3);
  e.Deliver({"2", "2b"}, 14);
  e.Deliver({"2c", "3"}, 18);
  e.Deliver({"4"}, 19);
  e.engine().Finish();
}

// With a spill, a transaction longer than any before it is checked against the versions
// collected before it arrived (here, with retention 0, those of 1 and 2b on y and of 1 and 2
// on the list x, all below the collection point 18 - 3): no horizon miss, the same verdicts as
// offline, for list and register reads and for NoConflict with a collected writer (2b).
TEST(EngineRecheckTest, LongTransactionIsCheckedAgainstTheSpill) {
  // Two ways to get there: retention 0 with everything collected spilled; or retention 8 (the
  // late transaction's start, 11, is within it) with a one-byte budget that pushes everything
  // at or below the final point out of memory, and only what retention would have kept into
  // the spill.
  struct Mode {
    std::string name;
    int64_t retention;
    bool collected;
    uint64_t budget;
  };
  for (const Mode& m : {Mode{"spill everything", 0, true, 0}, Mode{"budget", 8, false, 1}})
    for (const LateCase& c : LateCases()) {
      SCOPED_TRACE(m.name + ": " + c.name);
      const TestHistory t = LateHistory(c);
      MemoryVersionSpill spill;
      Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, m.retention, &spill, m.collected,
                m.budget);
      e.Deliver({"1"}, 3);
      e.Deliver({"2", "2b"}, 14);
      e.Deliver({"2c", "3"}, 18);
      EXPECT_GT(spill.versions(), 0u);  // versions of 1 (and 2) were collected into the spill
      e.Deliver({"4"}, 19);
      e.engine().Finish();
      const std::vector<std::string> got = e.Take();
      EXPECT_THAT(got, UnorderedElementsAreArray(c.expected));
      // The offline check of the same history agrees.
      EXPECT_THAT(got, UnorderedElementsAreArray(ChronosSi(e.h())));
      EXPECT_EQ(e.stats().horizon_misses, 0u);
      EXPECT_GT(e.stats().reloads, 0u);
      EXPECT_EQ(e.reload_seconds().size(), e.stats().reloads) << "each reload is timed";
      EXPECT_EQ(e.stats().spill_errors, 0u);
    }
}

// A pruned spill (spill_retention) no longer answers for snapshots at or below its prune point:
// the late transaction, which starts at 11, finds the spill pruned up to
// 18 - max(1, longest transaction 3) = 15, and each of its checks that needs the spill is a
// horizon miss, never a verdict from what the spill happens to hold still. A retention that
// reaches its start keeps every verdict.
TEST(EngineRecheckTest, PrunedSpillMakesOlderSnapshotsHorizonMisses) {
  for (int64_t spill_retention : {1, 8}) {
    for (const LateCase& c : LateCases()) {
      SCOPED_TRACE(fmt::format("spill_retention {}: {}", spill_retention, c.name));
      const TestHistory t = LateHistory(c);
      MemoryVersionSpill spill;
      Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, true, 0, spill_retention);
      DeliverLate(e);
      const std::vector<std::string> got = e.Take();
      if (spill_retention == 1) {
        EXPECT_GT(e.stats().spill_pruned, 0u);
        EXPECT_GT(e.stats().horizon_misses, 0u);
        // Only verdicts found without the spill (in memory), never one from a partial spill.
        for (const std::string& v : got) EXPECT_THAT(c.expected, Contains(v)) << "a false alarm";
      } else {
        EXPECT_EQ(e.stats().horizon_misses, 0u);
        EXPECT_THAT(got, UnorderedElementsAreArray(c.expected));
      }
      EXPECT_EQ(e.stats().spill_errors, 0u);
    }
  }
}

// Under a memory budget a key idle long enough gives its last version to the spill (an
// eviction). Reads of it are then checked against the spilled version: at or below the final
// point at once; above it they stay pending, so that a version arriving later is still the one
// they see. Late versions older than the spilled one are hidden by it, for reads and re-checks.
TEST(EngineRecheckTest, EvictedKeyIsCheckedFromTheSpill) {
  TestHistory t;
  t.Txn("W1", "a", 10, 20).W(kX, 1).W(kY, 1);
  t.Txn("W0", "b", 1, 5).W(kX, 0);      // late: older than W1
  t.Txn("R1", "c", 200, 201).R(kX, 1);  // sees W1 (not the late W0)
  t.Txn("R2", "d", 200, 202).R(kX, 0);  // EXT: sees W1
  t.Txn("R3", "e", 300, 301).R(kX, 1);  // pending when W0b arrives
  t.Txn("W0b", "f", 6, 7).W(kX, 7);     // late: older than W1
  t.Txn("R4", "g", 400, 401).R(kY, 9);  // pending (y has nothing in memory) when W9 arrives
  t.Txn("W9", "h", 380, 390).W(kY, 9);
  const History h = t.Build();
  std::vector<std::string> expected = ChronosSi(h);
  ASSERT_THAT(expected, ElementsAre("EXT/before R2,W0 k=0"));

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  e.Deliver({"W1"}, 21);
  for (int64_t w = 22; w < 100; ++w) e.Deliver({}, w);  // x stays idle: evicted
  ASSERT_EQ(e.stats().evicted_keys, 2u);
  EXPECT_EQ(e.stats().retained_versions, 0u);
  EXPECT_EQ(e.stats().resident_keys, 0u);  // the keys' states left memory too
  e.Deliver({"W0"}, 100);
  e.Deliver({"R1", "R2"}, 250);
  e.Deliver({"R3"}, 260);
  e.Deliver({"W0b"}, 270);
  e.Deliver({"R4"}, 350);
  e.Deliver({"W9"}, 360);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), UnorderedElementsAreArray(expected));
  EXPECT_EQ(e.stats().late_arrivals, 2u);
  EXPECT_EQ(e.stats().horizon_misses, 0u);
  EXPECT_EQ(e.stats().spill_errors, 0u);
  EXPECT_GT(e.stats().reloads, 0u);
}

// 100 keys, each written once (W<k>, key k holds k), then reads of the first ten (R<k>, one of
// them wrong: key 3 holds 3), long after: by then, under a budget, the keys are evicted.
TestHistory TenReadsOfEvictedKeys() {
  TestHistory t;
  for (int k = 0; k < 100; ++k) t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
  for (int k = 0; k < 10; ++k) {
    t.Txn(fmt::format("R{}", k), "r", 5000 + 2 * k, 5001 + 2 * k).R(k, k == 3 ? 4 : k);
  }
  return t;
}

// An evicted key's state leaves memory with its version and comes back, from its record in the
// spill, at its next read or write. A key that comes back only to be read leaves again as it is,
// without writing anything; one written again is evicted with its new version.
TEST(EngineRecheckTest, EvictedKeysStateLeavesMemoryAndComesBack) {
  constexpr int kKeys = 100;
  TestHistory t = TenReadsOfEvictedKeys();
  t.Txn("W0b", "w", 9000, 9001).W(0, 50).W(3, 53);  // writes two of them again
  t.Txn("R0b", "r", 9100, 9101).R(0, 50).R(3, 3);   // EXT on key 3: it holds 53 now
  const History h = t.Build();
  std::vector<std::string> expected = ChronosSi(h);
  ASSERT_THAT(expected, UnorderedElementsAre("EXT/never R3 k=3", "EXT/before R0b,W3 k=3"));

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  for (int k = 0; k < kKeys; ++k) e.Deliver({fmt::format("W{}", k)}, 11 + 2 * k);
  for (int64_t w = 1000; w < 1100; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_EQ(e.stats().restored_keys, 0u);
  const uint64_t spilled = e.stats().spilled_versions;

  // Read at or below the final point: final at once, judged against the spilled bases.
  for (int k = 0; k < 10; ++k) e.Deliver({fmt::format("R{}", k)}, 5001 + 2 * k);
  EXPECT_EQ(e.stats().restored_keys, 10u);
  EXPECT_THAT(e.Take(), ElementsAre("EXT/never R3 k=3"));
  // Idle again: they leave as they came, with nothing written to the spill (once idle for as
  // long as the wait, which the evictions without returns have shortened).
  for (int64_t w = 5100; w < 5400; ++w) e.Deliver({}, w);
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys) + 10);
  EXPECT_EQ(e.stats().spilled_versions, spilled);

  // Written again, then read: the new versions are checked as any others.
  e.Deliver({"W0b"}, 9050);
  EXPECT_EQ(e.stats().restored_keys, 12u);
  e.Deliver({"R0b"});
  e.engine().Finish();
  EXPECT_THAT(e.Take(), ElementsAre("EXT/before R0b,W3 k=3"));
  EXPECT_EQ(e.stats().horizon_misses, 0u);
  EXPECT_EQ(e.stats().spill_errors, 0u);
}

// Keys the history forgets (Engine::ForgetKeys) are looked up in the spill, by name, at their
// next read or write: an evicted one comes back with what it held, one never evicted is a new
// key. MarkKeys marks exactly the keys whose state in memory holds something, which must not be
// forgotten: they keep their state.
TEST(EngineRecheckTest, ForgottenKeysAreLookedUpInTheSpill) {
  constexpr int kKeys = 100;
  TestHistory t = TenReadsOfEvictedKeys();
  t.Txn("N", "n", 6000, 6001).R(500, 0);  // a key never touched before: EXT, not 0
  t.Txn("W0b", "w", 9000, 9001).W(0, 50).W(3, 53);
  t.Txn("R0b", "r", 9100, 9101).R(0, 50).R(3, 3);  // EXT on key 3: it holds 53 now
  const History h = t.Build();
  std::vector<std::string> expected = ChronosSi(h);
  ASSERT_THAT(expected, UnorderedElementsAre("EXT/never R3 k=3", "EXT/never N k=500",
                                             "EXT/before R0b,W3 k=3"));

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  for (int k = 0; k < kKeys; ++k) e.Deliver({fmt::format("W{}", k)}, 11 + 2 * k);
  for (int64_t w = 1000; w < 1100; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  auto marked = [&e] {
    std::vector<uint64_t> marks;
    e.engine().MarkKeys(marks);
    std::vector<int64_t> keys;
    for (size_t k = 0; k < marks.size() * 64; ++k) {
      if ((marks[k / 64] >> (k % 64) & 1) != 0) keys.push_back(e.h().key(KeyId(k)).payload);
    }
    return keys;
  };
  EXPECT_THAT(marked(), ElementsAre());
  std::vector<KeyId> all;
  for (uint32_t k = 0; k < h.key_count(); ++k) all.push_back(KeyId(k));
  e.engine().ForgetKeys(all);
  EXPECT_EQ(e.stats().forgotten_keys, h.key_count());

  for (int k = 0; k < 10; ++k) e.Deliver({fmt::format("R{}", k)}, 5001 + 2 * k);
  EXPECT_EQ(e.stats().restored_keys, 10u);
  EXPECT_EQ(e.stats().forgotten_returns, 10u);
  EXPECT_THAT(e.Take(), ElementsAre("EXT/never R3 k=3"));
  // Back from the spill, they hold their spilled bases: marked (but those evicted again
  // already, as the wait is short by now), and not forgotten.
  const std::vector<int64_t> held = marked();
  EXPECT_THAT(held, Contains(9));
  EXPECT_THAT(held, Each(Lt(10)));
  std::vector<KeyId> back;
  for (int k = 0; k < 10; ++k) back.push_back(h.FindIntKey(k));
  e.engine().ForgetKeys(back);
  EXPECT_EQ(e.stats().forgotten_keys, h.key_count() + 10 - held.size());

  e.Deliver({"N"}, 6001);
  EXPECT_EQ(e.stats().new_key_lookups, 1u);
  e.Deliver({"W0b"}, 9050);
  e.Deliver({"R0b"});
  e.engine().Finish();
  EXPECT_THAT(e.Take(), UnorderedElementsAre("EXT/never N k=500", "EXT/before R0b,W3 k=3"));
  EXPECT_EQ(e.stats().horizon_misses, 0u);
  EXPECT_EQ(e.stats().spill_errors, 0u);
}

// What an evicted key's record keeps is what late checks of it need: the versions it dropped
// (a late read that needed one is a horizon miss, not a verdict against an older value) and its
// longest writer (a late writer overlapping the long one is still found).
TEST(EngineRecheckTest, EvictedKeysRecordKeepsWhatLateChecksNeed) {
  TestHistory t;
  t.Txn("W1", "a", 1, 10).W(kX, 1);
  t.Txn("W2", "b", 11, 20).W(kX, 2);
  t.Txn("W3", "c", 21, 30).W(kX, 3);
  t.Txn("U0", "d", 100, 900).W(kY, 5);  // a long writer
  t.Txn("R", "e", 15, 16).R(kX, 1);     // late: right, but W1 was dropped
  t.Txn("T", "f", 200, 300).W(kY, 6);   // late: overlaps U0
  const History h = t.Build();
  const std::vector<std::string> expected = ChronosSi(h);
  ASSERT_EQ(expected.size(), 1u);  // NoConflict U0, T

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  e.Deliver({"W1", "W2", "W3", "U0"}, 900);
  for (int64_t w = 1000; w < 1200; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().resident_keys, 0u);
  ASSERT_EQ(e.stats().spilled_versions, 2u) << "W1 and W2 were dropped, not spilled";
  e.Deliver({"R", "T"}, 1300);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), UnorderedElementsAreArray(expected));
  EXPECT_EQ(e.stats().restored_keys, 2u);
  EXPECT_EQ(e.stats().horizon_misses, 1u);  // R
  EXPECT_EQ(e.stats().spill_errors, 0u);
}

// A key only ever read holds nothing a fresh state would not once its reads are final: under a
// memory budget its state leaves memory and is made again at its next read. Without one it stays.
TEST(EngineRecheckTest, KeysOnlyReadLeaveMemoryUnderABudget) {
  constexpr int kKeys = 50;
  TestHistory t;
  t.DefaultInitial(0);
  for (int k = 0; k < kKeys; ++k) {
    t.Txn(fmt::format("R{}", k), "r", 10 + 2 * k, 11 + 2 * k).R(k, k == 7 ? 1 : 0);
  }
  t.Txn("Rb", "r", 2000, 2001).R(7, 2);  // key 7 again, wrong again
  const History h = t.Build();
  const std::vector<std::string> expected = ChronosSi(h);
  ASSERT_EQ(expected.size(), 2u);

  for (uint64_t budget : {0, 1}) {
    SCOPED_TRACE(budget);
    MemoryVersionSpill spill;
    Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
              budget);
    for (int k = 0; k < kKeys; ++k) e.Deliver({fmt::format("R{}", k)});
    EXPECT_EQ(e.stats().resident_keys, static_cast<uint64_t>(kKeys));
    for (int64_t w = 200; w < 300; ++w) e.Deliver({}, w);
    EXPECT_EQ(e.stats().resident_keys, budget > 0 ? 0u : static_cast<uint64_t>(kKeys));
    EXPECT_THAT(e.Take(), ElementsAre(expected[0]));
    e.Deliver({"Rb"});
    EXPECT_EQ(e.stats().resident_keys, budget > 0 ? 1u : static_cast<uint64_t>(kKeys));
    e.engine().Finish();
    EXPECT_THAT(e.Take(), ElementsAre(expected[1]));
    EXPECT_EQ(e.stats().evicted_keys, 0u) << "nothing was written: nothing to evict";
  }
}

// Eviction backs off when evicted keys come back soon: a key read again shortly after it was
// evicted costs a lookup in the spill each time, so keys must stay idle longer before they are
// evicted (up to 65,536 advances). Keys written once and never read again take the wait down
// below 64 advances.
TEST(EngineRecheckTest, EvictionWaitsLongerWhenEvictedKeysComeBackSoon) {
  constexpr int kCold = 300;
  constexpr int kHot = 8;
  constexpr int kReads = 800;
  TestHistory t;
  for (int k = 0; k < kCold; ++k) {
    t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
  }
  // Key i % kHot read at advance i: each hot key every kHot advances.
  for (int i = 0; i < kReads; ++i) {
    t.Txn(fmt::format("R{}", i), "r", 10000 + 10 * i, 10001 + 10 * i).R(i % kHot, i % kHot);
  }
  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  for (int k = 0; k < kCold; ++k) e.Deliver({fmt::format("W{}", k)}, 11 + 2 * k);
  for (int64_t w = 1000; w < 1200; ++w) e.Deliver({}, w);
  EXPECT_GT(e.stats().evicted_keys, 200u);
  EXPECT_LT(e.stats().eviction_idle_advances, 64u);
  uint64_t restored_late = 0;
  for (int i = 0; i < kReads; ++i) {
    if (i == kReads - 200) restored_late = e.stats().restored_keys;
    e.Deliver({fmt::format("R{}", i)}, 10001 + 10 * i);
  }
  // The wait grew past the time a hot key stays away, and the hot keys stopped leaving.
  EXPECT_GE(e.stats().eviction_idle_advances, static_cast<uint64_t>(kHot));
  EXPECT_LE(e.stats().restored_keys - restored_late, 1u);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());  // every read saw its key's spilled version
  EXPECT_EQ(e.stats().horizon_misses, 0u);
}

// Keys that stay away long after their eviction (a new key written at every advance, some read
// back 300 advances later) take the wait down to a single advance: each stays in memory for a
// few advances instead of 64, and the reads still see the spilled versions.
TEST(EngineRecheckTest, KeysThatStayAwayLeaveMemorySoon) {
  constexpr int kKeys = 2000;
  TestHistory t;
  for (int k = 0; k < kKeys; ++k) {
    t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
    const int back = std::max(0, k - 300);
    if (k % 8 == 7) t.Txn(fmt::format("R{}", k), "r", 12 + 2 * k, 12 + 2 * k).R(back, back);
  }
  auto run = [&t](uint64_t budget, uint64_t* resident_at_most) {
    MemoryVersionSpill spill;
    Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
              budget);
    *resident_at_most = 0;
    for (int k = 0; k < kKeys; ++k) {
      e.Deliver({fmt::format("W{}", k)});
      if (k % 8 == 7) e.Deliver({fmt::format("R{}", k)});
      e.Deliver({}, 12 + 2 * k);
      if (k > kKeys / 2) *resident_at_most = std::max(*resident_at_most, e.stats().resident_keys);
    }
    e.engine().Finish();
    EXPECT_THAT(e.Take(), IsEmpty());
    EXPECT_EQ(e.stats().horizon_misses, 0u);
    return e.stats().eviction_idle_advances;
  };
  uint64_t bounded = 0;
  EXPECT_EQ(run(/*budget=*/1, &bounded), 1u);
  EXPECT_LT(bounded, 16u);
  // Without a budget every key stays.
  uint64_t unbounded = 0;
  EXPECT_EQ(run(/*budget=*/0, &unbounded), 0u);
  EXPECT_GT(unbounded, 64u);
}

// Keys in memory together, then evicted, give back the memory their states took: the key
// table's array of states shrinks once at most a quarter of it is in use.
// One transaction W<k> per key k, writing it.
TestHistory OneWriterPerKey(int keys) {
  TestHistory t;
  for (int k = 0; k < keys; ++k) t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
  return t;
}

// An engine with a one-byte budget over an in-memory spill, given every writer of
// OneWriterPerKey(keys) in one batch, without a watermark: every key is in memory at once, none
// final.
struct AllWritersInMemory {
  explicit AllWritersInMemory(int keys)
      : e(OneWriterPerKey(keys), IsolationLevel::kSnapshotIsolation, 5000, 0, &spill,
          /*spill_collected=*/false, /*memory_budget=*/1) {
    std::vector<TxnId> all;
    for (int k = 0; k < keys; ++k) all.push_back(e.h().FindTxn(fmt::format("W{}", k)));
    e.engine().Deliver(e.stream(), all, std::nullopt);
  }
  MemoryVersionSpill spill;
  Harness e;
};

TEST(EngineRecheckTest, KeyStatesGiveTheirMemoryBackOnceEvicted) {
  constexpr int kKeys = 5000;
  AllWritersInMemory run(kKeys);
  Harness& e = run.e;
  const uint64_t together = e.stats().memory_bytes;
  EXPECT_EQ(e.stats().resident_keys, static_cast<uint64_t>(kKeys));
  for (int64_t w = 20000; w < 20300; ++w) e.Deliver({}, w);
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  EXPECT_LT(e.stats().memory_bytes * 4, together)
      << e.stats().memory_bytes << " bytes held after eviction, " << together << " before";
}

// A burst of idle keys (all final at once, far over the budget) leaves memory over several
// advances, at most 16384 keys each, so that no single write to the spill holds the engine long.
TEST(EngineRecheckTest, EvictionsAreSpreadOverAdvances) {
  constexpr int kKeys = 40000;
  AllWritersInMemory run(kKeys);
  Harness& e = run.e;
  std::vector<uint64_t> per_advance;
  uint64_t before = 0;
  for (int64_t w = 200000; w < 200300; ++w) {
    e.Deliver({}, w);
    if (e.stats().evicted_keys != before) per_advance.push_back(e.stats().evicted_keys - before);
    before = e.stats().evicted_keys;
  }
  EXPECT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_THAT(per_advance, ElementsAre(16384u, 16384u, kKeys - 2 * 16384u));
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// A spill whose reads fail once told to (the writes still go through).
class FailingReadsSpill final : public VersionSpill {
 public:
  void Put(std::string_view key, const SpilledVersion& v) override { inner_.Put(key, v); }
  void Replace(std::string_view key, const SpilledVersion& v) override { inner_.Replace(key, v); }
  absl::Status Flush() override { return inner_.Flush(); }
  absl::StatusOr<std::optional<SpilledVersion>> NewestBefore(
      std::string_view key, const internal::OrderKey& point) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.NewestBefore(key, point);
  }
  absl::StatusOr<std::optional<SpilledVersion>> Find(std::string_view key,
                                                     const internal::OrderKey& at) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.Find(key, at);
  }
  absl::Status ScanAfter(std::string_view key, const internal::OrderKey& after,
                         absl::FunctionRef<bool(const SpilledVersion&)> fn) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.ScanAfter(key, after, fn);
  }
  void PruneUpTo(Timestamp point) override { inner_.PruneUpTo(point); }
  absl::Status Compact() override { return inner_.Compact(); }
  void PutKey(std::string_view key, const SpilledKey& record) override {
    inner_.PutKey(key, record);
  }
  absl::StatusOr<std::optional<SpilledKey>> FindKey(std::string_view key) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.FindKey(key);
  }
  uint64_t versions() const override { return inner_.versions(); }
  uint64_t bytes() const override { return inner_.bytes(); }
  uint64_t pruned() const override { return inner_.pruned(); }
  void Fail() { fail_ = true; }

 private:
  MemoryVersionSpill inner_;
  bool fail_ = false;
};

// A read of an evicted key that the spill cannot answer goes unjudged and counted, never a
// verdict made up without its base.
TEST(EngineRecheckTest, EvictedKeyWhoseSpillFailsIsAHorizonMiss) {
  TestHistory t;
  t.Txn("W1", "a", 10, 20).W(kX, 1);
  t.Txn("R1", "b", 200, 201).R(kX, 5);  // wrong, but its base cannot be read
  FailingReadsSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  e.Deliver({"W1"}, 21);
  for (int64_t w = 22; w < 100; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().evicted_keys, 1u);
  spill.Fail();
  e.Deliver({"R1"}, 150);  // pending: above the final point
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().horizon_misses, 1u);
  EXPECT_GE(e.stats().spill_errors, 1u);
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
