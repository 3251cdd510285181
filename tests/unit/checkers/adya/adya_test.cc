// SPDX-License-Identifier: Apache-2.0
// CheckAdya on small histories: the explanations, the levels judged, the counts, and what the
// checker cannot use.
#include "isowatch/checkers/adya/adya.h"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/native.h"
#include "isowatch/report/check_report.h"

#include "tests/testing/test_history.h"
#include "tests/unit/checkers/adya/summary.h"

namespace isowatch::checkers::adya {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::TestHistory;
using ::testing::UnorderedElementsAre;
using verdict::IsolationLevel;

history::History LostUpdate() {
  TestHistory t;
  t.Txn("0", "a", 0, 1).W(1, 10);
  t.Txn("1", "b", 2, 4).R(1, 10).W(1, 11);
  t.Txn("2", "c", 3, 5).R(1, 10).W(1, 12);
  return t.Build();
}

history::History WriteSkew() {
  TestHistory t;
  t.Txn("0", "a", 0, 1).W(1, 10).W(2, 20);
  t.Txn("1", "b", 2, 4).R(1, 10).R(2, 20).W(1, 11);
  t.Txn("2", "c", 3, 5).R(1, 10).R(2, 20).W(2, 21);
  return t.Build();
}

history::History Native(std::string_view jsonl) {
  auto h = formats::ReadNativeString(jsonl, {}, "test");
  if (!h.ok()) std::abort();
  return *std::move(h);
}

TEST(AdyaTest, LostUpdateIsExplainedEdgeByEdge) {
  history::History h = LostUpdate();
  AdyaResult r = CheckAdya(h);
  ASSERT_THAT(SummarizeAll(h, r.violations),
              UnorderedElementsAre("G-SIa [si] 2,1 k=1", "G-single [rr,si,ser] 2,1 k=1"));
  for (const verdict::Violation& v : r.violations) {
    if (v.anomaly == verdict::Anomaly::kGSingle) {
      EXPECT_EQ(v.level, IsolationLevel::kRepeatableRead);
      EXPECT_EQ(v.explanation,
                "G-single (single anti-dependency cycle): T2 read 10 from key 1 and T1 overwrote "
                "that version with 11 (rw); T1 wrote 11 to key 1 and T2 overwrote it with 12 "
                "(ww): T2 -> T1 -> T2. Here T2 missed T1's write (the one anti-dependency), yet "
                "depends on T1 through the rest of the cycle. Violates repeatable read, snapshot "
                "isolation and serializable.");
    } else {
      EXPECT_EQ(v.explanation,
                "G-SIa (interference): T1 wrote 11 to key 1 and T2 overwrote it with 12 (ww), "
                "but T1 committed at 4, after T2 started at 3: T2 overwrote a version from "
                "outside its snapshot. Violates snapshot isolation.");
    }
  }
}

TEST(AdyaTest, CountsNodesEdgesAndComponents) {
  history::History h = LostUpdate();
  AdyaResult r = CheckAdya(h);
  EXPECT_EQ(r.stats.nodes, 3u);
  EXPECT_EQ(r.stats.versions, 3u);
  EXPECT_EQ(r.stats.ww_edges, 2u);  // 0 -> 1 -> 2
  EXPECT_EQ(r.stats.wr_edges, 2u);  // 0 -> 1, 0 -> 2
  EXPECT_EQ(r.stats.rw_edges, 1u);  // 2 -> 1 (1 -> 1 is dropped)
  EXPECT_EQ(r.stats.sccs, 1u);
  EXPECT_EQ(r.stats.largest_scc, 2u);
  EXPECT_EQ(r.stats.truncated_searches, 0u);
}

TEST(AdyaTest, JsonNamesEveryLevelBroken) {
  history::History lost = LostUpdate();
  const AdyaResult r = CheckAdya(lost);
  ASSERT_FALSE(r.violations.empty());
  for (const verdict::Violation& v : r.violations) {
    const std::string json = report::ViolationToJson(lost, v);
    std::string levels = "\"levels\":[";
    for (size_t i = 0; i < v.levels.size(); ++i) {
      levels += fmt::format("{}\"{}\"", i > 0 ? "," : "", verdict::IsolationLevelName(v.levels[i]));
    }
    EXPECT_THAT(json, HasSubstr(levels + "]"));
    EXPECT_FALSE(v.levels.empty()) << json;
  }
}

TEST(AdyaTest, JudgesOnlyTheLevelsAsked) {
  history::History skew = WriteSkew();
  EXPECT_THAT(CheckAdya(skew, {.levels = {IsolationLevel::kSnapshotIsolation}}).violations,
              IsEmpty());
  EXPECT_THAT(
      SummarizeAll(skew, CheckAdya(skew, {.levels = {IsolationLevel::kSerializable}}).violations),
      ElementsAre("G2-item [ser] 1,2 k=2"));
  EXPECT_THAT(CheckAdya(skew, {.levels = {IsolationLevel::kReadCommitted}}).violations, IsEmpty());

  history::History lost = LostUpdate();
  EXPECT_THAT(
      SummarizeAll(lost, CheckAdya(lost, {.levels = {IsolationLevel::kSerializable}}).violations),
      ElementsAre("G-single [ser] 2,1 k=1"));
}

TEST(AdyaTest, WriteSkewNamesItsTwoAntiDependencies) {
  history::History h = WriteSkew();
  AdyaResult r = CheckAdya(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].explanation,
            "G2-item (anti-dependency cycle): T1 read 20 from key 2 and T2 overwrote that version "
            "with 21 (rw); T2 read 10 from key 1 and T1 overwrote that version with 11 (rw): T1 "
            "-> T2 -> T1. Here 2 anti-dependencies: each of those readers missed a write of a "
            "transaction that, through the cycle, must come before it; no serial order exists. "
            "Violates repeatable read and serializable.");
  EXPECT_THAT(r.violations[0].txns, ElementsAre(TxnId(1), TxnId(2)));
}

