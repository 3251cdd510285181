// SPDX-License-Identifier: Apache-2.0
// The daemon's checking core against Chronos: simulated histories with faults, sent out of order
// over several streams, give exactly Chronos's violations, each once, restored or spilled alike.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/common/clock.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/formats/byte_values.h"
#include "isowatch/formats/native.h"
#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/report/check_report.h"
#include "isowatch/sim/delivery.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/store/violation_record.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/v1/ingest.pb.h"
#include "isowatch/windows/window_cutter.h"
#include "isowatch/workload/key_chooser.h"

#include "tests/unit/monitor/live_checker_batches.h"

namespace isowatch::monitor {
namespace {

using history::DataModel;
using history::History;
using sim::Fault;
using verdict::IsolationLevel;

// The batches a set of collectors would send for `h`: the delivery schedule's batches, dealt
// round-robin to `streams` streams, each with the schedule's watermark (which covers every
// transaction collected so far, so it is a true promise for each stream), the last batch of each
// stream ending it.
std::vector<v1::IngestBatch> Batches(const History& h, const sim::DeliverySchedule& schedule,
                                     int streams) {
  std::vector<v1::IngestBatch> out;
  std::vector<uint64_t> seq(streams, 0);
  v1::Header header;
  EXPECT_TRUE(formats::EncodeHeader(h, &header).ok());
  for (size_t b = 0; b < schedule.batches.size(); ++b) {
    const auto& batch = schedule.batches[b];
    const int s = static_cast<int>(b % streams);
    v1::IngestBatch ib;
    ib.set_stream(fmt::format("collector-{}", s));
    ib.set_seq(++seq[s]);
    if (b == 0) *ib.mutable_header() = header;
    for (TxnId id : schedule.txns(batch)) {
      EXPECT_TRUE(formats::EncodeTxn(h, id, ib.add_txns()).ok());
    }
    if (batch.watermark) {
      ib.mutable_watermark()->set_physical(batch.watermark->physical);
      ib.mutable_watermark()->set_logical(batch.watermark->logical);
    }
    out.push_back(std::move(ib));
  }
  // End every stream: on its last batch, or on an empty one if it had none.
  std::vector<int> last(streams, -1);
  for (size_t i = 0; i < out.size(); ++i) last[i % streams] = static_cast<int>(i);
  for (int s = 0; s < streams; ++s) {
    if (last[s] >= 0) {
      out[last[s]].set_end_of_stream(true);
    } else {
      v1::IngestBatch ib;
      ib.set_stream(fmt::format("collector-{}", s));
      ib.set_seq(1);
      ib.set_end_of_stream(true);
      out.push_back(std::move(ib));
    }
  }
  return out;
}

// What a run of RunLive left, for the tests of forgotten keys: counts summed over the checkers
// restored one from another.
struct LiveRunStats {
  uint64_t keys_forgotten = 0;
  uint64_t forgotten_returns = 0;
  uint64_t new_key_lookups = 0;
  uint64_t horizon_misses = 0;
  size_t key_count = 0;  // key ids the history handed out
};

void AddRunStats(const LiveChecker& live, LiveRunStats& to) {
  to.keys_forgotten += live.history_stats().keys_forgotten;
  to.forgotten_returns += live.stats().forgotten_returns;
  to.new_key_lookups += live.stats().new_key_lookups;
  to.horizon_misses += live.stats().horizon_misses;
}

// With `budget`: a one-byte memory budget over an in-memory spill, so that versions are spilled
// and the live history forgets final transactions, and keys only the spill holds, as soon as it
// can. With `checkpoint_every`:
// after every that many batches the checker is saved, dropped, and a new one restored from the
// saved bytes goes on (the spill stays as it was, as the daemon's snapshot of it would). With
// `first_txn`: the checker starts as one restored from a checkpoint taken after it had numbered
// that many transactions and released them all, so the transactions get the ids from there on.
std::vector<store::ViolationRecord> RunLive(const std::vector<v1::IngestBatch>& batches,
                                            IsolationLevel level, bool budget = false,
                                            size_t checkpoint_every = 0, uint64_t first_txn = 0,
                                            int64_t spill_retention = 0,
                                            LiveRunStats* run_stats = nullptr) {
  common::ManualClock clock;
  engine::MemoryVersionSpill spill;
  LiveOptions options{.engine = {.level = level, .clock = &clock}};
  if (budget) {
    options.engine.spill = &spill;
    options.engine.memory_budget = 1;
    options.history.min_release = 16;
    options.history.min_bytes_collect = 0;  // forget unused byte strings at every release
    options.history.min_keys_collect = 0;   // and keys
    options.engine.spill_retention = spill_retention;
  }
  auto live_owner = std::make_unique<LiveChecker>(options);
  std::vector<store::ViolationRecord> out;
  int64_t now = 1000;
  size_t restores = 0;
  LiveRunStats totals;
  if (first_txn > 0) {
    v1::IngestBatch header_only;
    header_only.set_stream(batches.front().stream());
    header_only.set_seq(batches.front().seq());
    *header_only.mutable_header() = batches.front().header();
    EXPECT_TRUE(live_owner->Apply(header_only, {}).empty());
    v1::LiveCheckpoint saved;
    EXPECT_TRUE(live_owner->SaveCheckpoint(&saved).ok());
    saved.mutable_history()->set_first_txn(first_txn);
    saved.mutable_engine()->set_txn_count(first_txn);
    saved.set_release_end(first_txn);
    live_owner = std::make_unique<LiveChecker>(options);
    const absl::Status r = live_owner->RestoreCheckpoint(saved, now);
    EXPECT_TRUE(r.ok()) << r;
    EXPECT_EQ(live_owner->history().size(), first_txn);
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    const v1::IngestBatch& b = batches[i];
    std::vector<TxnRefusal> refused = live_owner->Apply(b, All(b));
    EXPECT_TRUE(refused.empty()) << refused.front().detail;
    for (auto& r : live_owner->TakeViolations(++now)) out.push_back(std::move(r));
    if (checkpoint_every > 0 && (i + 1) % checkpoint_every == 0 && i + 1 < batches.size()) {
      v1::LiveCheckpoint saved;
      const absl::Status s = live_owner->SaveCheckpoint(&saved);
      EXPECT_TRUE(s.ok()) << s;
      const std::string bytes = saved.SerializeAsString();
      AddRunStats(*live_owner, totals);
      live_owner = std::make_unique<LiveChecker>(options);
      v1::LiveCheckpoint parsed;
      EXPECT_TRUE(parsed.ParseFromString(bytes));
      const absl::Status r = live_owner->RestoreCheckpoint(parsed, now);
      EXPECT_TRUE(r.ok()) << r;
      ++restores;
      // Nothing is reported again.
      EXPECT_TRUE(live_owner->TakeViolations(now).empty());
    }
  }
  if (checkpoint_every > 0) {
    EXPECT_GT(restores, 0u);
  }
  const LiveChecker& live = *live_owner;
  if (run_stats != nullptr) {
    AddRunStats(live, totals);
    totals.key_count = live.history().key_count();
    *run_stats = totals;
  }
  // Every transaction got the next id.
  size_t sent = 0;
  for (const v1::IngestBatch& b : batches) sent += static_cast<size_t>(b.txns_size());
  EXPECT_EQ(live.history().size(), first_txn + sent);
  for (const LiveStreamStatus& s : live.Streams()) {
    EXPECT_TRUE(s.closed) << s.name;
    EXPECT_EQ(s.pending, 0u) << s.name;
  }
  if (budget) {
    const History& h = live.history();
    EXPECT_GT(live.history_stats().releases, 0u);
    EXPECT_GT(h.first_txn(), first_txn);
    // Held: the transactions since the last release and those the engine still reads (but for
    // the streams over many keys of the tests that ask for stats, where the writer of each
    // key's one version stays retired until the key is evicted).
    if (run_stats == nullptr) {
      EXPECT_LT(h.txns().size() + h.retired_count(), (h.size() - first_txn) / 2)
          << h.txns().size() << " held and " << h.retired_count() << " retired of "
          << h.size() - first_txn;
    }
    // Byte values the history and the engine no longer hold were forgotten, and their indices
    // handed out again to later values.
    if (checkpoint_every == 0) {
      EXPECT_EQ(live.history_stats().byte_collections, live.history_stats().releases);
      if (h.byte_count() > 0) {
        EXPECT_GT(live.history_stats().bytes_forgotten, 0u);
      }
      // Every spilled version holds a value of its own (the simulator never writes one twice),
      // which the history keeps while the spill may be read for it: with pruning, some are let
      // go, without it none.
      if (h.byte_count() > 0 && h.data_model() == history::DataModel::kKeyValue) {
        const engine::EngineStats& s = live.stats();
        EXPECT_GT(s.spilled_versions, 0u);
        if (spill_retention > 0) {
          EXPECT_LT(s.spill_pinned_strings, s.spilled_versions);
        } else {
          EXPECT_EQ(s.spill_pinned_strings, s.spilled_versions);
        }
      }
    }
  }
  return out;
}

// Chronos's violations, with the ids the daemon gives them.
std::map<std::string, std::string> Offline(const History& h, IsolationLevel level) {
  checkers::ChronosOptions options;
  options.level = level;
  checkers::ChronosResult result = checkers::RunChronos(h, options);
  std::map<std::string, std::string> out;
  for (verdict::Violation v : result.violations) {
    v.checker = "online";
    out.emplace(StableViolationId(h, v), report::ViolationToJson(h, v));
  }
  return out;
}

struct Config {
  IsolationLevel level;
  DataModel data;
  int streams;
  bool budget = false;          // RunLive's budget
  bool bytes = false;           // values are byte strings (formats::WithByteValues)
  int64_t spill_retention = 0;  // with budget (EngineOptions::spill_retention, in ticks)
};

class LiveCheckerTest : public ::testing::TestWithParam<Config> {};

TEST_P(LiveCheckerTest, EqualsChronosOverStreamsWithDisorder) {
  const Config c = GetParam();
  size_t total = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    sim::WorkloadOptions o;
    o.seed = seed;
    o.level = c.level;
    o.data = c.data;
    o.txns = 400;
    o.sessions = 6;
    o.keys = 20 + seed * 7;
    if (c.data == DataModel::kList) o.max_appends_per_key = 8;
    for (Fault f : sim::kAllFaults) {
      if (c.data == DataModel::kList && f == Fault::kIntermediateRead) continue;  // kv only
      o.faults.push_back({f, 0.03, /*from_txn=*/seed * 10});
    }
    auto sim = sim::Simulate(o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    std::optional<History> with_bytes;
    if (c.bytes) {
      absl::StatusOr<History> converted = formats::WithByteValues(sim->history);
      ASSERT_TRUE(converted.ok()) << converted.status();
      with_bytes = *std::move(converted);
    }
    const History& h = c.bytes ? *with_bytes : sim->history;
    auto schedule = sim::BuildDeliverySchedule(
        h, {.mean_ms = 50, .sigma_ms = 20, .batch = 16, .seed = seed, .rate_tps = 2000});
    const auto batches = Batches(h, schedule, c.streams);
    const std::vector<store::ViolationRecord> live =
        RunLive(batches, c.level, c.budget, 0, 0, c.spill_retention);
    std::set<std::string> live_ids;
    for (const auto& r : live) {
      EXPECT_TRUE(live_ids.insert(r.id).second) << "reported twice: " << r.json;
      EXPECT_EQ(r.level, verdict::IsolationLevelName(c.level));
      EXPECT_FALSE(r.streams.empty());
      EXPECT_EQ(r.json.front(), '{');
    }
    const std::map<std::string, std::string> offline = Offline(h, c.level);
    for (const auto& r : live) {
      EXPECT_TRUE(offline.contains(r.id)) << "seed " << seed << ": not found offline: " << r.json;
    }
    for (const auto& [id, json] : offline) {
      EXPECT_TRUE(live_ids.contains(id)) << "seed " << seed << ": not found online: " << json;
    }
    total += offline.size();
    // The same batches again, as after a restart: the same violations with the same ids.
    std::set<std::string> again;
    for (const auto& r : RunLive(batches, c.level, c.budget, 0, 0, c.spill_retention))
      again.insert(r.id);
    EXPECT_EQ(again, live_ids);
    // And with the checker saved and restored every few batches: each once, the same ids.
    for (size_t every : {3, 11}) {
      std::set<std::string> restored;
      for (const auto& r : RunLive(batches, c.level, c.budget, every, 0, c.spill_retention)) {
        EXPECT_TRUE(restored.insert(r.id).second)
            << "seed " << seed << " checkpoints every " << every << ": reported twice: " << r.json;
      }
      EXPECT_EQ(restored, live_ids) << "seed " << seed << " checkpoints every " << every;
    }
    // And with transaction ids that pass 2^32 during the run, as a daemon's do after some
    // billions of transactions; with and without checkpoints.
    constexpr uint64_t kNear32 = (uint64_t{1} << 32) - 150;
    for (size_t every : {0, 11}) {
      std::set<std::string> shifted;
      for (const auto& r : RunLive(batches, c.level, c.budget, every, kNear32, c.spill_retention)) {
        EXPECT_TRUE(shifted.insert(r.id).second)
            << "seed " << seed << " ids from 2^32 - 150: reported twice: " << r.json;
      }
      EXPECT_EQ(shifted, live_ids) << "seed " << seed << " ids from 2^32 - 150, every " << every;
    }
  }
  EXPECT_GT(total, 0u) << "the faults produced no violation: the comparison proves nothing";
}

INSTANTIATE_TEST_SUITE_P(
    Configs, LiveCheckerTest,
    ::testing::Values(
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, 1},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, 3},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kList, 2},
        Config{IsolationLevel::kSerializable, DataModel::kKeyValue, 3},
        Config{IsolationLevel::kSerializable, DataModel::kList, 2},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, 3, true},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kList, 2, true},
        Config{IsolationLevel::kSerializable, DataModel::kKeyValue, 2, true},
        Config{IsolationLevel::kSerializable, DataModel::kList, 1, true},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, 2, true, true},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kList, 2, true, true},
        Config{IsolationLevel::kSerializable, DataModel::kKeyValue, 3, true, true},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, 2, true, true, 100},
        Config{IsolationLevel::kSnapshotIsolation, DataModel::kList, 1, true, true, 100}),
    [](const ::testing::TestParamInfo<Config>& p) {
      return fmt::format("{}_{}_{}streams{}{}{}", verdict::IsolationLevelName(p.param.level),
                         p.param.data == DataModel::kList ? "list" : "kv", p.param.streams,
                         p.param.budget ? "_budget" : "", p.param.bytes ? "_bytes" : "",
                         p.param.spill_retention > 0 ? "_pruned" : "");
    });

