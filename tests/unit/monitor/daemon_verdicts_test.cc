// SPDX-License-Identifier: Apache-2.0
// isowatchd in-process, when verdicts are made: a stream's watermarks or else the finality timeout
// make them final, and the plug-in checkers check the windows it cuts, once across restarts.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "isowatch/config/config.h"
#include "isowatch/monitor/daemon.h"
#include "isowatch/store/violation_record.h"
#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"

#include "tests/unit/monitor/daemon_fixture.h"

namespace isowatch::monitor {
namespace {

// A stream that sends a watermark with its first batch finalises at its watermarks only, however
// long the wait: docs/operations.md, "Watermarks and the timeout". Here the reader of key 1 arrives
// first, the writer it read from after many timeouts, within the stream's second watermark: the
// read is right.
TEST_F(DaemonTest, StreamWithWatermarkFromItsFirstBatchIsNotFinalisedByTimeout) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.finality_timeout = std::chrono::milliseconds(200);
  ASSERT_NO_FATAL_FAILURE(Start(config, &clock_));
  const std::string s = "first-watermark";

  v1::IngestBatch first = Batch(s, 1, {Reader(2, 1, 100)});
  first.mutable_watermark()->set_physical(9);  // the writer commits at 15
  absl::StatusOr<v1::IngestAck> ack = Push(first);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_NO_FATAL_FAILURE(Tick());
  auto st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["pending_transactions"], "1");
  // Ten timeouts pass, and the engine thread ticks after them: the reader stays pending (only
  // the watermark can make it final).
  clock_.Advance(absl::Seconds(2));
  ASSERT_NO_FATAL_FAILURE(Tick());
  st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["pending_transactions"], "1");
  // The status is the one of the tick after them.
  EXPECT_EQ(std::stod((*st)["lag_seconds"]), 2.0);

  std::optional<std::vector<Seen>> seen;
  ASSERT_NO_FATAL_FAILURE(FinishWithWriter(s, &seen));
  ASSERT_TRUE(seen.has_value());
  EXPECT_TRUE(seen->empty()) << seen->front().anomaly << "/" << seen->front().ext_kind << " "
                             << seen->front().txns;
  std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_late_arrivals_total"), 0.0) << metrics;
}

// A stream that has sent no watermark yet finalises by timeout (Aion's rule): a transaction that
// arrives later than the timeout after one it should precede is a late arrival, counted, and the
// verdicts made final before it stand. Here the read of key 1 becomes final, as a read of a value
// never written, before its writer arrives.
TEST_F(DaemonTest, StreamWithoutWatermarkYetFinalisesByTimeoutAndCountsLateArrivals) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.finality_timeout = std::chrono::milliseconds(200);
  ASSERT_NO_FATAL_FAILURE(Start(config, &clock_));
  const std::string s = "no-watermark-yet";

  absl::StatusOr<v1::IngestAck> ack = Push(Batch(s, 1, {Reader(2, 1, 100)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_NO_FATAL_FAILURE(Tick());
  auto st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["pending_transactions"], "1");
  // The timeout passes: the read is final.
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_NO_FATAL_FAILURE(Tick());
  st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["ingested_transactions"], "1");
  EXPECT_EQ((*st)["pending_transactions"], "0");
  std::optional<std::vector<Seen>> seen;
  ASSERT_NO_FATAL_FAILURE(FinishWithWriter(s, &seen));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), (std::multiset<Brief>{ExtNever(2, 1)}));
  std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_late_arrivals_total"), 1.0) << metrics;
}

// A committed transaction of session `id` over [start, commit] that reads keys 1 and 2 (both
// absent) and writes `value` to `key`.
v1::Transaction SkewTxn(int64_t id, int64_t start, int64_t commit, int64_t key, int64_t value) {
  v1::Transaction t;
  t.set_id_int(id);
  t.set_session_int(id);
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_start()->set_physical(start);
  t.mutable_commit()->set_physical(commit);
  for (int64_t k : {1, 2}) {
    v1::Operation* read = t.add_ops();
    read->set_kind(v1::Operation::READ);
    read->mutable_key()->set_int_(k);
  }
  v1::Operation* write = t.add_ops();
  write->set_kind(v1::Operation::WRITE);
  write->mutable_key()->set_int_(key);
  write->mutable_value()->set_int_(value);
  return t;
}

