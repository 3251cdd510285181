// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/chronos/chronos.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/test_history.h"

namespace isowatch::checkers {
namespace {

using history::TxnStatus;
using ::isowatch::testing::SummarizeAll;
using ::isowatch::testing::TestHistory;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using verdict::IsolationLevel;

constexpr int64_t kX = 0;
constexpr int64_t kY = 1;

std::vector<std::string> Check(const TestHistory& t, IsolationLevel level) {
  history::History h = t.Build();
  ChronosResult r = RunChronos(h, {.level = level});
  return SummarizeAll(h, r.violations);
}
std::vector<std::string> CheckSi(const TestHistory& t) {
  return Check(t, IsolationLevel::kSnapshotIsolation);
}
std::vector<std::string> CheckSer(const TestHistory& t) {
  return Check(t, IsolationLevel::kSerializable);
}

// Seed 000, Figure 1 (reconstructed): a valid SI history in which a concurrent writer is not
// visible to a reader that starts before it commits, and a later reader sees the newest version.
TEST(ChronosTest, Figure1ValidHistory) {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1);
  t.Txn("T2", "b", 3, 5).W(kX, 2);
  t.Txn("T3", "c", 4, 6).R(kX, 1);
  t.Txn("T4", "a", 7, 8).R(kX, 2);
  EXPECT_THAT(CheckSi(t), IsEmpty());
}

// Seed 000, Figure 2 / Example 4 (reconstructed): T3 and T4 write x concurrently; the conflict is
// reported once, on the first commit (7), not again on the second (9); T5 reads T4's write.
TEST(ChronosTest, Figure2NoConflictReportedOnce) {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1);
  t.Txn("T2", "b", 3, 4).R(kX, 1).W(kY, 1);
  t.Txn("T3", "c", 5, 9).W(kX, 3);
  t.Txn("T4", "d", 6, 7).R(kX, 1).W(kX, 4);
  t.Txn("T5", "e", 8, 10).R(kX, 4);
  EXPECT_THAT(CheckSi(t), ElementsAre("NOCONFLICT T4,T3 k=0"));
}

// Seed 000, Figure 11-style lost update: two transactions read the same version and both write.
TEST(ChronosTest, LostUpdateIsNoConflict) {
  TestHistory t;
  t.Txn("T0", "a", 1, 2).W(kX, 0);
  t.Txn("T1", "b", 3, 6).R(kX, 0).W(kX, 1);
  t.Txn("T2", "c", 4, 7).R(kX, 0).W(kX, 2);
  EXPECT_THAT(CheckSi(t), ElementsAre("NOCONFLICT T1,T2 k=0"));
  // Near miss: the second writer starts at the first one's commit, so it sees it.
  TestHistory ok;
  ok.Txn("T0", "a", 1, 2).W(kX, 0);
  ok.Txn("T1", "b", 3, 6).R(kX, 0).W(kX, 1);
  ok.Txn("T2", "c", 6, 7).R(kX, 1).W(kX, 2);
  EXPECT_THAT(CheckSi(ok), IsEmpty());
}

TEST(ChronosTest, NoConflictOncePerPairPerKey) {
  TestHistory t;
  t.Txn("T1", "a", 1, 5).W(kX, 1).W(kY, 1);
  t.Txn("T2", "b", 2, 6).W(kX, 2).W(kY, 2).W(kX, 3);
  t.Txn("T3", "c", 3, 5).W(kX, 4);  // commits at the same timestamp as T1
  EXPECT_THAT(CheckSi(t), UnorderedElementsAre("NOCONFLICT T1,T2 k=0", "NOCONFLICT T1,T3 k=0",
                                               "NOCONFLICT T1,T2 k=1", "NOCONFLICT T3,T2 k=0"));
  // SER does not judge write-write concurrency by itself.
  EXPECT_THAT(CheckSer(t), IsEmpty());
}

TEST(ChronosTest, SessionViolationAndNearMiss) {
  TestHistory t;
  t.Txn("T1", "s", 1, 5).W(kX, 1);
  t.Txn("T2", "s", 3, 6).R(kY, std::nullopt);
  EXPECT_THAT(CheckSi(t), ElementsAre("SESSION T2,T1"));
  TestHistory ok;
  ok.Txn("T1", "s", 1, 5).W(kX, 1);
  ok.Txn("T2", "s", 5, 6).R(kX, 1);  // starts exactly when its predecessor commits
  EXPECT_THAT(CheckSi(ok), IsEmpty());
}

