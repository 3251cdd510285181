// SPDX-License-Identifier: Apache-2.0
// adya on histories without timestamps: version orders inferred from the reads (lists from their
// longest read, registers from what their writers read), the reads no order explains, and what it
// cannot decide (docs/checkers/adya.md, "Histories without timestamps").
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/history/without_timestamps.h"
#include "isowatch/sim/simulator.h"

#include "tests/testing/test_history.h"
#include "tests/unit/checkers/adya/summary.h"

namespace isowatch::checkers::adya {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::TestHistory;
using verdict::IsolationLevel;

AdyaResult Check(const history::History& h, std::vector<IsolationLevel> levels) {
  return CheckAdya(h, {.levels = std::move(levels)});
}

const std::vector<IsolationLevel> kSer = {IsolationLevel::kSerializable};
const std::vector<IsolationLevel> kAll = AdyaOptions{}.levels;

TEST(AdyaBlackBoxTest, ListOrderComesFromTheLongestRead) {
  TestHistory t;
  t.Untimed("1", "a").A(1, 10);
  t.Untimed("2", "b").L(1, {10}).A(1, 20);
  t.Untimed("3", "c").L(1, {10, 20});
  t.Untimed("4", "a").L(1, {});
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations), IsEmpty());
  EXPECT_TRUE(r.complete) << r.undecided;
  EXPECT_EQ(r.stats.inferred_keys, 1u);
  EXPECT_EQ(r.stats.versions, 2u);
  EXPECT_EQ(r.stats.ww_edges, 1u);  // 1 -> 2
  EXPECT_EQ(r.stats.wr_edges, 2u);  // 1 -> 2, 2 -> 3
  EXPECT_EQ(r.stats.rw_edges, 1u);  // 4 read [], and 1 appended next
  EXPECT_EQ(r.stats.unobserved_appends, 0u);
}

TEST(AdyaBlackBoxTest, ReadsThatAreNoPrefixOfTheLongestAreIncompatible) {
  TestHistory t;
  t.Untimed("1", "a").A(1, 10);
  t.Untimed("2", "b").A(1, 20);
  t.Untimed("3", "c").L(1, {10, 20});
  t.Untimed("4", "d").L(1, {20, 10});
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations),
              ElementsAre("incompatible-order [rc,rr,si,ser] 4,3 k=1"));
  EXPECT_THAT(r.violations[0].explanation,
              HasSubstr("read [20, 10] from key 1, which is no prefix of T3's read [10, 20] from "
                        "key 1"));
  EXPECT_EQ(r.violations[0].expected, "[10, 20]");
}

TEST(AdyaBlackBoxTest, DuplicateAndThinAirElementsAreNamed) {
  TestHistory t;
  t.Untimed("1", "a").A(1, 10);
  t.Untimed("2", "b").L(1, {10, 10});
  t.Untimed("3", "c").L(1, {10, 99});
  t.Untimed("4", "d").R(2, 7);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations),
              ElementsAre("duplicate-elements [rc,rr,si,ser] 2 k=1",
                          "thin-air [rc,rr,si,ser] 3 k=1", "thin-air [rc,rr,si,ser] 4 k=2"));
  EXPECT_THAT(r.violations[2].explanation, HasSubstr("give --initial-value 7"));
}

TEST(AdyaBlackBoxTest, CircularInformationFlowWithoutTimestamps) {
  TestHistory t;
  t.Untimed("1", "a").A(1, 10).L(2, {20});
  t.Untimed("2", "b").A(2, 20).L(1, {10});
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations), ElementsAre("G1c [rc,rr,si,ser] 1,2 k=1"));
  EXPECT_TRUE(r.complete);
}

TEST(AdyaBlackBoxTest, ReadSkewIsGSingle) {
  TestHistory t;
  t.Untimed("1", "a").A(1, 10).A(2, 20);
  t.Untimed("2", "b").L(1, {}).L(2, {20});
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations), ElementsAre("G-single [rr,si,ser] 2,1 k=1"));
}

