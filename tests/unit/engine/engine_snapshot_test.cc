// SPDX-License-Identifier: Apache-2.0
// The online engine on histories whose transactions carry PostgreSQL snapshots: hand-written
// ones and ones made by a model MVCC store, delivered out of order; the final violations must be
// Chronos's, each once, and the model's fault-free histories must be valid.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/history/history.h"
#include "isowatch/sim/delivery.h"

#include "tests/testing/pg_histories.h"
#include "tests/testing/pg_model.h"
#include "tests/testing/test_history.h"

namespace isowatch::engine {
namespace {

using history::History;
using ::isowatch::testing::PgModel;
using ::isowatch::testing::PgScenario;
using ::isowatch::testing::PgScenarios;
using ::isowatch::testing::SummarizeAll;
using ::isowatch::testing::TestHistory;
using sim::DeliveryOptions;
using sim::OnlineResult;
using sim::RunOnline;
using verdict::IsolationLevel;

// What both checkers must agree on: summary, expected and observed values.
std::vector<std::string> Entries(const History& h, const std::vector<verdict::Violation>& vs) {
  std::vector<std::string> out = SummarizeAll(h, vs);
  for (size_t i = 0; i < vs.size(); ++i)
    out[i] += fmt::format(" {}/{}", vs[i].expected, vs[i].observed);
  std::sort(out.begin(), out.end());
  return out;
}

struct Run {
  std::vector<std::string> entries;
  EngineStats stats;
  uint64_t repeated = 0;
};

// Delivers `h` with delays of sigma_ms around 100 ms, in batches of `batch`, at 1000
// transactions/s, with watermarks.
Run Online(const History& h, double sigma_ms, uint32_t batch, uint64_t seed, int64_t retention) {
  const DeliveryOptions delivery{.mean_ms = 100,
                                 .sigma_ms = sigma_ms,
                                 .batch = batch,
                                 .seed = seed,
                                 .rate_tps = 1000,
                                 .watermarks = true};
  const OnlineResult r =
      RunOnline(h, delivery,
                {.engine = {.level = IsolationLevel::kSnapshotIsolation, .retention = retention}});
  return Run{Entries(h, r.violations), r.stats, r.repeated_reports};
}

// Every disorder and batch size: with enough retention the engine reports exactly Chronos's
// set; with none, a subset (never a false alarm), exact when nothing was collected too early.
void ExpectSameAsChronos(const History& h, const std::string& what) {
  const checkers::ChronosResult offline =
      checkers::RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
  const std::vector<std::string> expected = Entries(h, offline.violations);
  int64_t span = 1;
  bool any_start = false;  // a reader by start timestamp may flip-flop; one by snapshot never
  for (const history::Transaction& t : h.txns()) {
    span = std::max(span, t.commit.physical + 1);
    any_start = any_start || t.has_start;
  }
  for (const double sigma : {0.0, 5.0, 50.0}) {
    for (const uint32_t batch : {1U, 4U, 32U}) {
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        const std::string where =
            fmt::format("{} sigma {} batch {} seed {}", what, sigma, batch, seed);
        const Run full = Online(h, sigma, batch, seed, span);
        EXPECT_EQ(full.entries, expected) << where;
        EXPECT_EQ(full.stats.horizon_misses, 0u) << where;
        EXPECT_EQ(full.stats.snapshot_unjudged, offline.stats.snapshot_unjudged) << where;
        if (!any_start) {
          EXPECT_EQ(full.stats.flip_flops, 0u) << where;
        }
        EXPECT_EQ(full.stats.pending_snapshots, 0u) << where;
        EXPECT_EQ(full.repeated, 0u) << where;
        EXPECT_EQ(full.stats.checked, offline.stats.transactions_checked) << where;
        const Run tight = Online(h, sigma, batch, seed, 0);
        std::vector<std::string> false_alarms;
        std::set_difference(tight.entries.begin(), tight.entries.end(), expected.begin(),
                            expected.end(), std::back_inserter(false_alarms));
        EXPECT_TRUE(false_alarms.empty()) << where << ": " << false_alarms.front();
        if (tight.stats.horizon_misses == 0) {
          EXPECT_EQ(tight.entries, expected) << where << ", retention 0";
        }
      }
    }
  }
}

class EngineSnapshotTest : public ::testing::TestWithParam<PgScenario> {};

TEST_P(EngineSnapshotTest, FinalViolationsEqualChronos) {
  const PgScenario& s = GetParam();
  const History h = s.history.Build();
  const checkers::ChronosResult offline =
      checkers::RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
  std::vector<std::string> summaries = SummarizeAll(h, offline.violations);
  std::sort(summaries.begin(), summaries.end());
  ASSERT_EQ(summaries, s.si);
  ExpectSameAsChronos(h, s.name);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, EngineSnapshotTest, ::testing::ValuesIn(PgScenarios()),
                         [](const ::testing::TestParamInfo<PgScenario>& p) {
                           return p.param.name;
                         });

TEST(EngineSnapshotModelTest, FaultFreeHistoriesAreValid) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    int faults = 0;
    const History h = PgModel({.seed = seed}, &faults).Build();
    ASSERT_EQ(faults, 0);
    const checkers::ChronosResult r =
        checkers::RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
    EXPECT_TRUE(r.violations.empty())
        << "seed " << seed << ": " << r.violations.front().explanation;
    ExpectSameAsChronos(h, fmt::format("fault-free seed {}", seed));
  }
}

TEST(EngineSnapshotModelTest, FaultsAreFoundOnlineAsOffline) {
  size_t found = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    int faults = 0;
    const History h =
        PgModel({.seed = seed, .stale_read = 0.1, .lost_update = 0.5}, &faults).Build();
    const checkers::ChronosResult r =
        checkers::RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
    EXPECT_GT(faults, 0) << seed;
    EXPECT_FALSE(r.violations.empty()) << seed;
    found += r.violations.size();
    ExpectSameAsChronos(h, fmt::format("faulty seed {}", seed));
  }
  EXPECT_GT(found, 0u);
}

}  // namespace
}  // namespace isowatch::engine