TEST(ChronosTest, SessionSkipsAbortedPredecessors) {
  TestHistory t;
  t.Txn("T1", "s", 1, 5).W(kX, 1);
  t.Txn("T2", "s", 6, 7, TxnStatus::kAborted).W(kX, 9);
  t.Txn("T3", "s", 4, 8).R(kY, std::nullopt);
  EXPECT_THAT(CheckSi(t), ElementsAre("SESSION T3,T1"));
}

TEST(ChronosTest, SessionAtSerializableUsesCommitOrder) {
  TestHistory t;
  t.Txn("T1", "s", 1, 5).W(kX, 1);
  t.Txn("T2", "s", 2, 4).W(kY, 1);
  EXPECT_THAT(CheckSer(t), ElementsAre("SESSION T2,T1"));
}

TEST(ChronosTest, IntOncePerTransactionAndKey) {
  TestHistory t;
  t.Txn("T1", "a", 1, 2).W(kX, 1).R(kX, 2).R(kX, 3).R(kY, std::nullopt).R(kY, std::nullopt);
  EXPECT_THAT(CheckSi(t), ElementsAre("INT T1 k=0"));
  TestHistory ok;
  ok.Txn("T1", "a", 1, 2).W(kX, 1).R(kX, 1).W(kX, 2).R(kX, 2);
  EXPECT_THAT(CheckSi(ok), IsEmpty());
}

TEST(ChronosTest, NonRepeatableReadIsInt) {
  TestHistory t;
  t.Txn("T1", "a", 1, 5).R(kX, std::nullopt).R(kX, 7);
  t.Txn("T2", "b", 2, 3).W(kX, 7);
  EXPECT_THAT(CheckSi(t), ElementsAre("INT T1 k=0"));
}

TEST(ChronosTest, ExtKinds) {
  TestHistory t;
  t.Txn("W1", "a", 1, 2).W(kX, 1);
  t.Txn("W2", "a", 3, 4).W(kX, 2);
  t.Txn("Stale", "b", 5, 6).R(kX, 1);
  t.Txn("Never", "c", 5, 6).R(kX, 42);
  t.Txn("Long", "d", 3, 12).W(kX, 3);
  t.Txn("Dirty", "e", 7, 8).R(kX, 3);
  t.Txn("Early", "f", 9, 10).R(kY, 5);
  t.Txn("Late", "g", 11, 13).W(kY, 5);
  t.Txn("Ab", "h", 1, 2, TxnStatus::kAborted).W(kY, 6);
  t.Txn("ReadAb", "i", 3, 3).R(kY, 6);
  t.Txn("Mid", "j", 20, 21).W(kY, 7).W(kY, 8);
  t.Txn("ReadMid", "k", 22, 22).R(kY, 7);
  EXPECT_THAT(CheckSi(t),
              UnorderedElementsAre("EXT/before Stale,W1 k=0", "EXT/never Never k=0",
                                   "NOCONFLICT W2,Long k=0", "EXT/uncommitted Dirty,Long k=0",
                                   "EXT/after Early,Late k=1", "EXT/aborted ReadAb,Ab k=1",
                                   "EXT/intermediate ReadMid,Mid k=1"));
}

TEST(ChronosTest, ExtOncePerReaderAndKey) {
  TestHistory t;
  t.Txn("W1", "a", 1, 2).W(kX, 1);
  t.Txn("R", "b", 3, 4).R(kX, 9).R(kX, 9);
  EXPECT_THAT(CheckSi(t), ElementsAre("EXT/never R k=0"));
}