// Windows of four transactions without overlap, checked by adya (SI and SER) and chronos (SI).
config::DaemonConfig WindowedConfig(const std::string& data_dir) {
  config::DaemonConfig config = TestConfig(data_dir);
  for (const char* assignment :
       {"windows.checkers=adya,chronos", "windows.size=4", "windows.overlap=0",
        "checkers.chronos.levels=si", "checkers.adya.levels=si,ser"}) {
    EXPECT_TRUE(config::ApplyAssignment(&config, assignment).ok()) << assignment;
  }
  return config;
}

// With windows.checkers set, the stream is cut into windows that the plug-ins check beside the
// online engine: a write skew, valid under snapshot isolation (nothing online), is adya's
// G2-item against serializability, stored with the window it was found in. A restart does not
// check a done window again, and serves the violation once.
TEST_F(DaemonTest, WindowsAreCheckedByThePluginsOnceAcrossRestarts) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = WindowedConfig(dir.Path());
  ASSERT_TRUE(config::Validate(config).ok()) << config::Validate(config);
  const std::string s = "skew";
  // Transactions 1 and 2 overlap and each writes a key the other read: a write skew.
  // Transactions 3 to 6 are harmless; the window of four closes after transaction 4.
  v1::IngestBatch first = Batch(s, 1,
                                {SkewTxn(1, 10, 20, 1, 100), SkewTxn(2, 11, 21, 2, 200),
                                 Writer(3, 3, 300), Writer(4, 4, 400)});
  v1::IngestBatch second = Batch(s, 2, {Writer(5, 5, 500), Writer(6, 6, 600)});
  second.set_end_of_stream(true);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
  ASSERT_TRUE(WindowsDone(2));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].checker, "adya");
  EXPECT_EQ((*before)[0].anomaly, "G2-item");
  EXPECT_EQ((*before)[0].txns, "[1,2]");
  auto by_adya = Violations(10, "&checker=adya");
  ASSERT_TRUE(by_adya.has_value());
  EXPECT_EQ(by_adya->size(), 1u);
  auto online = Violations(10, "&checker=online");
  ASSERT_TRUE(online.has_value());
  EXPECT_TRUE(online->empty());
  // The record names its window and every level the cycle violates.
  absl::StatusOr<store::ViolationPage> page = daemon_->monitor().Query({}, 10, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_EQ(page->violations[0].level, "ser");
  rapidjson::Document record;
  record.Parse(page->violations[0].json.c_str());
  ASSERT_FALSE(record.HasParseError()) << page->violations[0].json;
  ASSERT_TRUE(record.HasMember("window")) << page->violations[0].json;
  EXPECT_EQ(record["window"]["index"].GetUint64(), 0u);
  EXPECT_EQ(record["window"]["transactions"].GetUint64(), 4u);
  std::unique_ptr<rapidjson::Document> status = Status();
  const rapidjson::Value& windows = (*status)["windows"];
  EXPECT_TRUE(windows["enabled"].GetBool());
  EXPECT_EQ(windows["sealed"].GetUint64(), 2u);
  EXPECT_EQ(windows["dropped"].GetUint64(), 0u);
  ASSERT_EQ(windows["checkers"].Size(), 2u);
  EXPECT_STREQ(windows["checkers"][0]["name"].GetString(), "adya");
  EXPECT_EQ(windows["checkers"][0]["checked"].GetUint64(), 2u);
  EXPECT_EQ(windows["checkers"][0]["violations"].GetUint64(), 1u);
  EXPECT_EQ(windows["checkers"][1]["checked"].GetUint64(), 2u);
  EXPECT_EQ(windows["checkers"][1]["violations"].GetUint64(), 0u);
  const std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, R"(isowatch_window_checks_total{checker="adya",outcome="checked"})"),
            2.0)
      << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_windows_sealed_total"), 2.0);
  EXPECT_EQ(
      Sample(metrics, R"(isowatch_violations_total{anomaly="G2-item",checker="adya",level="ser"})"),
      1.0)
      << metrics;
  Stop();

  // After a restart the log is replayed and the windows cut again, but both are done.
  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_TRUE(WaitChecked(s));
  status = Status();
  EXPECT_EQ((*status)["windows"]["done"].GetUint64(), 2u);
  EXPECT_EQ((*status)["windows"]["sealed"].GetUint64(), 2u);
  EXPECT_EQ((*status)["windows"]["checkers"][0]["checked"].GetUint64(), 0u);
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].id, (*before)[0].id);
}