TEST(AdyaTest, StaleReadIsAMissedEffectWithItsStartDependency) {
  TestHistory t;
  t.Txn("1", "a", 1, 2).W(1, 10);
  t.Txn("2", "b", 3, 4).R(1, std::nullopt);
  history::History h = t.Build();
  AdyaResult r = CheckAdya(h);
  ASSERT_THAT(SummarizeAll(h, r.violations), ElementsAre("G-SIb [si] 2,1 k=1"));
  EXPECT_EQ(r.violations[0].explanation,
            "G-SIb (missed effects): T2 read null from key 1 and T1 overwrote that version with "
            "10 (rw); T1 committed at 2, no later than T2 started at 3 (start): T2 -> T1 -> T2. "
            "T2's snapshot should have held T1's write. Violates snapshot isolation.");
}

TEST(AdyaTest, AbortedAndIntermediateReadsNameTheWriter) {
  TestHistory t;
  t.Txn("1", "a", 1, 2, history::TxnStatus::kAborted).W(1, 10);
  t.Txn("2", "b", 1, 3).W(2, 20).W(2, 21);
  t.Txn("3", "c", 4, 5).R(1, 10).R(2, 20).R(1, 10);
  history::History h = t.Build();
  AdyaResult r = CheckAdya(h);
  ASSERT_THAT(SummarizeAll(h, r.violations),
              ElementsAre("G1a [rc,rr,si,ser] 3,1 k=1", "G1b [rc,rr,si,ser] 3,2 k=2"));
  EXPECT_EQ(r.violations[0].explanation,
            "G1a (aborted read): T3 read 10 from key 1, which only T1 wrote, and T1 aborted. "
            "Violates read committed, repeatable read, snapshot isolation and serializable.");
  EXPECT_EQ(r.violations[0].observed, "10");
  EXPECT_THAT(r.violations[1].explanation,
              HasSubstr("T3 read 20 from key 2, which T2 wrote and then overwrote with 21 before "
                        "committing"));
}