TEST(ChronosTest, EqualTimestampsFollowChronos) {
  // A write committed at t is visible to a transaction starting at t.
  TestHistory t;
  t.Txn("W", "a", 1, 5).W(kX, 1);
  t.Txn("R", "b", 5, 6).R(kX, 1);
  t.Txn("P", "c", 5, 5).R(kX, 1);  // read-only, start == commit
  EXPECT_THAT(CheckSi(t), IsEmpty());
  // ...and not to one starting just before.
  TestHistory bad;
  bad.Txn("W", "a", 1, 5).W(kX, 1);
  bad.Txn("R", "b", 4, 6).R(kX, 1);
  EXPECT_THAT(CheckSi(bad), ElementsAre("EXT/uncommitted R,W k=0"));
  // A transaction does not see its own write as part of its snapshot.
  TestHistory own;
  own.Txn("T", "a", 5, 5).R(kX, 1).W(kX, 1);
  EXPECT_THAT(CheckSi(own), ElementsAre("EXT/uncommitted T k=0"));
}

TEST(ChronosTest, HybridTimestampsCompareLexicographically) {
  TestHistory t;
  t.TxnHlc("W", "a", {5, 1}, {5, 3}).W(kX, 1);
  t.TxnHlc("R1", "b", {5, 2}, {6, 0}).R(kX, std::nullopt);
  t.TxnHlc("R2", "c", {5, 3}, {6, 0}).R(kX, 1);
  EXPECT_THAT(CheckSi(t), IsEmpty());
}

TEST(ChronosTest, InitialValueConvention) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Txn("R0", "a", 1, 2).R(kX, 0).R(kY, std::nullopt);
  t.Txn("W", "b", 3, 4).W(kX, 1);
  t.Txn("R1", "c", 5, 6).R(kX, 0);
  EXPECT_THAT(CheckSi(t), ElementsAre("EXT/before R1 k=0"));
}

TEST(ChronosTest, WriteSkewIsSiValidAndSerInvalid) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Txn("T1", "a", 1, 3).R(kX, 0).R(kY, 0).W(kX, 1);
  t.Txn("T2", "b", 2, 4).R(kX, 0).R(kY, 0).W(kY, 1);
  EXPECT_THAT(CheckSi(t), IsEmpty());
  EXPECT_THAT(CheckSer(t), ElementsAre("EXT/before T2 k=0"));
  // Near miss: serial.
  TestHistory ok;
  ok.DefaultInitial(0);
  ok.Txn("T1", "a", 1, 3).R(kX, 0).R(kY, 0).W(kX, 1);
  ok.Txn("T2", "b", 2, 4).R(kX, 1).R(kY, 0).W(kY, 1);
  EXPECT_THAT(CheckSer(ok), IsEmpty());
}

TEST(ChronosTest, SerReadsAtCommitPoint) {
  TestHistory t;
  t.Txn("W", "a", 1, 5).W(kX, 1);
  t.Txn("R", "b", 2, 6).R(kX, 1);  // SI: W not yet committed at start 2; SER: W precedes R
  EXPECT_THAT(CheckSi(t), ElementsAre("EXT/uncommitted R,W k=0"));
  EXPECT_THAT(CheckSer(t), IsEmpty());
  TestHistory after;
  after.Txn("R", "b", 2, 4).R(kX, 1);
  after.Txn("W", "a", 1, 5).W(kX, 1);
  EXPECT_THAT(CheckSer(after), ElementsAre("EXT/uncommitted R,W k=0"));
}

TEST(ChronosTest, ListHistories) {
  TestHistory t;
  t.Txn("A1", "a", 1, 2).A(kX, 1);
  t.Txn("A2", "a", 3, 4).A(kX, 2);
  t.Txn("Ok", "b", 5, 6).L(kX, {1, 2});
  t.Txn("Own", "c", 5, 7).A(kX, 9).L(kX, {1, 2, 9}).A(kX, 10).L(kX, {1, 2, 9, 10});
  t.Txn("Stale", "d", 5, 6).L(kX, {1});
  t.Txn("Long", "e", 4, 20).A(kY, 3);
  t.Txn("Dirty", "f", 8, 9).L(kY, {3});
  t.Txn("IntBad", "g", 10, 11).L(kX, {1, 2, 9, 10}).L(kX, {1, 2});
  t.Txn("Empty", "h", 0, 0).L(kX, {}).L(kY, {});
  EXPECT_THAT(CheckSi(t), UnorderedElementsAre("EXT/before Stale k=0",
                                               "EXT/uncommitted Dirty,Long k=1", "INT IntBad k=0"));
}

