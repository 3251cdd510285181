// SPDX-License-Identifier: Apache-2.0
// isowatchd in-process under a memory budget: versions and cold keys go to the spill and come back,
// checkpoints drop the log, and a restart from either finds the same violations.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "isowatch/config/config.h"
#include "isowatch/monitor/daemon.h"
#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"

#include "tests/unit/monitor/daemon_fixture.h"

namespace isowatch::monitor {
namespace {

// `t` moved to the interval [start, commit].
v1::Transaction At(v1::Transaction t, int64_t start, int64_t commit) {
  t.mutable_start()->set_physical(start);
  t.mutable_commit()->set_physical(commit);
  return t;
}

// With a memory budget every collection is cut at the final point: a later transaction whose
// snapshot lies below what memory keeps is checked against the versions in <data_dir>/spill,
// the same as with everything in memory, and after a restart (the spill is rebuilt from the
// log) the violations are the same, once each.
TEST_F(DaemonTest, MemoryBudgetSpillsAndReloadsVersions) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.memory_budget = 1;  // always over: everything at or below F leaves memory
  config.engine.retention = 20;     // transactions may start 20 below the final point
  const std::string s = "budget";
  v1::IngestBatch first = Batch(s, 1,
                                {At(Writer(1, 1, 100), 10, 15), At(Writer(2, 1, 200), 20, 25),
                                 At(Writer(3, 1, 300), 30, 35)});
  first.mutable_watermark()->set_physical(35);
  // Both start at 22, when 100 (committed at 15) was the newest value; 200 came at 25.
  v1::IngestBatch second =
      Batch(s, 2, {At(Reader(4, 1, 200), 22, 45), At(Reader(5, 1, 100), 22, 46)});
  second.mutable_watermark()->set_physical(46);
  second.set_end_of_stream(true);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].anomaly, "EXT");
  EXPECT_EQ((*before)[0].txns, "[4,2]");
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_engine_spill_reloads_total") >= 2.0;
  })) << metrics;
  EXPECT_GE(Sample(metrics, "isowatch_engine_spilled_versions_total"), 2.0) << metrics;
  EXPECT_GE(Sample(metrics, "isowatch_engine_budget_collections_total"), 1.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_engine_spill_errors_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_horizon_misses_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_engine_memory_budget_bytes"), 1.0) << metrics;
  // Each reload is timed at once; the counter follows at the next refresh.
  EXPECT_GE(Sample(metrics, "isowatch_engine_spill_reload_seconds_count"),
            Sample(metrics, "isowatch_engine_spill_reloads_total"))
      << metrics;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir.Path()) / "spill"));
  // RocksDB's memory: both databases hold what was written in their memtables.
  EXPECT_GT(Sample(metrics, R"(isowatch_rocksdb_memory_bytes{db="store",kind="memtables"})"), 0.0)
      << metrics;
  EXPECT_GT(Sample(metrics, R"(isowatch_rocksdb_memory_bytes{db="spill",kind="memtables"})"), 0.0)
      << metrics;
  std::unique_ptr<rapidjson::Document> status = Status();
  ASSERT_TRUE(status->IsObject() && status->HasMember("memory"));
  const rapidjson::Value& memory = (*status)["memory"];
  ASSERT_TRUE(memory.HasMember("rocksdb_bytes") && memory.HasMember("rocksdb"));
  EXPECT_GT(memory["rocksdb_bytes"].GetUint64(), 0u);
  EXPECT_TRUE(memory["rocksdb"].HasMember("store"));
  EXPECT_TRUE(memory["rocksdb"].HasMember("spill"));
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(Summary(*after), Summary(*before));
}