// Write skew: each transaction read the other's key empty. With a later read that shows both
// appends the order is observed; without one, each append is still after the empty list.
TEST(AdyaBlackBoxTest, WriteSkewIsSerializableViolationAndUndecidedForSnapshotIsolation) {
  for (bool observed : {true, false}) {
    TestHistory t;
    t.Untimed("1", "a").L(1, {}).A(2, 20);
    t.Untimed("2", "b").L(2, {}).A(1, 10);
    if (observed) t.Untimed("3", "c").L(1, {10}).L(2, {20});
    history::History h = t.Build();
    AdyaResult ser = Check(h, kSer);
    EXPECT_THAT(SummarizeAll(h, ser.violations), ElementsAre("G2-item [ser] 1,2 k=1")) << observed;
    EXPECT_TRUE(ser.complete) << ser.undecided;
    EXPECT_EQ(ser.stats.unobserved_appends, observed ? 0u : 2u);
    // SI allows write skew, and no start timestamps say whether these two overlapped.
    AdyaResult si = Check(h, {IsolationLevel::kSnapshotIsolation});
    EXPECT_THAT(si.violations, IsEmpty());
    EXPECT_FALSE(si.complete);
    EXPECT_THAT(si.undecided, HasSubstr("snapshot isolation allows some anti-dependency cycles"));
  }
}

TEST(AdyaBlackBoxTest, WriteSkewNearMissIsValid) {
  TestHistory t;
  t.Untimed("1", "a").L(1, {}).A(2, 20);
  t.Untimed("2", "b").L(2, {20}).A(1, 10);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(r.violations, IsEmpty());
  EXPECT_TRUE(r.complete) << r.undecided;
}

TEST(AdyaBlackBoxTest, RegisterOrderFromWhatWritersRead) {
  TestHistory t;
  t.Untimed("1", "a").W(1, 10);
  t.Untimed("2", "b").R(1, 10).W(1, 11);
  t.Untimed("3", "c").R(1, 11).W(1, 12);
  t.Untimed("4", "d").R(1, 11);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(r.violations, IsEmpty());
  EXPECT_TRUE(r.complete) << r.undecided;
  EXPECT_EQ(r.stats.versions, 3u);
  EXPECT_EQ(r.stats.undetermined_keys, 0u);
  EXPECT_EQ(r.stats.rw_edges, 1u);  // 4 read 11, which 3 overwrote
}

TEST(AdyaBlackBoxTest, BlindWritesLeaveTheOrderUndecided) {
  TestHistory t;
  t.Untimed("1", "a").W(1, 10);
  t.Untimed("2", "b").W(1, 11);
  t.Untimed("3", "c").R(1, 11);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(r.violations, IsEmpty());
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.stats.undetermined_keys, 1u);
  EXPECT_THAT(r.undecided, HasSubstr("the version order of 1 register key (written by 2 "
                                     "transactions without commit timestamps)"));
  EXPECT_EQ(r.unordered_writers.size(), 2u);
}

// Read skew through an undetermined key: 2 saw 1's write of key 2 but the initial value of key 1,
// which every writer of key 1 overwrote, 1 among them.
TEST(AdyaBlackBoxTest, InitialReadersPrecedeEveryWriterOfAnUndeterminedKey) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Untimed("100", "0").W(1, 10).W(2, 20);
  t.Untimed("200", "1").R(1, 0).R(2, 20).W(1, 11);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations), ElementsAre("G-single [rr,si,ser] 200,100 k=1"));
  EXPECT_EQ(r.stats.undetermined_keys, 1u);
  EXPECT_FALSE(r.complete);
}

// Two writers that read one version and both overwrote it: G-single in every version order.
TEST(AdyaBlackBoxTest, LostUpdateIsFoundThoughTheOrderIsUndecided) {
  TestHistory t;
  t.Untimed("0", "z").W(1, 10);
  t.Untimed("1", "a").R(1, 10).W(1, 11);
  t.Untimed("2", "b").R(1, 10).W(1, 12);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  ASSERT_THAT(SummarizeAll(h, r.violations), ElementsAre("G-single [rr,si,ser] 2,1 k=1"));
  EXPECT_THAT(r.violations[0].explanation,
              HasSubstr("T1 and T2 both read 10 from key 1 (the version T0 installed) and both "
                        "overwrote it, with 11 and 12"));
  EXPECT_FALSE(r.complete);
  // Near miss: the second read the first's version.
  TestHistory ok;
  ok.Untimed("0", "z").W(1, 10);
  ok.Untimed("1", "a").R(1, 10).W(1, 11);
  ok.Untimed("2", "b").R(1, 11).W(1, 12);
  history::History g = ok.Build();
  AdyaResult fine = Check(g, kAll);
  EXPECT_THAT(fine.violations, IsEmpty());
  EXPECT_TRUE(fine.complete) << fine.undecided;
}

// Both appenders read the empty list and no read shows their order: a lost update whichever
// came first (G-single), not two anti-dependencies.
TEST(AdyaBlackBoxTest, UnobservedListLostUpdateIsGSingle) {
  TestHistory t;
  t.Untimed("1", "a").L(1, {}).A(1, 10);
  t.Untimed("2", "b").L(1, {}).A(1, 20);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations), ElementsAre("G-single [rr,si,ser] 2,1 k=1"));
}

