// SPDX-License-Identifier: Apache-2.0
// The polygraph checker on simulator histories with their timestamps removed, against chronos on
// the same histories with timestamps.
//
// The relationships tested: chronos judges one order (the timestamps'), the polygraph checker
// looks for any order, so a history chronos finds valid at a level the polygraph checker finds
// valid there too, and whatever the polygraph checker rejects chronos rejects. A fault-free
// store gives histories both find valid; each planted fault whose evidence needs no timestamps
// (aborted, intermediate and non-repeatable reads, fractured visibility) is rejected by both.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/history/history.h"
#include "isowatch/history/without_timestamps.h"
#include "isowatch/sim/simulator.h"

#include "tests/unit/checkers/polygraph/polygraph_testing.h"

namespace isowatch::checkers::polygraph {
namespace {

using sim::Fault;
using verdict::IsolationLevel;

// A store at `level`, 400 transactions in 8 sessions on 40 keys, with `faults` planted.
sim::SimResult Simulated(uint64_t seed, IsolationLevel level, std::vector<sim::FaultSpec> faults) {
  absl::StatusOr<sim::SimResult> r = sim::Simulate({.sessions = 8,
                                                    .txns = 400,
                                                    .keys = 40,
                                                    .level = level,
                                                    .faults = std::move(faults),
                                                    .seed = seed});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) std::abort();
  return *std::move(r);
}

struct Verdicts {
  bool chronos_valid = false;
  bool polygraph_valid = false;
};

// Both checkers at `level`: chronos with the timestamps, polygraph without them.
Verdicts Judge(const history::History& h, IsolationLevel level) {
  const ChronosResult chronos = RunChronos(h, {.level = level});
  EXPECT_TRUE(chronos.complete);
  absl::StatusOr<history::History> blind = history::WithoutTimestamps(h);
  EXPECT_TRUE(blind.ok()) << blind.status();
  if (!blind.ok()) std::abort();
  EXPECT_FALSE(blind->has_commit_timestamps());
  const PolygraphResult r = CheckPolygraph(*blind, {.levels = {level}});
  EXPECT_TRUE(r.complete) << r.undecided;
  // With every key hot, its constraints added only as candidate orders need them: the same
  // verdict.
  const PolygraphResult hot = CheckPolygraph(*blind, {.levels = {level}, .lazy_chains = 0});
  EXPECT_TRUE(hot.complete) << hot.undecided;
  EXPECT_EQ(testing::Violates(hot, level), testing::Violates(r, level)) << testing::Show(hot);
  return {chronos.violations.empty(), !testing::Violates(r, level)};
}

TEST(PolygraphSimulatorTest, FaultFreeStoresAreValidForBoth) {
  for (IsolationLevel level : {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const sim::SimResult sim = Simulated(seed, level, {});
      const Verdicts v = Judge(sim.history, level);
      EXPECT_TRUE(v.chronos_valid) << seed;
      EXPECT_TRUE(v.polygraph_valid) << seed;
    }
  }
  // A serializable store is snapshot-isolated too.
  const sim::SimResult ser = Simulated(7, IsolationLevel::kSerializable, {});
  EXPECT_TRUE(Judge(ser.history, IsolationLevel::kSnapshotIsolation).polygraph_valid);
}

uint64_t Stat(const PolygraphResult& r, const std::string& name) {
  for (const auto& [n, v] : r.stats) {
    if (n == name) return v;
  }
  return 0;
}

// The hot keys' pairs count against the constraint-edge cap: past it the history is undecided
// (UNKNOWN), not judged on the pairs added so far.
TEST(PolygraphSimulatorTest, HotKeyPairsPastTheEdgeCapGiveUnknown) {
  const sim::SimResult sim = Simulated(1, IsolationLevel::kSnapshotIsolation, {});
  absl::StatusOr<history::History> blind = history::WithoutTimestamps(sim.history);
  ASSERT_TRUE(blind.ok()) << blind.status();
  const PolygraphOptions hot = {.levels = {IsolationLevel::kSnapshotIsolation}, .lazy_chains = 0};
  const PolygraphResult judged = CheckPolygraph(*blind, hot);
  ASSERT_TRUE(judged.complete) << judged.undecided;
  EXPECT_FALSE(testing::Violates(judged, IsolationLevel::kSnapshotIsolation));
  // Rounds were needed, or the cap would have nothing to stop.
  ASSERT_GT(Stat(judged, "si_hot_key_rounds"), 0u);
  ASSERT_GT(Stat(judged, "si_hot_key_pairs"), 0u);
  PolygraphOptions capped_options = hot;
  capped_options.max_constraint_edges = 1;
  const PolygraphResult capped = CheckPolygraph(*blind, capped_options);
  EXPECT_FALSE(capped.complete);
  EXPECT_TRUE(capped.violations.empty());
  EXPECT_NE(capped.undecided.find("hot keys' write orders needed more than 1 constraint edges"),
            std::string::npos)
      << capped.undecided;
}

TEST(PolygraphSimulatorTest, AgreesWithChronosOnEveryPlantedFault) {
  int both_invalid = 0;
  for (Fault fault : sim::kAllFaults) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const sim::SimResult sim =
          Simulated(seed, IsolationLevel::kSnapshotIsolation, {{.fault = fault, .rate = 0.05}});
      const int injected = static_cast<int>(sim.injected[static_cast<int>(fault)]);
      for (IsolationLevel level :
           {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
        const Verdicts v = Judge(sim.history, level);
        const std::string where = std::string(sim::FaultName(fault)) + " seed " +
                                  std::to_string(seed) + " at " +
                                  verdict::IsolationLevelName(level);
        // What chronos accepts has a witness order, so the polygraph accepts it too (and what
        // the polygraph rejects, chronos rejects).
        EXPECT_TRUE(!v.chronos_valid || v.polygraph_valid) << where;
        const bool blind_evidence =
            fault == Fault::kAbortedRead || fault == Fault::kIntermediateRead ||
            fault == Fault::kNonRepeatableRead || fault == Fault::kFracturedVisibility;
        if (blind_evidence && injected > 0) {
          EXPECT_FALSE(v.chronos_valid) << where;
          EXPECT_FALSE(v.polygraph_valid) << where;
        }
        both_invalid += !v.chronos_valid && !v.polygraph_valid ? 1 : 0;
      }
    }
  }
  // Most planted faults are visible without timestamps.
  EXPECT_GE(both_invalid, 24);
}

}  // namespace
}  // namespace isowatch::checkers::polygraph
