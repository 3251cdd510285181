// SPDX-License-Identifier: Apache-2.0
// The online engine against Chronos: for simulated histories (fault-free, each fault, all faults;
// key-value and list; SI and SER) delivered out of order, the violations the engine makes final
// must be exactly the ones Chronos reports, each once, whatever the disorder.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/history.h"
#include "isowatch/sim/delivery.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/violation_entries.h"

namespace isowatch::engine {
namespace {

using history::DataModel;
using history::History;
using sim::BuildDeliverySchedule;
using sim::DeliveryOptions;
using sim::DeliverySchedule;
using sim::Fault;
using sim::OnlineOptions;
using sim::OnlineResult;
using sim::RunOnline;
using verdict::IsolationLevel;
using workload::Distribution;

constexpr uint64_t kSeeds = 10;      // fault-free and all-faults configurations
constexpr uint64_t kFaultSeeds = 4;  // single-fault configurations
constexpr double kRateTps = 10000;   // collection rate of the delivery
// Without watermarks: 1 ms per transaction, so a history lasts several timeouts.
constexpr double kTimeoutRateTps = 1000;
constexpr double kTimeoutSigmaMs = 3;

using Entry = ::isowatch::testing::ViolationEntry;
using ::isowatch::testing::Entries;
using ::isowatch::testing::Minus;
using ::isowatch::testing::Show;

// Every run checks the engine's invariants (Engine::CheckInvariantsForTest) after each delivery
// and at the end. A Tick only finalises what timed out, which with a watermark on every batch is
// rarely anything, and what it changes is checked after the next delivery; the runs that
// finalise by timeout check after each Tick too.
void CheckInvariants(const Engine& engine, sim::EngineCall call) {
  if (call != sim::EngineCall::kTick) engine.CheckInvariantsForTest();
}
void CheckInvariantsAfterEveryCall(const Engine& engine, sim::EngineCall /*call*/) {
  engine.CheckInvariantsForTest();
}

// A small workload whose shape varies with the seed.
sim::WorkloadOptions Workload(uint64_t seed, IsolationLevel level, DataModel data) {
  sim::WorkloadOptions o;
  o.seed = seed;
  o.level = level;
  o.data = data;
  o.sessions = 3 + static_cast<uint32_t>(seed * 7 % 14);
  o.txns = 200 + seed * 53 % 400;
  o.ops_per_txn = 2 + static_cast<uint32_t>(seed % 7);
  o.keys = std::vector<uint64_t>{5, 12, 30, 100, 400}[seed % 5];
  o.read_ratio = std::vector<double>{0.3, 0.5, 0.7, 0.9}[seed % 4];
  o.dist = std::vector<Distribution>{Distribution::kZipfian, Distribution::kUniform,
                                     Distribution::kHotspot}[seed % 3];
  o.max_stale_lag = 1 + static_cast<uint32_t>(seed % 40);
  if (data == DataModel::kList) {
    if (seed % 6 == 0) {
      o.txns = std::min<uint64_t>(o.txns, 300);  // lists never retired: they grow long
    } else {
      o.max_appends_per_key = 4 + static_cast<uint32_t>(seed % 20);
    }
  }
  return o;
}

struct Config {
  IsolationLevel generated;  // what the simulated store provides
  IsolationLevel checked;    // what is checked
  DataModel data;
  std::vector<Fault> faults;  // empty: fault-free; several: all at once
};

std::string ConfigName(const Config& c) {
  std::string faults = "none";
  if (c.faults.size() == 1) faults = sim::FaultName(c.faults[0]);
  if (c.faults.size() > 1) faults = "all";
  std::string name = fmt::format("{}_{}_{}", verdict::IsolationLevelName(c.generated),
                                 c.data == DataModel::kList ? "list" : "kv", faults);
  if (c.checked != c.generated) name += fmt::format("_at_{}", IsolationLevelName(c.checked));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

void PrintTo(const Config& c, std::ostream* os) { *os << ConfigName(c); }

std::string ParamName(const ::testing::TestParamInfo<Config>& param) {
  return ConfigName(param.param);
}

// Delivery variants: sigma relative to the span of one batch (batch / rate).
struct Disorder {
  const char* name;
  double sigma_in_batch_spans;
};
constexpr Disorder kDisorders[] = {{"in-order", 0}, {"batch-span", 1}, {"heavy", 8}};

uint32_t BatchFor(uint64_t seed) { return std::vector<uint32_t>{1, 16, 50, 128}[seed % 4]; }

class EngineDifferentialTest : public ::testing::TestWithParam<Config> {};

TEST_P(EngineDifferentialTest, FinalViolationsEqualChronos) {
  const Config& c = GetParam();
  const uint64_t seeds = c.faults.size() == 1 ? kFaultSeeds : kSeeds;
  size_t chronos_total = 0;
  size_t exact_without_retention = 0;
  size_t spilled_runs = 0;   // runs with a spill that wrote to it
  size_t reloaded_runs = 0;  // and that read from it
  size_t pruned_runs = 0;    // runs whose spill dropped versions (spill_retention)
  size_t evicted_runs = 0;   // runs in which cold keys moved their last version to the spill
  int failures = 0;
  for (uint64_t seed = 1; seed <= seeds && failures < 3; ++seed) {
    sim::WorkloadOptions o = Workload(seed, c.generated, c.data);
    const double rate = c.faults.size() > 1 ? 0.03 : 0.08;
    for (Fault f : c.faults) o.faults.push_back({f, rate, /*from_txn=*/seed % 50});
    auto sim = sim::Simulate(o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    const History& h = sim->history;
    const checkers::ChronosResult chronos = checkers::RunChronos(h, {.level = c.checked});
    const std::vector<Entry> expected = Entries(h, chronos.violations);
    chronos_total += expected.size();

    // Versions are kept this far below the final point: room for the longest transaction, so
    // that no check needs state already collected.
    int64_t longest = 0;
    for (const history::Transaction& t : h.txns()) {
      if (t.has_start && t.has_commit) {
        longest = std::max(longest, t.commit.physical - t.start.physical);
      }
    }
    const OnlineOptions retained{.engine = {.level = c.checked, .retention = longest + 1},
                                 .after_call = CheckInvariants};

    const uint32_t batch = BatchFor(seed);
    const double span_ms = 1000.0 * batch / kRateTps;
    for (const Disorder& d : kDisorders) {
      const DeliveryOptions delivery{.mean_ms = 100,
                                     .sigma_ms = d.sigma_in_batch_spans * span_ms,
                                     .batch = batch,
                                     .seed = seed * 31 + 7,
                                     .rate_tps = kRateTps,
                                     .watermarks = true};
      const OnlineResult online = RunOnline(h, delivery, retained);
      const std::vector<Entry> reported = Entries(h, online.violations);
      const std::string where =
          fmt::format("seed {} batch {} disorder {} ({} txns)", seed, batch, d.name, h.size());
      if (reported != expected) {
        ++failures;
        ADD_FAILURE() << where << "\nChronos only:\n"
                      << Show(Minus(expected, reported)) << "engine only:\n"
                      << Show(Minus(reported, expected));
      }
      EXPECT_EQ(online.repeated_reports, 0u) << where;
      EXPECT_EQ(online.stats.late_arrivals, 0u) << where;  // the watermarks are honest
      EXPECT_EQ(online.stats.below_final_arrivals, 0u) << where;
      EXPECT_EQ(online.stats.duplicates, 0u) << where;
      EXPECT_EQ(online.stats.delivered, h.size()) << where;
      EXPECT_EQ(online.stats.checked, chronos.stats.transactions_checked) << where;
      EXPECT_EQ(online.stats.final_violations, online.violations.size()) << where;
      EXPECT_EQ(online.stats.provisional_reads, 0u) << where;  // all final after Finish
      EXPECT_EQ(online.stats.horizon_misses, 0u) << where;

      // With no retention beyond the longest transaction seen so far, a transaction longer
      // than all before it may find versions collected (a horizon miss); a run without one
      // must still be exact.
      if (d.sigma_in_batch_spans == 1) {
        const OnlineResult tight =
            RunOnline(h, delivery, {.engine = {.level = c.checked}, .after_call = CheckInvariants});
        if (tight.stats.horizon_misses == 0) {
          ++exact_without_retention;
          const std::vector<Entry> got = Entries(h, tight.violations);
          if (got != expected) {
            ++failures;
            ADD_FAILURE() << where << ", retention 0, no horizon miss\nChronos only:\n"
                          << Show(Minus(expected, got)) << "engine only:\n"
                          << Show(Minus(got, expected));
          }
        }
        EXPECT_EQ(tight.repeated_reports, 0u) << where;

        // With a spill that receives everything collected there are no horizon misses:
        // retention 0 is exact, and so is a budget of one byte, which cuts every collection at
        // the final point (RocksDB for some seeds, in memory for the others). With a budget
        // alone, the spill receives only what the budget pushes out: exact unless a horizon
        // miss (a transaction longer than all before it), and never a false alarm. Pruning the
        // spill below the longest transaction (spill_retention) changes nothing: every arrival
        // starts above the prune point.
        struct Variant {
          bool collected;
          bool budget;
          bool prune = false;
        };
        for (const Variant var : {Variant{true, false}, Variant{true, true}, Variant{false, true},
                                  Variant{true, true, true}}) {
          std::unique_ptr<VersionSpill> spill;
          std::string spill_dir;
          if (var.budget && seed % 4 == 0) {
            spill_dir = (std::filesystem::path(::testing::TempDir()) /
                         fmt::format("spill_{}_{}_{}", getpid(), ConfigName(c), seed))
                            .string();
            auto rocks = RocksVersionSpill::Open(spill_dir);
            ASSERT_TRUE(rocks.ok()) << rocks.status();
            spill = *std::move(rocks);
          } else {
            spill = std::make_unique<MemoryVersionSpill>();
          }
          const OnlineResult spilled =
              RunOnline(h, delivery,
                        {.engine = {.level = c.checked,
                                    .spill = spill.get(),
                                    .spill_collected = var.collected,
                                    .memory_budget = var.budget ? 1U : 0U,
                                    .spill_retention = var.prune ? longest + 1 : 0},
                         .after_call = CheckInvariants});
          const std::string how =
              fmt::format("{}, retention 0, spill{}{}{}", where,
                          var.collected ? " of everything collected" : "",
                          var.budget ? ", budget 1 byte" : "", var.prune ? ", pruned" : "");
          const std::vector<Entry> got = Entries(h, spilled.violations);
          const bool exact = var.collected || spilled.stats.horizon_misses == 0;
          const std::vector<Entry> false_alarms = Minus(got, expected);
          if ((exact && got != expected) || !false_alarms.empty()) {
            ++failures;
            ADD_FAILURE() << how << "\nChronos only:\n"
                          << Show(Minus(expected, got)) << "engine only:\n"
                          << Show(false_alarms);
          }
          if (var.collected) {
            EXPECT_EQ(spilled.stats.horizon_misses, 0u) << how;
          }
          EXPECT_EQ(spilled.stats.spill_errors, 0u) << how;
          EXPECT_EQ(spilled.repeated_reports, 0u) << how;
          if (var.budget) {
            EXPECT_GT(spilled.stats.budget_collections, 0u) << how;
          }
          spilled_runs += spilled.stats.spilled_versions > 0 ? 1 : 0;
          reloaded_runs += spilled.stats.reloads > 0 ? 1 : 0;
          evicted_runs += spilled.stats.evicted_keys > 0 ? 1 : 0;
          if (!var.budget) {
            EXPECT_EQ(spilled.stats.evicted_keys, 0u) << how;
          }
          if (var.prune) {
            pruned_runs += spilled.stats.spill_pruned > 0 ? 1 : 0;
          } else {
            EXPECT_EQ(spilled.stats.spill_pruned, 0u) << how;
          }
          spill.reset();
          if (!spill_dir.empty()) std::filesystem::remove_all(spill_dir);
        }
      }
      if (d.sigma_in_batch_spans == 0) {
        EXPECT_EQ(online.stats.flip_flops, 0u) << where;  // arrival in commit order
      }
    }

    // No watermarks: verdicts become final by timeout. At a slower rate the run lasts long
    // enough for the timeout to fire part-way; a timeout just above the largest disorder (the
    // clock moves in whole milliseconds) is exact.
    {
      const DeliveryOptions delivery{.mean_ms = 100,
                                     .sigma_ms = kTimeoutSigmaMs,
                                     .batch = batch,
                                     .seed = seed * 17 + 3,
                                     .rate_tps = kTimeoutRateTps,
                                     .watermarks = false};
      const DeliverySchedule schedule = BuildDeliverySchedule(h, delivery);
      const auto timeout = static_cast<int64_t>(std::ceil(schedule.max_disorder_ms)) + 2;
      const OnlineResult online = RunOnline(h, schedule,
                                            {.engine = {.level = c.checked,
                                                        .finality_timeout_ms = timeout,
                                                        .retention = retained.engine.retention},
                                             .after_call = CheckInvariantsAfterEveryCall});
      const std::vector<Entry> reported = Entries(h, online.violations);
      const std::string where =
          fmt::format("seed {} batch {} timeout {} ms, no watermarks ({} txns, {} ms long)", seed,
                      batch, timeout, h.size(), schedule.batches.back().time_ms);
      if (reported != expected) {
        ++failures;
        ADD_FAILURE() << where << "\nChronos only:\n"
                      << Show(Minus(expected, reported)) << "engine only:\n"
                      << Show(Minus(reported, expected));
      }
      EXPECT_EQ(online.repeated_reports, 0u) << where;
      EXPECT_EQ(online.stats.late_arrivals, 0u) << where;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(exact_without_retention, 0u);
  EXPECT_GT(spilled_runs, 0u);
  EXPECT_GT(pruned_runs, 0u);
  // Under SER a read point is a commit, above the final point, so only SI ever reloads a
  // version (SER may still restore evicted keys' states, which count as reloads too).
  if (c.checked == IsolationLevel::kSnapshotIsolation) {
    EXPECT_GT(reloaded_runs, 0u);
  }
  // Under a budget of one byte, the registers of keys idle long enough leave memory (lists
  // keep their state).
  if (c.data == DataModel::kKeyValue) {
    EXPECT_GT(evicted_runs, 0u);
  } else {
    EXPECT_EQ(evicted_runs, 0u);
  }
  if (!c.faults.empty() || c.checked != c.generated) {
    EXPECT_GT(chronos_total, 0u);
  }
}

std::vector<Config> Configs() {
  std::vector<Config> out;
  for (IsolationLevel level : {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
    for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
      out.push_back({level, level, data, {}});
      std::vector<Fault> all;
      for (Fault f : sim::kAllFaults) {
        if (f == Fault::kIntermediateRead && data == DataModel::kList) continue;
        out.push_back({level, level, data, {f}});
        all.push_back(f);
      }
      out.push_back({level, level, data, all});
    }
  }
  // Snapshot-isolated histories checked at SER: write skew and the like become EXT violations.
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    out.push_back({IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable, data, {}});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Configs, EngineDifferentialTest, ::testing::ValuesIn(Configs()),
                         ParamName);

}  // namespace
}  // namespace isowatch::engine