// Under a memory budget, keys that stay idle give their last version to the spill: reads of
// them are checked against it (right and wrong ones alike), the count shows in the metrics, and
// a restart (which rebuilds engine and spill from the log) finds the same violations.
TEST_F(DaemonTest, MemoryBudgetEvictsColdKeys) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.memory_budget = 1;  // always over
  const std::string s = "evict";
  // Key k is written at 10k + 5; each batch passes a watermark, and the keys then stay idle for
  // the many advances of the final point that follow.
  constexpr int kKeys = 80;
  std::vector<v1::IngestBatch> batches;
  for (int k = 1; k <= kKeys; ++k) {
    v1::IngestBatch b =
        Batch(s, static_cast<uint64_t>(k), {At(Writer(k, k, 100 * k), 10 * k, 10 * k + 5)});
    b.mutable_watermark()->set_physical(10 * k + 5);
    batches.push_back(std::move(b));
  }
  // Reads of the first keys long after: key 1 as written, key 2 with a value nobody wrote.
  v1::IngestBatch last = Batch(s, kKeys + 1,
                               {At(Reader(1001, 1, 100), 10 * kKeys + 10, 10 * kKeys + 11),
                                At(Reader(1002, 2, 999), 10 * kKeys + 10, 10 * kKeys + 12)});
  last.set_end_of_stream(true);
  batches.push_back(last);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  for (const v1::IngestBatch& b : batches) {
    absl::StatusOr<v1::IngestAck> ack = Push(b);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->refusals_size(), 0);
  }
  ASSERT_TRUE(WaitChecked(s));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].anomaly, "EXT");
  EXPECT_EQ((*before)[0].txns, "[1002]");  // 999 was never written
  // Each key's state is either in memory or evicted with its version (checked on a scrape taken
  // between two updates of the metrics, which a scrape taken during one could miss).
  auto states = [](const std::string& text) {
    return Sample(text, "isowatch_engine_resident_keys").value_or(0) +
           Sample(text, "isowatch_engine_evicted_keys_total").value_or(0) -
           Sample(text, "isowatch_engine_restored_keys_total").value_or(0);
  };
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_engine_evicted_keys_total") >= 1.0 &&
           Sample(metrics, "isowatch_engine_spill_reloads_total") >= 2.0 &&
           Sample(metrics, "isowatch_engine_restored_keys_total") >= 2.0 &&
           states(metrics) == kKeys;
  })) << metrics;
  EXPECT_EQ(states(metrics), kKeys) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_horizon_misses_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_engine_spill_errors_total"), 0.0) << metrics;
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(Summary(*after), Summary(*before));
}

// Checkpoints drop the log, and a daemon restarted from one goes on as if it had never stopped:
// a read left pending at the checkpoint is judged after the restart, and a writer that arrives
// after it is checked against one long evicted before it. The same batches, pushed to a daemon
// without checkpoints that is never stopped, give the same violations with the same ids.
TEST_F(DaemonTest, CheckpointsDropTheLogAndARestartGoesOn) {
  const std::string s = "checkpointed";
  std::vector<v1::IngestBatch> before_stop;
  v1::IngestBatch b1 = Batch(s, 1,
                             {At(Writer(1, 1, 100), 10, 15), At(Writer(2, 2, 200), 20, 25),
                              At(Writer(3, 3, 300), 30, 35)});
  b1.mutable_watermark()->set_physical(35);
  v1::IngestBatch b2 = Batch(s, 2, {At(Reader(4, 1, 100), 40, 45)});
  b2.mutable_watermark()->set_physical(45);
  // No watermark: the wrong read of key 2 is still pending when the daemon stops.
  const v1::IngestBatch b3 = Batch(s, 3, {At(Reader(5, 2, 999), 50, 55)});
  // After the restart: a writer of key 3 that started before transaction 3 committed.
  v1::IngestBatch b4 = Batch(s, 4, {At(Writer(6, 3, 600), 33, 65)});
  b4.mutable_watermark()->set_physical(65);
  b4.set_end_of_stream(true);

  TempDir plain_dir;
  ASSERT_FALSE(plain_dir.Path().empty());
  config::DaemonConfig plain = TestConfig(plain_dir.Path());
  plain.engine.memory_budget = 1;
  plain.store.checkpoint_interval = std::chrono::milliseconds(0);
  ASSERT_NO_FATAL_FAILURE(Start(plain));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({b1, b2, b3, b4}, s));
  auto want = Violations();
  ASSERT_TRUE(want.has_value());
  std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_checkpoints_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_store_log_batches"), 4.0) << metrics;
  Stop();
  const std::multiset<Brief> expected = Summary(*want);
  ASSERT_EQ(expected.size(), 2u);  // EXT of 5, NoConflict of 3 and 6

  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.memory_budget = 1;
  config.store.checkpoint_interval = std::chrono::milliseconds(10);
  ASSERT_NO_FATAL_FAILURE(Start(config));
  for (const v1::IngestBatch& b : {b1, b2, b3}) {
    absl::StatusOr<v1::IngestAck> ack = Push(b);
    ASSERT_TRUE(ack.ok()) << ack.status();
  }
  // Checkpoints were taken and the log before the last one dropped.
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_checkpoints_total") >= 1.0 &&
           Sample(metrics, "isowatch_store_log_batches") == 0.0;
  })) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_checkpoint_failures_total"), 0.0) << metrics;
  EXPECT_GT(Sample(metrics, "isowatch_checkpoint_bytes").value_or(0), 0.0) << metrics;
  Stop();
  // One spill snapshot is kept, the one of the last checkpoint.
  size_t snapshots = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.Path())) {
    if (e.path().filename().string().starts_with("spill-checkpoint-")) ++snapshots;
  }
  EXPECT_EQ(snapshots, 1u);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_store_log_batches"), 0.0) << metrics;
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({b4}, s));
  auto got = Violations();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(Summary(*got), expected);
  std::set<std::string> want_ids, got_ids;
  for (const Seen& v : *want) want_ids.insert(v.id);
  for (const Seen& v : *got) got_ids.insert(v.id);
  EXPECT_EQ(got_ids, want_ids);
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "6");
  EXPECT_EQ((*stream)["acked_sequence"], "4");
  metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_horizon_misses_total"), 0.0) << metrics;
}

