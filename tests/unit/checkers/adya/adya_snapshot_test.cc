// SPDX-License-Identifier: Apache-2.0
// CheckAdya on histories with PostgreSQL snapshots: at SI, "committed in the snapshot" is the
// snapshot's visibility of the writer's xid (docs/checkers/adya.md).
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"

#include "tests/testing/pg_histories.h"
#include "tests/testing/pg_model.h"
#include "tests/testing/test_history.h"
#include "tests/unit/checkers/adya/summary.h"

namespace isowatch::checkers::adya {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using verdict::IsolationLevel;

// The findings that violate `level`.
std::vector<std::string> Violating(const history::History& h, const AdyaResult& r,
                                   IsolationLevel level) {
  std::vector<std::string> out;
  for (const verdict::Violation& v : r.violations) {
    if (std::find(v.levels.begin(), v.levels.end(), level) != v.levels.end()) {
      out.push_back(Summarize(h, v));
    }
  }
  return out;
}

history::History Scenario(const std::string& name) {
  for (const testing::PgScenario& s : testing::PgScenarios()) {
    if (s.name == name) return s.history.Build();
  }
  std::abort();
}

TEST(AdyaSnapshotTest, LostUpdateAndReadSkewViolateSi) {
  for (const char* name : {"lost_update", "read_skew"}) {
    const history::History h = Scenario(name);
    const AdyaResult r = CheckAdya(h);
    EXPECT_FALSE(Violating(h, r, IsolationLevel::kSnapshotIsolation).empty()) << name;
    EXPECT_FALSE(Violating(h, r, IsolationLevel::kSerializable).empty()) << name;
    EXPECT_EQ(r.stats.unjudged_si_edges, 0u) << name;
  }
  const history::History h = Scenario("lost_update");
  const AdyaResult r = CheckAdya(h);
  const std::vector<std::string> si = Violating(h, r, IsolationLevel::kSnapshotIsolation);
  EXPECT_THAT(fmt::format("{}", fmt::join(si, "; ")), HasSubstr("G-SIa"));
  bool explained = false;
  for (const verdict::Violation& v : r.violations) {
    if (v.anomaly == verdict::Anomaly::kGSIa) {
      EXPECT_THAT(v.explanation, HasSubstr("snapshot 101:101:"));
      explained = true;
    }
  }
  EXPECT_TRUE(explained);
}

// Valid at SI: concurrent writers of different keys, and a snapshot that sees a later commit in
// the WAL but not an earlier one (a timestamp order would call that a violation).
TEST(AdyaSnapshotTest, ValidSnapshotHistories) {
  for (const char* name : {"repeatable_read_valid", "wal_order_near_miss"}) {
    const history::History h = Scenario(name);
    const AdyaResult r = CheckAdya(h);
    EXPECT_THAT(Violating(h, r, IsolationLevel::kSnapshotIsolation), IsEmpty()) << name;
  }
  const history::History h = Scenario("wal_order_near_miss");
  EXPECT_THAT(CheckAdya(h).violations, IsEmpty());
}

// The model MVCC (first committer wins) is SI: never a finding at SI; with faults, some.
TEST(AdyaSnapshotTest, ModelHistories) {
  size_t faulty_findings = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    int faults = 0;
    const history::History clean = testing::PgModel({.seed = seed}, &faults).Build();
    const AdyaResult r = CheckAdya(clean);
    EXPECT_THAT(Violating(clean, r, IsolationLevel::kSnapshotIsolation), IsEmpty()) << seed;
    const history::History faulty =
        testing::PgModel({.seed = seed, .lost_update = 1.0}, &faults).Build();
    faulty_findings +=
        Violating(faulty, CheckAdya(faulty), IsolationLevel::kSnapshotIsolation).size();
  }
  EXPECT_GT(faulty_findings, 0u);
}

}  // namespace
}  // namespace isowatch::checkers::adya