// A simulated history with every fault (3 % each from transaction 20) over 6 sessions, the
// batches of 2 streams delivering it (mean delay 50 ms, σ 20 ms, 2,000 transactions/s, `batch`
// transactions a batch), and Chronos's violations at SI, which must not be none.
struct FaultyRun {
  sim::SimResult sim;
  std::vector<v1::IngestBatch> batches;
  std::map<std::string, std::string> offline;
};
FaultyRun MakeFaultyRun(sim::WorkloadOptions o, uint32_t batch) {
  o.sessions = 6;
  for (Fault f : sim::kAllFaults) o.faults.push_back({f, 0.03, /*from_txn=*/20});
  auto simulated = sim::Simulate(o);
  EXPECT_TRUE(simulated.ok()) << simulated.status();
  FaultyRun run{.sim = *std::move(simulated)};
  const History& h = run.sim.history;
  auto schedule = sim::BuildDeliverySchedule(
      h, {.mean_ms = 50, .sigma_ms = 20, .batch = batch, .seed = o.seed, .rate_tps = 2000});
  run.batches = Batches(h, schedule, 2);
  run.offline = Offline(h, IsolationLevel::kSnapshotIsolation);
  EXPECT_FALSE(run.offline.empty());
  return run;
}

// A daemon restarted from a checkpoint after 2^61 transactions holds memory for the transactions
// it holds, not for every id below them; and it checks as well as one that started at 0.
TEST(LiveChecker, RestoresAfterMoreTransactionsThanMemoryHoldsBits) {
  const FaultyRun run = MakeFaultyRun({.txns = 400, .keys = 25, .seed = 2}, 16);
  ASSERT_FALSE(run.offline.empty());
  const auto& batches = run.batches;
  const auto& offline = run.offline;
  for (const bool budget : {false, true}) {
    std::set<std::string> ids;
    for (const auto& r :
         RunLive(batches, IsolationLevel::kSnapshotIsolation, budget, 0, uint64_t{1} << 61)) {
      ids.insert(r.id);
    }
    std::set<std::string> expected;
    for (const auto& [id, json] : offline) expected.insert(id);
    EXPECT_EQ(ids, expected) << "budget " << budget;
  }
}