// Each read the other's write before overwriting it: circular information flow (G1c), and no
// write cycle, which one key's versions cannot form.
TEST(AdyaBlackBoxTest, ReadsBeforeWritesInACircleAreG1cNotG0) {
  TestHistory t;
  t.Untimed("1", "a").R(1, 2).W(1, 1);
  t.Untimed("2", "b").R(1, 1).W(1, 2);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations), ElementsAre("G1c [rc,rr,si,ser] 1,2 k=1"));
}

// A cycle of read dependencies needs no version order: found on undetermined keys too.
TEST(AdyaBlackBoxTest, CyclesOfReadsStandWhenTheOrderIsUndecided) {
  TestHistory t;
  t.Untimed("0", "z").W(3, 1);
  t.Untimed("00", "z").W(3, 2);
  t.Untimed("1", "a").W(1, 10).R(2, 20);
  t.Untimed("2", "b").W(2, 20).R(1, 10);
  history::History h = t.Build();
  AdyaResult r = Check(h, kAll);
  EXPECT_THAT(SummarizeAll(h, r.violations), ElementsAre("G1c [rc,rr,si,ser] 1,2 k=1"));
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.undecided.empty());
}

// Ground truth: a serializable simulator run, its timestamps removed, is acyclic for the lists
// (whose order the reads give); and stripping timestamps never invents a violation that the
// timestamped history does not have at serializable.
TEST(AdyaBlackBoxTest, SimulatorHistoriesWithoutTimestamps) {
  for (history::DataModel data : {history::DataModel::kList, history::DataModel::kKeyValue}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      sim::WorkloadOptions o;
      o.seed = seed;
      o.txns = 1500;
      o.sessions = 10;
      o.keys = 40;
      o.level = IsolationLevel::kSerializable;
      o.data = data;
      if (data == history::DataModel::kList) o.max_appends_per_key = 32;
      auto sim = sim::Simulate(o);
      ASSERT_TRUE(sim.ok()) << sim.status();
      absl::StatusOr<history::History> stripped = history::WithoutTimestamps(sim->history);
      ASSERT_TRUE(stripped.ok()) << stripped.status();
      const history::History& bare = *stripped;
      ASSERT_FALSE(bare.has_commit_timestamps());
      AdyaResult r = Check(bare, kSer);
      EXPECT_THAT(SummarizeAll(bare, r.violations), IsEmpty()) << "seed " << seed;
      EXPECT_GT(r.stats.inferred_keys, 0u);
      if (data == history::DataModel::kList) {
        EXPECT_TRUE(r.complete) << r.undecided;
        EXPECT_GT(r.stats.rw_edges, 0u);
      }
    }
  }
}

// Planted faults stay visible without timestamps: aborted and intermediate reads, and a lost
// update in a list (both appenders read the same list).
TEST(AdyaBlackBoxTest, PlantedFaultsAreFoundWithoutTimestamps) {
  struct Case {
    sim::Fault fault;
    history::DataModel data;
    verdict::Anomaly expected;
  };
  for (const Case& c :
       {Case{sim::Fault::kAbortedRead, history::DataModel::kList, verdict::Anomaly::kG1a},
        Case{sim::Fault::kAbortedRead, history::DataModel::kKeyValue, verdict::Anomaly::kG1a},
        Case{sim::Fault::kIntermediateRead, history::DataModel::kKeyValue, verdict::Anomaly::kG1b},
        Case{sim::Fault::kLostUpdate, history::DataModel::kList, verdict::Anomaly::kGSingle}}) {
    int found = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      sim::WorkloadOptions o;
      o.seed = seed;
      o.txns = 1500;
      o.sessions = 10;
      o.keys = 40;
      o.level = IsolationLevel::kSerializable;
      o.data = c.data;
      if (c.data == history::DataModel::kList) o.max_appends_per_key = 32;
      o.faults = {{.fault = c.fault, .rate = 0.05}};
      auto sim = sim::Simulate(o);
      ASSERT_TRUE(sim.ok()) << sim.status();
      absl::StatusOr<history::History> stripped = history::WithoutTimestamps(sim->history);
      ASSERT_TRUE(stripped.ok()) << stripped.status();
      const history::History& bare = *stripped;
      for (const verdict::Violation& v : Check(bare, kSer).violations) {
        found += v.anomaly == c.expected ? 1 : 0;
      }
    }
    EXPECT_GT(found, 0) << sim::FaultName(c.fault) << " " << verdict::AnomalyName(c.expected);
  }
}

}  // namespace
}  // namespace isowatch::checkers::adya
