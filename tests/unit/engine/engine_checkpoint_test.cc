// SPDX-License-Identifier: Apache-2.0
// Checkpoints of the online engine: an engine saved part-way through a delivery, restored into a
// fresh engine with only the transactions a live history would still hold, and given the rest of
// the delivery, makes final exactly what the uninterrupted engine makes final after that point,
// and reports nothing twice.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/history.h"
#include "isowatch/sim/delivery.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"
#include "tests/testing/violation_entries.h"

namespace isowatch::engine {
namespace {

using history::DataModel;
using history::History;
using history::Timestamp;
using ::isowatch::testing::Entries;
using ::isowatch::testing::Minus;
using ::isowatch::testing::Show;
using ::isowatch::testing::TestHistory;
using ::isowatch::testing::ViolationEntry;
using sim::BuildDeliverySchedule;
using sim::DeliveryBatch;
using sim::DeliverySchedule;
using verdict::IsolationLevel;
using verdict::Violation;

// How the engines of one comparison are configured.
enum class Mode {
  kRetained,  // versions kept for the longest transaction: every check exact, no spill
  kTight,     // nothing kept beyond what the final point needs, no spill: horizon misses
  kBudget,    // a one-byte memory budget over a spill: constant spilling and eviction
};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kRetained:
      return "retained";
    case Mode::kTight:
      return "tight";
    case Mode::kBudget:
      return "budget";
  }
  return "?";
}

struct Outcome {
  std::vector<Violation> before;  // made final before the checkpoint
  std::vector<Violation> after;   // made final by the restored engine
  EngineStats stats;              // the restored engine's, at the end
  size_t held = 0;                // transactions the restored engine took again
  size_t delivered = 0;           // transactions delivered before the checkpoint
  size_t evicted = 0;             // keys evicted at the checkpoint
  size_t recorded = 0;            // keys with a state in the checkpoint
};

EngineOptions Options(IsolationLevel level, Mode mode, int64_t longest, VersionSpill* spill,
                      const common::Clock* clock) {
  EngineOptions o{.level = level, .clock = clock};
  if (mode == Mode::kRetained) o.retention = longest + 1;
  if (mode == Mode::kBudget) {
    o.spill = spill;
    o.memory_budget = 1;
  }
  return o;
}

// Delivers `schedule` through one stream; at batch `at` saves the engine, restores a fresh one
// from the saved bytes with the transactions a live history would hold (delivered and not
// final, or still read by the engine), and goes on with it. `at` == batches: no checkpoint.
Outcome RunSplit(const History& h, IsolationLevel level, Mode mode, int64_t longest,
                 const DeliverySchedule& schedule, size_t at) {
  Outcome out;
  common::ManualClock clock;
  MemoryVersionSpill spill;  // outlives both engines: the restored one reads what was spilled
  const EngineOptions options = Options(level, mode, longest, &spill, &clock);
  auto engine = std::make_unique<Engine>(h, options);
  StreamId stream = engine->AddStream("s");
  std::vector<TxnId> delivered;
  std::vector<Violation>* sink = &out.before;
  for (size_t b = 0; b < schedule.batches.size(); ++b) {
    if (b == at) {
      std::sort(delivered.begin(), delivered.end());
      std::vector<HeldTxn> held;
      for (TxnId id : delivered) {
        if (!engine->IsFinal(id) || engine->Release(id)) held.push_back({stream, id});
      }
      v1::EngineCheckpoint saved;
      const absl::Status s = engine->SaveCheckpoint(&saved);
      EXPECT_TRUE(s.ok()) << s;
      out.evicted = saved.evicted_keys_size();
      out.recorded = saved.keys_size();
      const std::string bytes = saved.SerializeAsString();
      engine.reset();
      v1::EngineCheckpoint parsed;
      EXPECT_TRUE(parsed.ParseFromString(bytes));
      engine = std::make_unique<Engine>(h, options);
      const absl::Status r = engine->RestoreCheckpoint(parsed, held);
      EXPECT_TRUE(r.ok()) << r;
      stream = 0;
      out.held = held.size();
      out.delivered = delivered.size();
      sink = &out.after;
      for (Violation& v : engine->TakeFinalViolations()) sink->push_back(std::move(v));
    }
    const DeliveryBatch& batch = schedule.batches[b];
    clock.Set(static_cast<int64_t>(batch.time_ms) + 1);
    const auto txns = schedule.txns(batch);
    engine->Deliver(stream, txns, batch.watermark);
    delivered.insert(delivered.end(), txns.begin(), txns.end());
    engine->Tick();
    for (Violation& v : engine->TakeFinalViolations()) sink->push_back(std::move(v));
  }
  engine->Finish();
  for (Violation& v : engine->TakeFinalViolations()) sink->push_back(std::move(v));
  out.stats = engine->stats();
  return out;
}

// The entries of `vs`, with those reported more than once.
std::vector<ViolationEntry> Repeated(const std::vector<ViolationEntry>& sorted) {
  std::vector<ViolationEntry> out;
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i] == sorted[i - 1]) out.push_back(sorted[i]);
  }
  return out;
}

