// SPDX-License-Identifier: Apache-2.0
// adya on simulator histories with known ground truth, and against chronos.
//
// The relationship tested, for a level L in {SI, SER}: if chronos finds L valid, adya finds no
// violation of L. At SER chronos replays commit order, and a history that passes it has every
// ww, wr and rw edge pointing forward in commit order, so its graph is acyclic (the converse
// fails: a history serializable in another order passes adya and not chronos). At SI a history
// that passes chronos reads every version from its snapshot and has no concurrent writers of a
// key, which rules out G-SIa, G-SIb and (through the timestamps) every dependency cycle.
// docs/checkers/adya.md states both arguments.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/sim/simulator.h"

namespace isowatch::checkers::adya {
namespace {

using history::DataModel;
using sim::Fault;
using sim::WorkloadOptions;
using verdict::Anomaly;
using verdict::IsolationLevel;

WorkloadOptions Workload(uint64_t seed, IsolationLevel store, DataModel data) {
  WorkloadOptions o;
  o.seed = seed;
  o.txns = 2000;
  o.sessions = 12;
  o.keys = 60;
  o.level = store;
  o.data = data;
  if (data == DataModel::kList) o.max_appends_per_key = 32;
  return o;
}

sim::SimResult RunSim(const WorkloadOptions& o) {
  auto r = sim::Simulate(o);
  if (!r.ok()) {
    ADD_FAILURE() << r.status();
    std::abort();
  }
  return *std::move(r);
}

// Anomaly name -> count.
std::map<std::string, int> Names(const std::vector<verdict::Violation>& vs) {
  std::map<std::string, int> out;
  for (const auto& v : vs) ++out[verdict::AnomalyName(v.anomaly)];
  return out;
}

std::string Show(const std::map<std::string, int>& names) {
  std::string out;
  for (const auto& [name, n] : names) out += fmt::format("{}x{} ", name, n);
  return out;
}

bool ChronosValid(const history::History& h, IsolationLevel level) {
  return RunChronos(h, {.level = level}).violations.empty();
}

std::vector<verdict::Violation> Adya(const history::History& h, IsolationLevel level) {
  return CheckAdya(h, {.levels = {level}}).violations;
}

TEST(AdyaSimulatorTest, SerializableStoreWithoutFaultsIsAcyclic) {
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      sim::SimResult r = RunSim(Workload(seed, IsolationLevel::kSerializable, data));
      ASSERT_TRUE(ChronosValid(r.history, IsolationLevel::kSerializable));
      AdyaResult a = CheckAdya(r.history);  // every level
      EXPECT_TRUE(a.violations.empty()) << "seed " << seed << ": " << Show(Names(a.violations));
      EXPECT_EQ(a.stats.sccs, 0u);
      EXPECT_GT(a.stats.rw_edges, 0u);
      EXPECT_EQ(a.stats.nodes, r.committed);
    }
  }
}

TEST(AdyaSimulatorTest, WriteSkewIsSnapshotValidAndG2ItemForSerializable) {
  int skews = 0;
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      sim::SimResult r = RunSim(Workload(seed, IsolationLevel::kSnapshotIsolation, data));
      ASSERT_TRUE(ChronosValid(r.history, IsolationLevel::kSnapshotIsolation));
      EXPECT_TRUE(Adya(r.history, IsolationLevel::kSnapshotIsolation).empty());
      EXPECT_TRUE(Adya(r.history, IsolationLevel::kReadCommitted).empty());
      std::map<std::string, int> ser = Names(Adya(r.history, IsolationLevel::kSerializable));
      // Only anti-dependency cycles with two or more anti-dependencies: SI forbids the rest.
      for (const auto& [name, n] : ser) EXPECT_EQ(name, "G2-item") << "seed " << seed;
      skews += ser["G2-item"];
      if (ser["G2-item"] > 0) {
        EXPECT_FALSE(ChronosValid(r.history, IsolationLevel::kSerializable));
      }
    }
  }
  EXPECT_GT(skews, 0) << "no write skew under contention";
}

struct FaultCase {
  Fault fault;
  IsolationLevel store;
  DataModel data;
  // The class adya must report at the store's level.
  Anomaly expected;
};

std::string CaseName(const ::testing::TestParamInfo<FaultCase>& info) {
  std::string name = fmt::format("{}_{}_{}", sim::FaultName(info.param.fault),
                                 verdict::IsolationLevelName(info.param.store),
                                 info.param.data == DataModel::kList ? "list" : "kv");
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

class AdyaFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(AdyaFaultTest, FindsTheFaultsClassAndAgreesWithChronos) {
  const FaultCase& c = GetParam();
  int expected_found = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    WorkloadOptions o = Workload(seed, c.store, c.data);
    o.faults = {{.fault = c.fault, .rate = 0.05}};
    sim::SimResult r = RunSim(o);
    const history::History& h = r.history;
    for (IsolationLevel level :
         {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
      std::vector<verdict::Violation> found = Adya(h, level);
      if (ChronosValid(h, level)) {
        EXPECT_TRUE(found.empty())
            << "seed " << seed << " at " << verdict::IsolationLevelName(level)
            << ": chronos valid, adya " << Show(Names(found));
      }
    }
    if (r.injected[static_cast<int>(c.fault)] == 0) continue;
    std::map<std::string, int> names = Names(Adya(h, c.store));
    expected_found += names[verdict::AnomalyName(c.expected)];
    EXPECT_FALSE(ChronosValid(h, c.store));
  }
  EXPECT_GT(expected_found, 0) << verdict::AnomalyName(c.expected) << " never found";
}

INSTANTIATE_TEST_SUITE_P(
    Faults, AdyaFaultTest,
    ::testing::Values(FaultCase{Fault::kLostUpdate, IsolationLevel::kSnapshotIsolation,
                                DataModel::kKeyValue, Anomaly::kGSIa},
                      FaultCase{Fault::kLostUpdate, IsolationLevel::kSerializable,
                                DataModel::kKeyValue, Anomaly::kGSingle},
                      FaultCase{Fault::kLostUpdate, IsolationLevel::kSerializable, DataModel::kList,
                                Anomaly::kGSingle},
                      FaultCase{Fault::kStaleSnapshot, IsolationLevel::kSnapshotIsolation,
                                DataModel::kKeyValue, Anomaly::kGSIb},
                      FaultCase{Fault::kStaleSnapshot, IsolationLevel::kSnapshotIsolation,
                                DataModel::kList, Anomaly::kGSIb},
                      FaultCase{Fault::kAbortedRead, IsolationLevel::kSerializable,
                                DataModel::kKeyValue, Anomaly::kG1a},
                      FaultCase{Fault::kAbortedRead, IsolationLevel::kSnapshotIsolation,
                                DataModel::kList, Anomaly::kG1a},
                      FaultCase{Fault::kIntermediateRead, IsolationLevel::kSerializable,
                                DataModel::kKeyValue, Anomaly::kG1b},
                      FaultCase{Fault::kFracturedVisibility, IsolationLevel::kSnapshotIsolation,
                                DataModel::kKeyValue, Anomaly::kGSIb}),
    CaseName);

}  // namespace
}  // namespace isowatch::checkers::adya
