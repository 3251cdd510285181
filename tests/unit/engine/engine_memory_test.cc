// SPDX-License-Identifier: Apache-2.0
// A long stream with bounded disorder and watermarks: what the engine holds must stay bounded,
// not grow with the length of the stream.
#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/sim/delivery.h"
#include "isowatch/sim/simulator.h"

namespace isowatch::engine {
namespace {

using sim::BuildDeliverySchedule;
using sim::DeliveryBatch;
using sim::DeliverySchedule;
using verdict::IsolationLevel;

constexpr uint64_t kTxns = 60000;

struct Gauges {
  uint64_t versions = 0;
  uint64_t txns = 0;
  uint64_t reads = 0;
  uint64_t bytes = 0;  // the engine's own accounting (EngineStats::memory_bytes)

  void Max(const EngineStats& s) {
    bytes = std::max(bytes, s.memory_bytes);
    versions = std::max(versions, s.retained_versions);
    txns = std::max(txns, s.retained_txns);
    reads = std::max(reads, s.provisional_reads);
  }
  std::string ToString() const {
    return fmt::format("versions {}, txns {}, provisional reads {}, {} bytes", versions, txns,
                       reads, bytes);
  }
};

class EngineMemoryTest : public ::testing::TestWithParam<IsolationLevel> {};

TEST_P(EngineMemoryTest, StateStaysBoundedOnALongStream) {
  const IsolationLevel level = GetParam();
  sim::WorkloadOptions o;
  o.txns = kTxns;
  o.keys = 2000;
  o.ops_per_txn = 6;
  o.level = level;
  o.seed = 11;
  auto sim = sim::Simulate(o);
  ASSERT_TRUE(sim.ok()) << sim.status();
  const history::History& h = sim->history;
  // About +-30 ms of disorder at 10K transactions/s: a few hundred transactions.
  const DeliverySchedule schedule =
      BuildDeliverySchedule(h, {.mean_ms = 100, .sigma_ms = 10, .batch = 500, .seed = 3});
  ASSERT_GT(schedule.overtaken, 0u);

  common::ManualClock clock;
  Engine engine(h, {.level = level, .clock = &clock});
  const StreamId stream = engine.AddStream("long");
  Gauges first;
  Gauges second;
  const size_t half = schedule.batches.size() / 2;
  for (size_t i = 0; i < schedule.batches.size(); ++i) {
    const DeliveryBatch& b = schedule.batches[i];
    clock.Set(static_cast<int64_t>(b.time_ms) + 1);
    engine.Deliver(stream, schedule.txns(b), b.watermark);
    engine.Tick();
    (i < half ? first : second).Max(engine.stats());
    engine.TakeFinalViolations();
  }
  engine.Finish();
  EXPECT_TRUE(engine.TakeFinalViolations().empty());  // a fault-free store

  const EngineStats& s = engine.stats();
  EXPECT_EQ(s.delivered, h.size());
  EXPECT_EQ(s.horizon_misses, 0u);
  const std::string where =
      fmt::format("{}: first half {}; second half {}", verdict::IsolationLevelName(level),
                  first.ToString(), second.ToString());
  // Far below the stream's length...
  EXPECT_LT(second.versions, h.size() / 10) << where;
  EXPECT_LT(second.txns, h.size() / 20) << where;
  EXPECT_LT(second.reads, h.size() / 20) << where;
  EXPECT_GT(second.txns, 0u) << where;
  // ...and not growing with it.
  EXPECT_LE(second.versions, first.versions + first.versions / 4 + 64) << where;
  EXPECT_LE(second.txns, first.txns + first.txns / 4 + 64) << where;
  EXPECT_LE(second.reads, first.reads + first.reads / 4 + 64) << where;
  // The accounted bytes too, but for one bit per delivered transaction (duplicate detection).
  EXPECT_GT(first.bytes, 0u) << where;
  EXPECT_LE(second.bytes, first.bytes + first.bytes / 4 + h.size() / 8 + 1024) << where;
  RecordProperty("gauges", where);
}

INSTANTIATE_TEST_SUITE_P(Levels, EngineMemoryTest,
                         ::testing::Values(IsolationLevel::kSnapshotIsolation,
                                           IsolationLevel::kSerializable),
                         [](const ::testing::TestParamInfo<IsolationLevel>& p) {
                           return std::string(verdict::IsolationLevelName(p.param));
                         });

}  // namespace
}  // namespace isowatch::engine
