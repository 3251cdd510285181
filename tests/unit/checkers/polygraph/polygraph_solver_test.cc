// SPDX-License-Identifier: Apache-2.0
// The polygraph search with each SAT solver behind its interface (CaDiCaL, CryptoMiniSat): on
// simulator histories with planted faults, their timestamps removed, both reach the same verdict
// at serializability and snapshot isolation, with pruning and without (without, the solver sees
// every constraint).
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/checkers/polygraph/internal/sat_solver.h"
#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/history/history.h"
#include "isowatch/history/without_timestamps.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/verdict/violation.h"

#include "tests/unit/checkers/polygraph/polygraph_testing.h"

namespace isowatch::checkers::polygraph {
namespace {

using verdict::IsolationLevel;

// A history of a store at snapshot isolation with `fault` planted, without its timestamps: 200
// transactions in 6 sessions on 12 keys, so that write orders are left to the solver.
history::History Blind(uint64_t seed, sim::Fault fault) {
  absl::StatusOr<sim::SimResult> r = sim::Simulate({.sessions = 6,
                                                    .txns = 200,
                                                    .keys = 12,
                                                    .level = IsolationLevel::kSnapshotIsolation,
                                                    .faults = {{.fault = fault, .rate = 0.05}},
                                                    .seed = seed});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) std::abort();
  absl::StatusOr<history::History> blind = history::WithoutTimestamps(r->history);
  EXPECT_TRUE(blind.ok()) << blind.status();
  if (!blind.ok()) std::abort();
  return *std::move(blind);
}

uint64_t Stat(const PolygraphResult& r, const std::string& name) {
  for (const auto& [n, v] : r.stats) {
    if (n == name) return v;
  }
  return 0;
}

std::set<std::string> Anomalies(const PolygraphResult& r) {
  std::set<std::string> out;
  for (const verdict::Violation& v : r.violations) out.insert(verdict::AnomalyName(v.anomaly));
  return out;
}

TEST(PolygraphSolverTest, CryptoMiniSatAgreesWithCadical) {
  uint64_t calls[2] = {0, 0};
  int invalid = 0;
  int valid = 0;
  for (sim::Fault fault : sim::kAllFaults) {
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      const history::History h = Blind(seed, fault);
      for (IsolationLevel level :
           {IsolationLevel::kSerializable, IsolationLevel::kSnapshotIsolation}) {
        for (bool prune : {true, false}) {
          const std::string where = std::string(sim::FaultName(fault)) + " seed " +
                                    std::to_string(seed) + " at " +
                                    verdict::IsolationLevelName(level) + (prune ? "" : " unpruned");
          PolygraphResult r[2];
          for (SatBackend b : {SatBackend::kCadical, SatBackend::kCryptoMiniSat}) {
            const int i = static_cast<int>(b);
            r[i] = CheckPolygraph(h, {.levels = {level}, .solver = b, .prune = prune});
            ASSERT_TRUE(r[i].complete) << where << ": " << r[i].undecided;
            calls[i] +=
                Stat(r[i], std::string(verdict::IsolationLevelName(level)) + "_solver_calls");
          }
          const bool violates = testing::Violates(r[0], level);
          EXPECT_EQ(testing::Violates(r[1], level), violates)
              << where << "\ncadical:\n"
              << testing::Show(r[0]) << "cryptominisat:\n"
              << testing::Show(r[1]);
          // Findings before the graph are the model's, the same for both; a rejection's cycles
          // come from the solver's models, so the two may name different (equally true) cycles.
          EXPECT_EQ(Anomalies(r[1]).empty(), Anomalies(r[0]).empty()) << where;
          (violates ? invalid : valid) += 1;
        }
      }
    }
  }
  // Both verdicts occur, and both solvers were asked, or agreeing would prove little.
  EXPECT_GT(invalid, 0);
  EXPECT_GT(valid, 0);
  EXPECT_GT(calls[0], 0u);
  EXPECT_GT(calls[1], 0u);
}

// Each backend behind the interface: a variable no clause constrains takes the value preferred
// for it (CryptoMiniSat stores a variable preferred true negated, which must not show), models
// satisfy the clauses, variables may be added between calls, and failed assumptions name the
// core.
TEST(PolygraphSolverTest, EveryBackendKeepsTheInterfaceContract) {
  for (SatBackend b : {SatBackend::kCadical, SatBackend::kCryptoMiniSat}) {
    SCOPED_TRACE(SatBackendName(b));
    std::unique_ptr<SatSolver> s =
        b == SatBackend::kCadical ? NewCadicalSolver() : NewCryptoMiniSatSolver();
    const std::function<bool()> never = [] { return false; };
    s->Reserve(3);
    s->Prefer(1);
    s->Prefer(-2);
    s->Prefer(3);
    const int clause[] = {-1, -3};
    s->AddClause(clause);
    ASSERT_EQ(s->Solve({}, never), SatSolver::Outcome::kSat);
    EXPECT_FALSE(s->True(1) && s->True(3));
    EXPECT_FALSE(s->True(2));
    EXPECT_TRUE(s->True(-2));
    // Two more variables, both preferred true: 5 free, 4 false whenever 1 is true.
    s->Reserve(5);
    s->Prefer(4);
    s->Prefer(5);
    const int implies[] = {-1, -4};
    s->AddClause(implies);
    const int assume[] = {1, 3};
    ASSERT_EQ(s->Solve(assume, never), SatSolver::Outcome::kUnsat);
    EXPECT_TRUE(s->Failed(1));
    EXPECT_TRUE(s->Failed(3));
    EXPECT_FALSE(s->Failed(-1));
    const int assume_one[] = {1};
    ASSERT_EQ(s->Solve(assume_one, never), SatSolver::Outcome::kSat);
    EXPECT_TRUE(s->True(1));
    EXPECT_FALSE(s->True(3));
    EXPECT_FALSE(s->True(4));
    EXPECT_TRUE(s->True(-4));
    EXPECT_FALSE(s->True(2));
    EXPECT_TRUE(s->True(5));
    const int assume_four[] = {4};
    ASSERT_EQ(s->Solve(assume_four, never), SatSolver::Outcome::kSat);
    EXPECT_TRUE(s->True(4));
    EXPECT_FALSE(s->True(1));
  }
}

}  // namespace
}  // namespace isowatch::checkers::polygraph