TEST(ChronosTest, ListExtNamesTheWriterOfTheFirstWrongElement) {
  TestHistory t;
  t.Txn("A1", "a", 1, 2).A(kX, 1);
  t.Txn("Ab", "b", 1, 2, TxnStatus::kAborted).A(kX, 5);
  t.Txn("R", "c", 3, 4).L(kX, {1, 5});
  t.Txn("R2", "d", 3, 4).L(kX, {7});
  EXPECT_THAT(CheckSi(t), UnorderedElementsAre("EXT/aborted R,Ab k=0", "EXT/never R2 k=0"));
}

// Reads held as prefixes of their key's list (History::SharesKeyList) are judged by length and
// by where the committed list and the key's list part: here key 0's list is first read with an
// aborted element in it, so reads sharing that list are wrong although as long as the committed
// list, and a correct read is held apart.
TEST(ChronosTest, ListReadsSharingTheKeyListAreJudgedByContents) {
  TestHistory t;
  t.Txn("A1", "a", 1, 2).A(kX, 1);
  t.Txn("A2", "b", 3, 4).A(kX, 2);
  t.Txn("Ab", "c", 1, 2, TxnStatus::kAborted).A(kX, 5);
  t.Txn("Ay", "d", 1, 2).A(kY, 3);
  t.Txn("R1", "e", 5, 6).L(kX, {1, 5});
  t.Txn("R2", "f", 5, 6).L(kX, {1, 5});
  t.Txn("Ok", "g", 5, 6).L(kX, {1, 2});
  t.Txn("Own", "h", 5, 7).A(kX, 9).L(kX, {1, 5, 9});
  t.Txn("Ry", "i", 5, 6).L(kY, {3});
  t.Txn("OwnY", "j", 5, 7).A(kY, 4).L(kY, {3, 4});
  t.Txn("IntY", "k", 8, 9).L(kY, {3, 4}).L(kY, {3});
  t.Txn("SameY", "l", 8, 9).L(kY, {3, 4}).L(kY, {3, 4});
  const history::History h = t.Build();
  for (const char* name : {"R2", "Own", "OwnY", "SameY"}) {
    const history::Op& read = h.ops(h.FindTxn(name)).back();
    EXPECT_TRUE(history::History::SharesKeyList(read)) << name;
  }
  EXPECT_FALSE(history::History::SharesKeyList(h.ops(h.FindTxn("Ok")).back()));
  EXPECT_THAT(CheckSi(t), UnorderedElementsAre("EXT/aborted R1,Ab k=0", "EXT/aborted R2,Ab k=0",
                                               "EXT/aborted Own,Ab k=0", "INT IntY k=1"));
}

TEST(ChronosTest, SkipsTransactionsWithoutTimestampsAndCountsThem) {
  history::HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s", .commit = history::Timestamp{1, 0}}).ok());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "2",
                          .session = "s",
                          .start = history::Timestamp{2, 0},
                          .commit = history::Timestamp{3, 0}})
                  .ok());
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  ChronosResult si = RunChronos(*h, {.level = IsolationLevel::kSnapshotIsolation});
  EXPECT_EQ(si.stats.transactions_checked, 1u);
  EXPECT_EQ(si.stats.transactions_skipped, 1u);
  ChronosResult ser = RunChronos(*h, {.level = IsolationLevel::kSerializable});
  EXPECT_EQ(ser.stats.transactions_checked, 2u);
}

TEST(ChronosTest, ViolationsCarryReadableDetails) {
  TestHistory t;
  t.Txn("W1", "a", 1, 2).W(kX, 1);
  t.Txn("W2", "a", 3, 4).W(kX, 2);
  t.Txn("R", "b", 5, 6).R(kX, 1);
  history::History h = t.Build();
  ChronosResult r = RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
  ASSERT_EQ(r.violations.size(), 1u);
  const verdict::Violation& v = r.violations[0];
  EXPECT_EQ(v.expected, "2");
  EXPECT_EQ(v.observed, "1");
  EXPECT_THAT(v.explanation, ::testing::HasSubstr("read key 0 = 1"));
  EXPECT_THAT(v.explanation, ::testing::HasSubstr("holds 2 (written by W2)"));
  EXPECT_EQ(r.stats.external_reads, 1u);
}

}  // namespace
}  // namespace isowatch::checkers