// A stream that keeps touching keys it has not touched for long (3,000 keys drawn uniformly):
// under a budget, keys go cold and are evicted, the live history forgets them, and their ids
// name other keys. A forgotten key that comes back is found in the spill by its name and
// checked as if it had stayed: exactly Chronos's violations, with checkpoints or without.
TEST(LiveChecker, ForgottenKeysComeBackFromTheSpill) {
  sim::WorkloadOptions o;
  o.seed = 5;
  o.txns = 6000;
  o.keys = 20000;  // zipfian: the hot keys stay, the others come and go
  const FaultyRun run = MakeFaultyRun(o, 4);
  std::set<std::string> expected;
  for (const auto& [id, json] : run.offline) expected.insert(id);
  const size_t distinct = run.sim.history.key_count();
  for (const size_t every : {0, 500}) {
    LiveRunStats stats;
    std::set<std::string> ids;
    for (const auto& r :
         RunLive(run.batches, IsolationLevel::kSnapshotIsolation, true, every, 0, 0, &stats)) {
      EXPECT_TRUE(ids.insert(r.id).second) << "reported twice: " << r.json;
    }
    EXPECT_EQ(ids, expected) << "checkpoints every " << every;
    // Ids were handed out again: fewer than the keys of the stream.
    EXPECT_LT(stats.key_count, distinct) << "checkpoints every " << every;
    // Every check was made: no forgotten key came back without what it held.
    EXPECT_EQ(stats.horizon_misses, 0u) << "checkpoints every " << every;
    EXPECT_GT(stats.keys_forgotten, 0u) << "checkpoints every " << every;
    EXPECT_GT(stats.forgotten_returns, 0u)
        << "checkpoints every " << every << ": no forgotten key came back: nothing was tested";
    EXPECT_GT(stats.new_key_lookups, 0u) << "checkpoints every " << every;
  }
}