TEST(AdyaTest, ListReadsNameTheVersionOfTheirLastElement) {
  TestHistory t;
  t.Txn("1", "a", 1, 2).A(5, 1).A(5, 2);
  t.Txn("2", "b", 3, 6).L(5, {1, 2}).A(5, 3).L(5, {1, 2, 3});  // own append at the end
  t.Txn("3", "c", 4, 5).L(5, {1, 2}).A(5, 4);                  // concurrent with 2
  history::History h = t.Build();
  AdyaResult r = CheckAdya(h);
  // Versions in commit order: 1 [1, 2], 3 [1, 2, 4], 2 [1, 2, 4, 3]. Both reads of 2 name 1's
  // version (the second once 2's own append is set aside), which 3 overwrote: rw 2 -> 3 twice;
  // 3's read names the same version, overwritten by 3 itself (no edge). With ww 3 -> 2, the two
  // concurrent appends form a lost update.
  EXPECT_EQ(r.stats.rw_edges, 2u);
  EXPECT_EQ(r.stats.ww_edges, 2u);
  EXPECT_EQ(r.stats.wr_edges, 3u);
  EXPECT_EQ(r.stats.incompatible_reads, 0u);
  EXPECT_THAT(SummarizeAll(h, r.violations),
              UnorderedElementsAre("G-single [rr,si,ser] 2,3 k=5", "G-SIa [si] 2,3 k=5"));
  for (const verdict::Violation& v : r.violations) {
    if (v.anomaly == verdict::Anomaly::kGSingle) {
      EXPECT_THAT(v.explanation,
                  HasSubstr("T2 read [1, 2] from key 5 and T3 installed the next version, "
                            "appending 4 (rw); T3 appended 4 to key 5 and T2 appended 3 after it "
                            "(ww): T2 -> T3 -> T2."));
    }
  }
}

TEST(AdyaTest, ListReadThatIsNoVersionIsIncompatibleOrder) {
  TestHistory t;
  t.Txn("1", "a", 1, 2).A(5, 1);
  t.Txn("2", "b", 3, 4).A(5, 2);
  t.Txn("3", "c", 5, 6).L(5, {2});  // saw 2's append without 1's
  history::History h = t.Build();
  AdyaResult r = CheckAdya(h);
  EXPECT_EQ(r.stats.incompatible_reads, 1u);
  EXPECT_EQ(r.stats.wr_edges, 1u);  // the information flow from 2 is still an edge
  ASSERT_THAT(SummarizeAll(h, r.violations),
              ElementsAre("incompatible-order [rc,rr,si,ser] 3,2 k=5"));
  EXPECT_EQ(r.violations[0].expected, "[1, 2]");
  EXPECT_THAT(r.violations[0].explanation,
              HasSubstr("T3 read [2] from key 5, which ends with T2's append of 2, but the list "
                        "as of that append, in commit order, is [1, 2]"));
}

TEST(AdyaTest, CountsWhatItCannotUseAndNamesThinAirReads) {
  TestHistory t;
  t.Txn("1", "a", 1, 2).W(1, 5);
  t.Txn("2", "b", 3, 4).W(1, 5);   // a duplicate (key, value)
  t.Txn("3", "c", 5, 6).R(2, 42);  // never written: thin air
  t.Txn("4", "d", 5, 6, history::TxnStatus::kUnknown).W(3, 7);
  t.Txn("5", "e", 7, 8).R(3, 7);  // written only by a transaction of unknown outcome
  history::History h = t.Build();
  AdyaResult r = CheckAdya(h);
  EXPECT_EQ(r.stats.duplicate_writes, 1u);
  EXPECT_EQ(r.stats.garbage_reads, 1u);
  EXPECT_EQ(r.stats.unknown_reads, 1u);
  EXPECT_EQ(r.stats.nodes, 4u);
  ASSERT_THAT(SummarizeAll(h, r.violations), ElementsAre("thin-air [rc,rr,si,ser] 3 k=2"));
  EXPECT_THAT(r.violations[0].explanation,
              HasSubstr("T3 read 42 from key 2, a value no transaction wrote and the key did not "
                        "hold before (if every key held 42 before the history, give "
                        "--initial-value 42)"));
}

TEST(AdyaTest, EqualCommitTimestampsAreOrderedByInputOrder) {
  TestHistory t;
  t.Txn("1", "a", 1, 5).W(1, 10);
  t.Txn("2", "b", 1, 5).W(1, 20);
  t.Txn("3", "c", 6, 7).R(1, 10);  // read the older version: 3 -> 2 (rw)
  history::History h = t.Build();
  AdyaResult r = CheckAdya(h);
  EXPECT_EQ(r.stats.commit_ties, 1u);
  EXPECT_EQ(r.stats.ww_edges, 1u);
  // 3 started after both committed but read 1's version, overwritten by 2: a missed effect.
  EXPECT_THAT(SummarizeAll(h, r.violations),
              UnorderedElementsAre("G-SIa [si] 2,1 k=1", "G-SIb [si] 3,2 k=1"));
}