// engine.spill_retention reaches the engine: a transaction that starts far below the final
// point, whose snapshot the spill could have answered, is a horizon miss once the spill may
// have pruned it, and is reloaded (and found right) when the spill keeps everything.
TEST_F(DaemonTest, SpillRetentionPrunesOldSnapshots) {
  for (int64_t spill_retention : {0, 5}) {
    SCOPED_TRACE(spill_retention);
    TempDir dir;
    ASSERT_FALSE(dir.Path().empty());
    config::DaemonConfig config = TestConfig(dir.Path());
    config.engine.memory_budget = 1;
    config.engine.spill_collected = true;
    config.engine.spill_retention = spill_retention;
    const std::string s = "pruned";
    v1::IngestBatch first = Batch(s, 1,
                                  {At(Writer(1, 1, 100), 10, 15), At(Writer(2, 1, 200), 20, 25),
                                   At(Writer(3, 1, 300), 30, 35), At(Writer(4, 1, 400), 40, 45)});
    first.mutable_watermark()->set_physical(45);
    // Starts at 16, when 100 was the newest value: right, if anything can tell.
    v1::IngestBatch second = Batch(s, 2, {At(Reader(5, 1, 100), 16, 50)});
    second.mutable_watermark()->set_physical(50);
    second.set_end_of_stream(true);
    ASSERT_NO_FATAL_FAILURE(Start(config));
    ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
    auto seen = Violations();
    ASSERT_TRUE(seen.has_value());
    EXPECT_TRUE(seen->empty());
    std::string metrics;
    const char* outcome = spill_retention == 0 ? "isowatch_engine_spill_reloads_total"
                                               : "isowatch_horizon_misses_total";
    EXPECT_TRUE(WaitFor([&] {
      metrics = Metrics();
      return Sample(metrics, outcome) >= 1.0;
    })) << metrics;
    const char* other = spill_retention == 0 ? "isowatch_horizon_misses_total"
                                             : "isowatch_engine_spill_reloads_total";
    EXPECT_EQ(Sample(metrics, other), 0.0) << metrics;
    EXPECT_EQ(Sample(metrics, "isowatch_engine_spill_errors_total"), 0.0) << metrics;
    Stop();
  }
}

}  // namespace
}  // namespace isowatch::monitor