// A checkpoint whose spill snapshot is of the earlier format (keys named by KeyId: written here
// by renaming a snapshot of the current format back, with RocksDB directly) restores: the live
// checker renames the spill from the restored history before the engine reads it, and the run
// goes on to exactly Chronos's violations, with no check left unjudged.
TEST(LiveChecker, RestoresASpillSnapshotOfTheEarlierFormat) {
  sim::WorkloadOptions o;
  o.seed = 5;
  o.txns = 3000;
  o.keys = 3000;  // most keys written once or twice: idle, then evicted
  o.dist = workload::Distribution::kUniform;
  const FaultyRun run = MakeFaultyRun(o, 4);
  ASSERT_FALSE(run.offline.empty());
  const auto& batches = run.batches;
  const auto& offline = run.offline;

  const std::filesystem::path base =
      std::filesystem::path(::testing::TempDir()) / fmt::format("live_legacy_spill_{}", getpid());
  std::filesystem::remove_all(base);
  common::ManualClock clock;
  LiveOptions options{.engine = {.level = IsolationLevel::kSnapshotIsolation, .clock = &clock}};
  options.engine.memory_budget = 1;
  options.history.min_release = 16;
  auto spill = engine::RocksVersionSpill::Open((base / "spill").string());
  ASSERT_TRUE(spill.ok()) << spill.status();
  options.engine.spill = spill->get();
  auto live = std::make_unique<LiveChecker>(options);
  std::set<std::string> ids;
  int64_t now = 1000;
  const size_t half = batches.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    EXPECT_TRUE(live->Apply(batches[i], All(batches[i])).empty());
    for (const auto& r : live->TakeViolations(++now)) ids.insert(r.id);
  }
  ASSERT_GT(live->stats().evicted_keys, 0u)
      << live->stats().resident_keys << " resident; " << live->stats().spilled_versions
      << " spilled; " << live->history_stats().releases << " releases; "
      << live->stats().memory_bytes;
  v1::LiveCheckpoint saved;
  ASSERT_TRUE(live->SaveCheckpoint(&saved).ok());
  ASSERT_TRUE((*spill)->Snapshot((base / "snapshot").string()).ok());
  live.reset();
  spill->reset();

  // The snapshot, renamed back to the earlier format: every key name replaced by the id the
  // saved history gives it, and no format record.
  history::HistoryBuilder restored;
  ASSERT_TRUE(restored.RestoreLive(saved.history()).ok());
  const History& rh = restored.live_history();
  auto id_of = [&rh](std::string_view name) {
    EXPECT_EQ(name.size(), 9u);
    EXPECT_EQ(name[0], '\0');
    uint64_t raw = 0;
    for (size_t i = 1; i < 9; ++i) raw = (raw << 8) | static_cast<uint8_t>(name[i]);
    const KeyId id = rh.FindIntKey(static_cast<int64_t>(raw ^ (uint64_t{1} << 63)));
    EXPECT_TRUE(id.valid());
    return id;
  };
  size_t renamed = 0;
  {
    rocksdb::Options ro;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(ro, (base / "snapshot").string(),
                                  {{rocksdb::kDefaultColumnFamilyName, ro}, {"keys", ro}}, &handles,
                                  &raw)
                    .ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    for (size_t f = 0; f < handles.size(); ++f) {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator({}, handles[f]));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string key = it->key().ToString();
        ASSERT_TRUE(db->Delete({}, handles[f], key).ok());
        if (f == 1 && key == engine::spill_format::kFormatKey) continue;
        std::string legacy;
        if (f == 0) {
          std::string_view name;
          engine::internal::OrderKey at;
          ASSERT_TRUE(engine::spill_format::DecodeKey(key, &name, &at));
          legacy = engine::spill_format::EncodeKeyIdKey(id_of(name), at);
        } else {
          legacy = engine::spill_format::EncodeKeyId(id_of(key));
        }
        ASSERT_TRUE(db->Put({}, handles[f], legacy, it->value()).ok());
        ++renamed;
      }
    }
    ASSERT_TRUE(db->Flush({}, handles).ok());
    for (rocksdb::ColumnFamilyHandle* hd : handles)
      ASSERT_TRUE(db->DestroyColumnFamilyHandle(hd).ok());
  }
  ASSERT_GT(renamed, 0u);

  spill = engine::RocksVersionSpill::OpenFromSnapshot((base / "spill").string(),
                                                      (base / "snapshot").string());
  ASSERT_TRUE(spill.ok()) << spill.status();
  ASSERT_TRUE((*spill)->named_by_key_id());
  options.engine.spill = spill->get();
  live = std::make_unique<LiveChecker>(options);
  const absl::Status r = live->RestoreCheckpoint(saved, now);
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_FALSE((*spill)->named_by_key_id());
  for (size_t i = half; i < batches.size(); ++i) {
    EXPECT_TRUE(live->Apply(batches[i], All(batches[i])).empty());
    for (const auto& v : live->TakeViolations(++now)) ids.insert(v.id);
  }
  EXPECT_GT(live->stats().restored_keys, 0u);
  EXPECT_EQ(live->stats().horizon_misses, 0u);
  std::set<std::string> expected;
  for (const auto& [id, json] : offline) expected.insert(id);
  EXPECT_EQ(ids, expected);
  live.reset();
  spill->reset();
  std::filesystem::remove_all(base);
}