TEST(AdyaTest, WritersWithoutCommitTimestampsAreUnordered) {
  history::History h = Native(
      R"({"txn": {"id_int": 1, "start": {"physical": 1}, "commit": {"physical": 2}, "ops": [{"kind": "WRITE", "key": {"int": 1}, "value": {"int": 10}}]}}
{"txn": {"id_int": 2, "start": {"physical": 1}, "ops": [{"kind": "WRITE", "key": {"int": 1}, "value": {"int": 20}}, {"kind": "READ", "key": {"int": 2}, "value": {"int": 30}}]}}
{"txn": {"id_int": 3, "start": {"physical": 3}, "commit": {"physical": 4}, "ops": [{"kind": "READ", "key": {"int": 1}, "value": {"int": 20}}, {"kind": "WRITE", "key": {"int": 2}, "value": {"int": 30}}]}}
)");
  AdyaResult r = CheckAdya(h);
  // Key 1's writers, 1 and 2, are blind writes and 2 has no commit timestamp: their order is
  // undetermined, and the result says so.
  EXPECT_THAT(r.unordered_writers, ElementsAre(TxnId(0), TxnId(1)));
  EXPECT_EQ(r.stats.unordered_writers, 2u);
  EXPECT_FALSE(r.complete);
  EXPECT_THAT(r.undecided, HasSubstr("the version order of 1 register key"));
  // 2 -> 3 (wr, key 1) and 3 -> 2 (wr, key 2): the cycle is found without 2's place in the
  // version order, but SI cannot be judged on the edges into and out of 2.
  // 2 read 3's write although 3 committed after 2 started: G-SIa.
  EXPECT_THAT(SummarizeAll(h, r.violations),
              UnorderedElementsAre("G1c [rc,rr,si,ser] 2,3 k=1", "G-SIa [si] 2,3 k=2"));
  EXPECT_EQ(r.stats.unjudged_si_edges, 1u);
}

TEST(AdyaTest, ACycleSearchOutOfStepsLeavesTheLevelUndecided) {
  // A ring of anti-dependencies: transaction i reads key i + 1 before transaction i + 1 writes
  // it, all concurrent. One component, whose only cycle is the whole ring.
  constexpr int kRing = 50;
  TestHistory t;
  for (int i = 0; i < kRing; ++i) {
    t.Txn(std::to_string(i), std::to_string(i), 0, 100 + i)
        .R((i + 1) % kRing, std::nullopt)
        .W(i, i);
  }
  const history::History h = t.Build();
  const AdyaResult full = CheckAdya(h, {.levels = {IsolationLevel::kSerializable}});
  ASSERT_EQ(full.violations.size(), 1U);
  EXPECT_EQ(full.violations[0].anomaly, verdict::Anomaly::kG2Item);
  EXPECT_EQ(full.violations[0].txns.size(), static_cast<size_t>(kRing));
  EXPECT_TRUE(full.complete);
  // A search that runs out of steps before it closes the ring has not shown that there is no
  // cycle: the component holds one. Serializability is undecided, never valid.
  const AdyaResult cut =
      CheckAdya(h, {.levels = {IsolationLevel::kSerializable}, .max_search_steps = 10});
  EXPECT_THAT(cut.violations, IsEmpty());
  EXPECT_GT(cut.stats.truncated_searches, 0U);
  EXPECT_FALSE(cut.complete);
  EXPECT_THAT(cut.undecided, HasSubstr("ran out of steps (max_search_steps 10) before finding a "
                                       "cycle of"));
  EXPECT_THAT(cut.undecided, HasSubstr("in components of up to 50 transactions"));
}

TEST(AdyaTest, SerialChainOfManyTransactionsIsAcyclic) {
  // Each transaction reads the previous one's write and writes the next value: one long path.
  constexpr int kN = 100'000;
  TestHistory t;
  for (int i = 0; i < kN; ++i) {
    t.Txn(std::to_string(i), "s", 2 * i, 2 * i + 1)
        .R(1, i == 0 ? std::optional<int64_t>() : std::optional<int64_t>(i))
        .W(1, i + 1);
  }
  history::History h = t.Build();
  AdyaResult r = CheckAdya(h);
  EXPECT_THAT(r.violations, IsEmpty());
  EXPECT_EQ(r.stats.nodes, static_cast<size_t>(kN));
  EXPECT_EQ(r.stats.ww_edges, static_cast<size_t>(kN - 1));
  EXPECT_EQ(r.stats.wr_edges, static_cast<size_t>(kN - 1));
  EXPECT_EQ(r.stats.sccs, 0u);
  EXPECT_EQ(r.stats.largest_scc, 1u);
}

}  // namespace
}  // namespace isowatch::checkers::adya
