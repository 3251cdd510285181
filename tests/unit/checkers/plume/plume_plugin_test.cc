// SPDX-License-Identifier: Apache-2.0
// The plume plug-in: its registration and options, what it cannot judge (transactions of
// unknown outcome, reads never seen, values written twice), how a finding reads, and which
// findings a window trusts.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/plume/plume.h"
#include "isowatch/checkers/registry.h"
#include "isowatch/history/history_builder.h"

#include "tests/testing/test_history.h"

namespace isowatch::checkers {
namespace {

using history::TxnStatus;
using isowatch::testing::TestHistory;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using verdict::Anomaly;
using verdict::IsolationLevel;

uint64_t Stat(const CheckerResult& r, const std::string& name) {
  for (const auto& [n, v] : r.stats) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no stat " << name;
  return 0;
}

CheckerResult RunPlume(const history::History& h, const WindowScope* scope = nullptr,
                       const CheckerOptions& options = {}) {
  auto c = CreateChecker("plume", options);
  if (!c.ok()) {
    ADD_FAILURE() << c.status();
    return {};
  }
  return (*c)->Check(h, scope, CheckLimits());
}

TEST(PlumePluginTest, IsRegisteredForTheWeakLevelsWithoutTimestamps) {
  const CheckerInfo* info = FindChecker("plume");
  ASSERT_NE(info, nullptr);
  EXPECT_THAT(info->levels, ElementsAre(IsolationLevel::kReadCommitted, IsolationLevel::kReadAtomic,
                                        IsolationLevel::kCausal));
  EXPECT_FALSE(info->requirements.commit_timestamps);
  EXPECT_FALSE(info->requirements.start_snapshots);
  EXPECT_EQ(info->anomalies.size(), 16u);
  auto ra = CreateChecker("plume", {{"levels", "ra"}});
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_THAT((*ra)->levels(), ElementsAre(IsolationLevel::kReadAtomic));
  auto si = CreateChecker("plume", {{"levels", "si"}});
  ASSERT_FALSE(si.ok());
  EXPECT_THAT(std::string(si.status().message()), HasSubstr("plume cannot judge si"));
  auto bad = CreateChecker("plume", {{"max_explained_cycles", "many"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("plume.max_explained_cycles"));
}

// T-h of the notes: the finding names the TAP, the reader, both writers, the keys, the values,
// the causal path and the levels.
TEST(PlumePluginTest, AFindingSaysWhatWasReadFromWhomAndWhyItIsWrong) {
  TestHistory t;
  t.Untimed("1", "a").W(1, 1);
  t.Untimed("2", "a").W(1, 2).W(2, 1);
  t.Untimed("3", "b").R(2, 1).R(1, 1);
  const history::History h = t.Build();
  const CheckerResult r = RunPlume(h);
  ASSERT_EQ(r.violations.size(), 1u);
  const verdict::Violation& v = r.violations[0];
  EXPECT_EQ(v.checker, "plume");
  EXPECT_EQ(v.anomaly, Anomaly::kTapH);
  EXPECT_THAT(v.levels, ElementsAre(IsolationLevel::kReadCommitted, IsolationLevel::kReadAtomic,
                                    IsolationLevel::kCausal));
  EXPECT_THAT(v.txns, ElementsAre(TxnId(2), TxnId(0), TxnId(1)));  // reader, t1, t2
  EXPECT_EQ(h.KeyToString(v.key), "1");
  EXPECT_EQ(v.observed, "key 1 = 1");
  EXPECT_EQ(v.expected, "key 1 = 2");
  EXPECT_EQ(v.explanation,
            "TAP-h (non-monotonic read): T3 read key 2 = 1 from T2 and then key 1 = 1 from T1, "
            "yet T1 causally precedes T2 (T1 -so-> T2), which overwrote it with 2, so T3 saw "
            "T2's effects but not its write of key 1; read committed, read atomic and causal "
            "consistency forbid it.");
}

TEST(PlumePluginTest, UnknownOutcomeIsCommittedWhenReadAndAbortedOtherwise) {
  TestHistory t;
  t.Untimed("1", "a", TxnStatus::kUnknown).W(1, 1);
  t.Untimed("2", "b", TxnStatus::kUnknown).W(1, 2);
  t.Untimed("3", "c").R(1, 1);
  const history::History h = t.Build();
  const CheckerResult r = RunPlume(h);
  EXPECT_TRUE(r.violations.empty()) << r.violations[0].explanation;
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(Stat(r, "unknown_committed"), 1u);
  EXPECT_EQ(Stat(r, "unknown_dropped"), 1u);
  // Judged: the committed reader and the unknown writer it read from; not the other one.
  EXPECT_EQ(r.transactions_checked, 2u);
  EXPECT_EQ(r.transactions_skipped, 1u);
}

TEST(PlumePluginTest, ValuesWrittenTwiceLeaveTheirReadsUndecided) {
  TestHistory t;
  t.Untimed("1", "a").W(1, 1);
  t.Untimed("2", "b").W(1, 1);
  t.Untimed("3", "c").R(1, 1).R(2, 9);
  const history::History h = t.Build();
  const CheckerResult r = RunPlume(h);
  EXPECT_FALSE(r.complete);
  EXPECT_THAT(
      r.undecided,
      HasSubstr("1 read not judged: it returned a value written to its key more than once"));
  EXPECT_EQ(Stat(r, "ambiguous_reads"), 1u);
  EXPECT_EQ(Stat(r, "duplicate_writes"), 1u);
  // What was decided stands: the thin-air read of key 2.
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].anomaly, Anomaly::kTapA);
}

TEST(PlumePluginTest, UnobservedReadsAreCountedAndNotJudged) {
  history::HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "a"}).ok());
  b.UnknownRead(b.IntKey(1));
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  const CheckerResult r = RunPlume(*h);
  EXPECT_TRUE(r.complete);
  EXPECT_TRUE(r.violations.empty());
  EXPECT_EQ(Stat(r, "unobserved_reads"), 1u);
}

// A window's initial state is the state at its base in commit order: a read of a value written
// before the window looks thin-air, and a read of the initial state is no read of what precedes
// everything. Those findings are left to the whole history; the rest stand.
TEST(PlumePluginTest, AWindowDropsFindingsThatRestOnItsInitialState) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Untimed("1", "a").W(1, 5).W(2, 5);
  t.Untimed("2", "b").R(2, 5).R(1, 0);  // TAP-h from the initial state
  t.Untimed("3", "c").R(3, 7);          // TAP-a
  t.Untimed("4", "d").W(4, 1).W(4, 2);
  t.Untimed("5", "e").R(4, 1);  // TAP-f
  const history::History h = t.Build();
  const CheckerResult whole = RunPlume(h);
  EXPECT_EQ(whole.violations.size(), 3u);
  const WindowScope scope{.index = 1, .first_proper = 0};
  const CheckerResult window = RunPlume(h, &scope);
  ASSERT_EQ(window.violations.size(), 1u);
  EXPECT_EQ(window.violations[0].anomaly, Anomaly::kTapF);
  EXPECT_EQ(window.findings_out_of_scope, 2u);
  const WindowScope own_t5{.index = 2, .first_proper = 4};
  EXPECT_EQ(RunPlume(h, &own_t5).violations.size(), 1u);  // T5 is the window's own
  const WindowScope lead_in_only{.index = 3, .first_proper = 5};
  const CheckerResult none = RunPlume(h, &lead_in_only);
  EXPECT_TRUE(none.violations.empty());
  EXPECT_EQ(none.findings_out_of_scope, 3u);
}

}  // namespace
}  // namespace isowatch::checkers