// What a plug-in checker is given in a window: every transaction with its operations and values,
// and the initial state of every key, as text (not pool indices).
std::string RenderWindow(const windows::Window& w) {
  const History& h = w.history;
  std::string out = fmt::format("window {}:", w.scope.index);
  for (uint64_t i = 0; i < h.size(); ++i) {
    out += fmt::format(" | {}", h.TxnLabel(TxnId(i)));
    for (const history::Op& op : h.ops(TxnId(i))) {
      out += fmt::format(" {}{}=", history::OpKindName(op.kind()), h.KeyToString(op.key()));
      out += op.kind() == history::OpKind::kListRead ? h.ListToString(h.list_elements(op))
                                                     : h.ValueToString(op.value());
    }
  }
  for (uint32_t k = 0; k < h.key_count(); ++k) {
    const KeyId key(k);
    out += fmt::format(" | initial {}={}", h.KeyToString(key),
                       h.key(key).is_list ? h.ListToString(h.InitialList(key))
                                          : h.ValueToString(h.InitialValue(key)));
  }
  return out;
}

// Windows cut while the live history forgets byte values (the cutter keeps the values it holds
// for later windows) are the windows cut without a budget, value for value; and so are those cut
// by checkers saved and restored from a checkpoint every few batches (the cutter saved with them).
TEST(LiveChecker, WindowsAreTheSameWhileByteValuesAreForgotten) {
  for (const DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    sim::WorkloadOptions o;
    o.seed = 3;
    o.data = data;
    o.txns = 600;
    o.keys = 40;
    if (data == DataModel::kList) o.max_appends_per_key = 8;
    o.faults.push_back({Fault::kLostUpdate, 0.05, 100});
    auto sim = sim::Simulate(o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    absl::StatusOr<History> h = formats::WithByteValues(sim->history);
    ASSERT_TRUE(h.ok()) << h.status();
    const auto schedule = sim::BuildDeliverySchedule(
        *h, {.mean_ms = 50, .sigma_ms = 20, .batch = 16, .seed = 3, .rate_tps = 2000});
    const auto batches = Batches(*h, schedule, 2);
    auto run = [&](bool budget, size_t checkpoint_every) {
      common::ManualClock clock;
      engine::MemoryVersionSpill spill;
      LiveOptions options{.engine = {.clock = &clock}};
      options.windows = windows::WindowOptions{.transactions = 50, .overlap = 10};
      if (budget) {
        options.engine.spill = &spill;
        options.engine.memory_budget = 1;
        options.history.min_release = 16;
        options.history.min_bytes_collect = 0;
      }
      auto live = std::make_unique<LiveChecker>(options);
      std::vector<std::string> out;
      uint64_t forgotten = 0;
      size_t restores = 0;
      for (size_t i = 0; i < batches.size(); ++i) {
        const v1::IngestBatch& b = batches[i];
        EXPECT_TRUE(live->Apply(b, All(b)).empty());
        for (const windows::Window& w : live->TakeSealedWindows()) out.push_back(RenderWindow(w));
        if (checkpoint_every > 0 && (i + 1) % checkpoint_every == 0) {
          live->TakeViolations(0);
          forgotten += live->history_stats().bytes_forgotten;
          v1::LiveCheckpoint saved;
          const absl::Status st = live->SaveCheckpoint(&saved);
          EXPECT_TRUE(st.ok()) << st;
          EXPECT_TRUE(saved.has_cutter());
          live = std::make_unique<LiveChecker>(options);
          v1::LiveCheckpoint parsed;
          EXPECT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
          const absl::Status r = live->RestoreCheckpoint(parsed, 0);
          EXPECT_TRUE(r.ok()) << r;
          ++restores;
        }
      }
      if (budget) {
        EXPECT_GT(forgotten + live->history_stats().bytes_forgotten, 0u);
      }
      if (checkpoint_every > 0) {
        EXPECT_GT(restores, 5u);
      }
      return out;
    };
    const std::vector<std::string> unbounded = run(false, 0);
    EXPECT_GT(unbounded.size(), 5u);
    EXPECT_EQ(run(true, 0), unbounded);
    EXPECT_EQ(run(true, 3), unbounded);
    EXPECT_EQ(run(false, 5), unbounded);
  }
}

}  // namespace
}  // namespace isowatch::monitor
