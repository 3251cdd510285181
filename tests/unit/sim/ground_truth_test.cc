// SPDX-License-Identifier: Apache-2.0
// The simulator's ground truth against the Chronos checker: for many seeded workloads, the
// violations Chronos reports must be exactly the ones the simulator expects.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/history/history.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/chronos_threads.h"

namespace isowatch::sim {
namespace {

using history::DataModel;
using history::History;
using verdict::Anomaly;
using verdict::IsolationLevel;
using workload::Distribution;

constexpr int kSeeds = 30;

// A violation reduced to what both sides name: anomaly, kind, transaction ids (a NOCONFLICT
// pair unordered), key (-1 for SESSION).
using Entry = std::tuple<std::string, std::string, std::vector<std::string>, int64_t>;

Entry Make(Anomaly anomaly, verdict::ExtKind kind, std::vector<std::string> txns, int64_t key) {
  if (anomaly == Anomaly::kNoConflict) std::sort(txns.begin(), txns.end());
  return {verdict::AnomalyName(anomaly), verdict::ExtKindName(kind), std::move(txns), key};
}

std::vector<Entry> Expected(const SimResult& r) {
  std::vector<Entry> out;
  for (const ExpectedViolation& e : r.expected) {
    out.push_back(Make(e.anomaly, e.ext_kind, e.txns, e.key.value_or(-1)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Entry> Reported(const History& h, IsolationLevel level) {
  checkers::ChronosResult result = checkers::RunChronos(h, {.level = level});
  std::vector<Entry> out;
  for (const verdict::Violation& v : result.violations) {
    std::vector<std::string> txns;
    for (TxnId t : v.txns) txns.emplace_back(h.txn_name(t));
    const int64_t key = v.key.valid() ? h.key(v.key).payload : -1;
    out.push_back(Make(v.anomaly, v.ext_kind, std::move(txns), key));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Show(const std::vector<Entry>& entries) {
  std::string out;
  for (const auto& [anomaly, kind, txns, key] : entries) {
    out += fmt::format("  {} {} [{}] key {}\n", anomaly, kind, fmt::join(txns, ","), key);
  }
  return out;
}

// The entries of `a` not in `b` (both sorted).
std::vector<Entry> Minus(const std::vector<Entry>& a, const std::vector<Entry>& b) {
  std::vector<Entry> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// A small workload whose shape varies with the seed, so that many corners are exercised.
WorkloadOptions Workload(uint64_t seed, IsolationLevel level, DataModel data) {
  WorkloadOptions o;
  o.seed = seed;
  o.level = level;
  o.data = data;
  o.sessions = 3 + static_cast<uint32_t>(seed * 7 % 14);
  o.txns = 300 + seed * 37 % 500;
  o.ops_per_txn = 2 + static_cast<uint32_t>(seed % 7);
  o.keys = std::vector<uint64_t>{5, 12, 30, 100, 400}[seed % 5];
  o.read_ratio = std::vector<double>{0.3, 0.5, 0.7, 0.9}[seed % 4];
  o.dist = std::vector<Distribution>{Distribution::kZipfian, Distribution::kUniform,
                                     Distribution::kHotspot}[seed % 3];
  o.max_stale_lag = 1 + static_cast<uint32_t>(seed % 40);
  if (data == DataModel::kList && seed % 3 != 0) {
    o.max_appends_per_key = 4 + static_cast<uint32_t>(seed % 20);
  }
  return o;
}

struct Config {
  IsolationLevel level;
  DataModel data;
  std::vector<Fault> faults;  // empty: fault-free; several: all at once
  bool record_aborted = true;
};

std::string ConfigName(const Config& c) {
  std::string faults;
  if (c.faults.empty()) faults = "none";
  if (c.faults.size() == 1) faults = FaultName(c.faults[0]);
  if (c.faults.size() > 1) faults = "all";
  std::string name = fmt::format("{}_{}_{}{}", verdict::IsolationLevelName(c.level),
                                 c.data == DataModel::kList ? "list" : "kv", faults,
                                 c.record_aborted ? "" : "_unrecorded");
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

void PrintTo(const Config& c, std::ostream* os) { *os << ConfigName(c); }

std::string ParamName(const ::testing::TestParamInfo<Config>& param) {
  return ConfigName(param.param);
}

class GroundTruthTest : public ::testing::TestWithParam<Config> {};

TEST_P(GroundTruthTest, ChronosReportsExactlyTheGroundTruth) {
  const Config& c = GetParam();
  size_t expected_total = 0;
  int failures = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    WorkloadOptions o = Workload(seed, c.level, c.data);
    o.record_aborted = c.record_aborted;
    const double rate = c.faults.size() > 1 ? 0.03 : 0.08;
    for (Fault f : c.faults) o.faults.push_back({f, rate, /*from_txn=*/seed % 50});
    auto r = Simulate(o);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<Entry> expected = Expected(*r);
    const std::vector<Entry> reported = Reported(r->history, c.level);
    testing::ExpectSameOnEveryThreadCount(r->history, c.level);
    expected_total += expected.size();
    if (c.faults.empty()) {
      EXPECT_TRUE(expected.empty());
    }
    if (expected != reported && ++failures <= 3) {
      ADD_FAILURE() << "seed " << seed << ": expected but not reported:\n"
                    << Show(Minus(expected, reported)) << "reported but not expected:\n"
                    << Show(Minus(reported, expected));
    }
  }
  EXPECT_EQ(failures, 0);
  if (!c.faults.empty()) {
    EXPECT_GT(expected_total, 0u);
  }
}

std::vector<Config> Configs() {
  std::vector<Config> out;
  for (IsolationLevel level : {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
    for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
      out.push_back({level, data, {}});
      std::vector<Fault> all;
      for (Fault f : kAllFaults) {
        if (f == Fault::kIntermediateRead && data == DataModel::kList) continue;
        out.push_back({level, data, {f}});
        all.push_back(f);
      }
      out.push_back({level, data, all});
    }
    out.push_back({level, DataModel::kKeyValue, {Fault::kAbortedRead}, /*record_aborted=*/false});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Configs, GroundTruthTest, ::testing::ValuesIn(Configs()), ParamName);

// Transactions of about 64 ops, with every fault planted: a run on several threads walks a
// transaction of at most 64 ops by a mask of the ops its part judges, and a longer one op by op.
// Both must report exactly the ground truth, and what a run on one thread reports.
TEST(GroundTruthLongTxnTest, EveryThreadCountReportsTheGroundTruth) {
  for (uint32_t ops : {63u, 64u, 65u, 100u}) {
    for (IsolationLevel level :
         {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
      for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
        WorkloadOptions o = Workload(ops, level, data);
        o.ops_per_txn = ops;
        o.txns = 300;
        o.keys = 400;
        for (Fault f : kAllFaults) {
          if (f == Fault::kIntermediateRead && data == DataModel::kList) continue;
          o.faults.push_back({f, 0.03, /*from_txn=*/10});
        }
        auto r = Simulate(o);
        ASSERT_TRUE(r.ok()) << r.status();
        SCOPED_TRACE(fmt::format("{} ops, {}, {}", ops, verdict::IsolationLevelName(level),
                                 history::DataModelName(data)));
        const std::vector<Entry> expected = Expected(*r);
        EXPECT_FALSE(expected.empty());
        EXPECT_EQ(Show(Reported(r->history, level)), Show(expected));
        testing::ExpectSameOnEveryThreadCount(r->history, level);
      }
    }
  }
}

// A serializable store also gives snapshot isolation.
TEST(GroundTruthCrossLevelTest, SerializableHistoriesAreSnapshotIsolated) {
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      auto r = Simulate(Workload(seed, IsolationLevel::kSerializable, data));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(Show(Reported(r->history, IsolationLevel::kSnapshotIsolation)), "")
          << "seed " << seed;
    }
  }
}

// Under contention a snapshot-isolated store lets write skew through: valid SI, invalid SER.
TEST(GroundTruthCrossLevelTest, ContendedSnapshotIsolationIsNotSerializable) {
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    WorkloadOptions o;
    o.keys = 10;
    o.sessions = 20;
    o.txns = 2000;
    o.read_ratio = 0.5;
    o.data = data;
    auto r = Simulate(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Show(Reported(r->history, IsolationLevel::kSnapshotIsolation)), "");
    EXPECT_FALSE(Reported(r->history, IsolationLevel::kSerializable).empty());
  }
}

}  // namespace
}  // namespace isowatch::sim
