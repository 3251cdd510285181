// SPDX-License-Identifier: Apache-2.0
// Chronos on histories whose transactions carry PostgreSQL snapshots (docs/engine.md,
// "Snapshots").
#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"

#include "tests/testing/chronos_threads.h"
#include "tests/testing/pg_histories.h"
#include "tests/testing/test_history.h"

namespace isowatch::checkers {
namespace {

using ::isowatch::testing::PgScenario;
using ::isowatch::testing::PgScenarios;
using ::isowatch::testing::SummarizeAll;
using ::isowatch::testing::TestHistory;
using ::testing::HasSubstr;
using verdict::IsolationLevel;

class ChronosSnapshotTest : public ::testing::TestWithParam<PgScenario> {};

TEST_P(ChronosSnapshotTest, ReportsWhatTheSnapshotsSay) {
  const PgScenario& s = GetParam();
  const history::History h = s.history.Build();
  const ChronosResult r = RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
  std::vector<std::string> got = SummarizeAll(h, r.violations);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, s.si);
  EXPECT_EQ(r.stats.snapshot_unjudged, s.unjudged);
  isowatch::testing::ExpectSameOnEveryThreadCount(h, IsolationLevel::kSnapshotIsolation);
  isowatch::testing::ExpectSameOnEveryThreadCount(h, IsolationLevel::kSerializable);
  EXPECT_EQ(r.stats.transactions_skipped,
            0u + std::count_if(h.txns().begin(), h.txns().end(),
                               [](const history::Transaction& t) { return !t.committed(); }));
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ChronosSnapshotTest, ::testing::ValuesIn(PgScenarios()),
                         [](const ::testing::TestParamInfo<PgScenario>& p) {
                           return p.param.name;
                         });

TEST(ChronosSnapshotTest, ExplanationsNameTheSnapshot) {
  TestHistory t;
  t.Pg("T1", "a", 101, "101:101:", 10).W(0, 1);
  t.Pg("T2", "a", 0, "101:102:101", 20).R(0, 1);
  const history::History h = t.Build();
  const ChronosResult r = RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
  ASSERT_EQ(r.violations.size(), 2u);  // SESSION and EXT
  for (const verdict::Violation& v : r.violations) {
    EXPECT_THAT(v.explanation, HasSubstr("101:102:101"));
  }
}

// A snapshot that sees a writer sees its final value of each key, not one it wrote on the way;
// in a short writer and in one long enough to be walked otherwise (more than 32 operations).
TEST(ChronosSnapshotTest, ASnapshotSeesTheWritersFinalValue) {
  for (const int padding : {0, 40}) {
    TestHistory t;
    auto& writer = t.Pg("T1", "a", 101, "101:101:", 10).W(0, 1);
    for (int i = 0; i < padding; ++i) writer.W(100 + i, i);
    writer.W(1, 5).W(0, 2);
    t.Pg("T2", "b", 0, "102:102:", 20).R(0, 2).R(1, 5);
    t.Pg("T3", "c", 0, "102:102:", 30).R(0, 1);
    const history::History h = t.Build();
    const ChronosResult r = RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
    const std::vector<std::string> got = SummarizeAll(h, r.violations);
    ASSERT_EQ(got.size(), 1u) << padding << ": " << ::testing::PrintToString(got);
    EXPECT_THAT(got[0], HasSubstr("T3")) << padding;
    isowatch::testing::ExpectSameOnEveryThreadCount(h, IsolationLevel::kSnapshotIsolation);
  }
}

// At SER the snapshot is not used: reads are judged at the commit point, in commit order.
TEST(ChronosSnapshotTest, SerJudgesAtTheCommitPoint) {
  TestHistory t;
  t.Pg("T0", "a", 100, "100:100:", 10).W(0, 1);
  t.Pg("T1", "b", 101, "101:101:", 20).R(0, 1).W(0, 2);
  t.Pg("T2", "c", 102, "101:101:", 30).R(0, 1).W(0, 3);
  const history::History h = t.Build();
  const ChronosResult r = RunChronos(h, {.level = IsolationLevel::kSerializable});
  EXPECT_EQ(SummarizeAll(h, r.violations), std::vector<std::string>{"EXT/before T2,T0 k=0"});
  EXPECT_EQ(r.stats.transactions_checked, 3u);
}

}  // namespace
}  // namespace isowatch::checkers