// Checkpoints are taken while windows are cut: the window cutter is saved with them, so that a
// restart from a checkpoint (its log dropped) cuts the next windows with the state the earlier
// ones left. The readers of the second window read what the first window's transactions wrote:
// with a state lost in the restart they would read values never written (chronos's EXT).
TEST_F(DaemonTest, WindowsGoOnFromACheckpointAfterARestart) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = WindowedConfig(dir.Path());
  config.store.checkpoint_interval = std::chrono::milliseconds(10);
  ASSERT_TRUE(config::Validate(config).ok()) << config::Validate(config);
  const std::string s = "windowed";
  v1::IngestBatch first = Batch(s, 1,
                                {SkewTxn(1, 10, 20, 1, 100), SkewTxn(2, 11, 21, 2, 200),
                                 Writer(3, 3, 300), Writer(4, 4, 400)});
  // Past transaction 4's commit (45): the first window is sealed.
  first.mutable_watermark()->set_physical(46);
  v1::IngestBatch second =
      Batch(s, 2, {Reader(5, 1, 100), Reader(6, 2, 200), Reader(7, 3, 300), Reader(8, 4, 400)});
  second.set_end_of_stream(true);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  absl::StatusOr<v1::IngestAck> ack = Push(first);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_TRUE(WindowsDone(1));
  // A checkpoint after the first window, and the log before it dropped: the restart below
  // starts from the checkpoint alone.
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_checkpoints_total") >= 1.0 &&
           Sample(metrics, "isowatch_store_log_batches") == 0.0;
  })) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_checkpoint_failures_total"), 0.0) << metrics;
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].anomaly, "G2-item");
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_store_log_batches"), 0.0) << metrics;
  ack = Push(second);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  ASSERT_TRUE(WaitChecked(s));
  ASSERT_TRUE(WindowsDone(2));
  std::unique_ptr<rapidjson::Document> status = Status();
  EXPECT_EQ((*status)["windows"]["sealed"].GetUint64(), 2u);
  EXPECT_EQ((*status)["windows"]["dropped"].GetUint64(), 0u);
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->size(), 1u) << (*after)[1].anomaly << " " << (*after)[1].txns;
  EXPECT_EQ((*after)[0].id, (*before)[0].id);
  absl::StatusOr<store::ViolationPage> page = daemon_->monitor().Query({}, 10, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_NE(page->violations[0].json.find(R"("window":{"index":0,)"), std::string::npos)
      << page->violations[0].json;
}

// By default a plug-in judges the level the database promises (engine.level): the write skew that
// adya calls G2-item (a violation of repeatable read and serializability) is no violation of
// snapshot isolation, so a database that promises SI is not faulted for it.
TEST_F(DaemonTest, WindowCheckersJudgeThePromisedLevelByDefault) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  ASSERT_TRUE(config::ApplyAssignment(&config, "windows.checkers=adya").ok());
  ASSERT_TRUE(config::ApplyAssignment(&config, "windows.size=4").ok());
  ASSERT_TRUE(config::ApplyAssignment(&config, "windows.overlap=0").ok());
  v1::IngestBatch batch = Batch("skew", 1,
                                {SkewTxn(1, 10, 20, 1, 100), SkewTxn(2, 11, 21, 2, 200),
                                 Writer(3, 3, 300), Writer(4, 4, 400)});
  batch.set_end_of_stream(true);
  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({batch}, "skew"));
  ASSERT_TRUE(WaitFor([&] {
    std::unique_ptr<rapidjson::Document> d = Status();
    return d->IsObject() && d->HasMember("windows") && (*d)["windows"]["done"].GetUint64() >= 1;
  }));
  std::unique_ptr<rapidjson::Document> status = Status();
  EXPECT_EQ((*status)["windows"]["checkers"][0]["checked"].GetUint64(), 1u);
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_TRUE(seen->empty());
}

}  // namespace
}  // namespace isowatch::monitor