struct Config {
  IsolationLevel level;
  DataModel data;
  bool faults;
};

class EngineCheckpointTest : public ::testing::TestWithParam<Config> {};

TEST_P(EngineCheckpointTest, RestoredEngineGoesOnAsIfNeverStopped) {
  const Config& c = GetParam();
  size_t compared = 0;
  size_t with_violations = 0;
  size_t released_runs = 0;  // the restored engine took fewer transactions than were delivered
  size_t evicted_runs = 0;
  size_t pending_runs = 0;  // it took again transactions whose reads were still pending
  int failures = 0;
  for (uint64_t seed = 1; seed <= 6 && failures < 3; ++seed) {
    sim::WorkloadOptions o;
    o.seed = seed;
    o.level = c.level;
    o.data = c.data;
    o.sessions = 3 + static_cast<uint32_t>(seed * 5 % 9);
    o.txns = 300 + seed * 61 % 300;
    o.ops_per_txn = 2 + static_cast<uint32_t>(seed % 5);
    o.keys = std::vector<uint64_t>{8, 30, 100, 400}[seed % 4];
    o.read_ratio = 0.6;
    if (c.data == DataModel::kList) o.max_appends_per_key = 8;
    if (c.faults) {
      for (sim::Fault f : sim::kAllFaults) {
        if (f == sim::Fault::kIntermediateRead && c.data == DataModel::kList) continue;
        o.faults.push_back({f, 0.04, /*from_txn=*/0});
      }
    }
    auto simulated = sim::Simulate(o);
    ASSERT_TRUE(simulated.ok()) << simulated.status();
    const History& h = simulated->history;
    int64_t longest = 0;
    for (const history::Transaction& t : h.txns()) {
      if (t.has_start && t.has_commit) {
        longest = std::max(longest, t.commit.physical - t.start.physical);
      }
    }
    const std::vector<ViolationEntry> chronos =
        Entries(h, checkers::RunChronos(h, {.level = c.level}).violations);
    for (double sigma_ms : {0.0, 20.0}) {
      const DeliverySchedule schedule = BuildDeliverySchedule(
          h, {.mean_ms = 100, .sigma_ms = sigma_ms, .batch = 4, .seed = seed, .rate_tps = 5000});
      const size_t batches = schedule.batches.size();
      for (Mode mode : {Mode::kRetained, Mode::kTight, Mode::kBudget}) {
        const Outcome whole = RunSplit(h, c.level, mode, longest, schedule, batches);
        const std::vector<ViolationEntry> expected = Entries(h, whole.before);
        if (mode != Mode::kTight) {
          // The uninterrupted run itself is exact.
          EXPECT_EQ(expected, chronos) << "seed " << seed << " " << ModeName(mode);
        }
        for (size_t at : {batches / 3, batches * 2 / 3}) {
          const Outcome split = RunSplit(h, c.level, mode, longest, schedule, at);
          const std::string where = fmt::format("seed {} sigma {} {} checkpoint at batch {}/{}",
                                                seed, sigma_ms, ModeName(mode), at, batches);
          std::vector<Violation> all = split.before;
          all.insert(all.end(), split.after.begin(), split.after.end());
          const std::vector<ViolationEntry> got = Entries(h, all);
          ++compared;
          if (got != expected) {
            ++failures;
            ADD_FAILURE() << where << "\nuninterrupted only:\n"
                          << Show(Minus(expected, got)) << "restored only:\n"
                          << Show(Minus(got, expected));
          }
          EXPECT_EQ(Repeated(got), std::vector<ViolationEntry>()) << where;
          EXPECT_EQ(split.stats.provisional_reads, 0u) << where;
          EXPECT_EQ(split.stats.late_arrivals, 0u) << where;
          EXPECT_EQ(split.stats.duplicates, 0u) << where;
          EXPECT_EQ(split.stats.final_violations, split.after.size()) << where;
          if (mode != Mode::kTight) {
            EXPECT_EQ(split.stats.horizon_misses, 0u) << where;
          }
          if (!expected.empty()) ++with_violations;
          if (split.held < split.delivered) ++released_runs;
          if (split.evicted > 0) ++evicted_runs;
          if (split.held > 0 && sigma_ms > 0) ++pending_runs;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(compared, 0u);
  EXPECT_GT(released_runs, 0u);
  EXPECT_GT(pending_runs, 0u);
  if (c.faults) {
    EXPECT_GT(with_violations, 0u);
  }
  if (c.data == DataModel::kKeyValue) {
    EXPECT_GT(evicted_runs, 0u);
  }
}

std::string ConfigName(const ::testing::TestParamInfo<Config>& info) {
  return fmt::format("{}_{}_{}", info.param.level == IsolationLevel::kSerializable ? "ser" : "si",
                     info.param.data == DataModel::kList ? "list" : "kv",
                     info.param.faults ? "faults" : "clean");
}

INSTANTIATE_TEST_SUITE_P(
    Configs, EngineCheckpointTest,
    ::testing::Values(Config{IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, false},
                      Config{IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, true},
                      Config{IsolationLevel::kSnapshotIsolation, DataModel::kList, true},
                      Config{IsolationLevel::kSerializable, DataModel::kKeyValue, true},
                      Config{IsolationLevel::kSerializable, DataModel::kList, true}),
    ConfigName);

// A key's state in the checkpoint keeps what collection dropped: a late transaction whose read
// needs a version dropped before the checkpoint is, after the restore, a horizon miss (as it is
// without one), not judged against the initial value.
TEST(EngineCheckpointTest, RestoredKeyKeepsWhatCollectionDropped) {
  TestHistory t;
  t.Txn("W1", "a", 1, 10).W(0, 1);
  t.Txn("W2", "b", 11, 20).W(0, 2);
  t.Txn("W3", "c", 21, 30).W(0, 3);
  t.Txn("R", "d", 15, 16).R(0, 1);  // late: right, but W1 is no longer held anywhere
  const History h = t.Build();
  MemoryVersionSpill spill;
  common::ManualClock clock;
  const EngineOptions options{.clock = &clock, .spill = &spill, .memory_budget = 1};
  Engine a(h, options);
  const StreamId s = a.AddStream("s");
  const std::vector<TxnId> writers = {h.FindTxn("W1"), h.FindTxn("W2"), h.FindTxn("W3")};
  a.Deliver(s, writers, Timestamp{100, 0});
  a.Deliver(s, {}, Timestamp{101, 0});
  EXPECT_EQ(a.stats().spilled_versions, 0u);  // W1 and W2 dropped, not spilled
  v1::EngineCheckpoint saved;
  ASSERT_TRUE(a.SaveCheckpoint(&saved).ok());
  ASSERT_EQ(saved.keys_size(), 1);  // resident: its state is in the checkpoint
  EXPECT_EQ(saved.keys(0).dropped_upto().ts().physical(), 20);
  std::vector<HeldTxn> held;
  for (TxnId id : writers) {
    if (!a.IsFinal(id) || a.Release(id)) held.push_back({s, id});
  }
  // All three: each is its session's newest. W1's and W2's versions, collected, do not come back
  // with them (else R would read W1 and be judged: no horizon miss).
  ASSERT_EQ(held.size(), 3u);

  Engine b(h, options);
  ASSERT_TRUE(b.RestoreCheckpoint(saved, held).ok());
  const TxnId r = h.FindTxn("R");
  b.Deliver(0, std::span(&r, 1), Timestamp{200, 0});
  b.Finish();
  EXPECT_TRUE(b.TakeFinalViolations().empty());
  EXPECT_EQ(b.stats().horizon_misses, 1u);
  EXPECT_EQ(b.stats().late_arrivals, 1u);
}

// A checkpoint that does not fit the engine is refused, and the engine is left untouched.
TEST(EngineCheckpointTest, MismatchedCheckpointIsRefused) {
  sim::WorkloadOptions o;
  o.txns = 200;
  o.keys = 20;
  auto simulated = sim::Simulate(o);
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  const History& h = simulated->history;
  Engine a(h, {});
  const StreamId s = a.AddStream("s");
  std::vector<TxnId> all;
  for (uint32_t i = 0; i < h.size(); ++i) all.push_back(TxnId(i));
  a.Deliver(s, all, h.txns().back().commit);
  v1::EngineCheckpoint saved;
  ASSERT_TRUE(a.SaveCheckpoint(&saved).ok());

  v1::EngineCheckpoint other_level = saved;
  other_level.set_level(static_cast<uint32_t>(IsolationLevel::kSerializable));
  EXPECT_EQ(Engine(h, {}).RestoreCheckpoint(other_level, {}).code(),
            absl::StatusCode::kInvalidArgument);

  v1::EngineCheckpoint other_size = saved;
  other_size.set_txn_count(h.size() + 1);
  EXPECT_EQ(Engine(h, {}).RestoreCheckpoint(other_size, {}).code(),
            absl::StatusCode::kInvalidArgument);

  v1::EngineCheckpoint bad_key = saved;
  bad_key.add_keys()->set_key(static_cast<uint32_t>(h.key_count()));
  EXPECT_EQ(Engine(h, {}).RestoreCheckpoint(bad_key, {}).code(),
            absl::StatusCode::kInvalidArgument);

  v1::EngineCheckpoint evicted = saved;
  evicted.add_evicted_keys(0);
  EXPECT_EQ(Engine(h, {}).RestoreCheckpoint(evicted, {}).code(),
            absl::StatusCode::kFailedPrecondition);

  const HeldTxn outside{.stream = 7, .id = TxnId(0)};
  EXPECT_EQ(Engine(h, {}).RestoreCheckpoint(saved, std::span(&outside, 1)).code(),
            absl::StatusCode::kInvalidArgument);

  // The good one still restores.
  Engine b(h, {});
  EXPECT_TRUE(b.RestoreCheckpoint(saved, {}).ok());
  EXPECT_EQ(b.final_point(), a.final_point());
}

}  // namespace
}  // namespace isowatch::engine
