// SPDX-License-Identifier: Apache-2.0
// The daemon's metric export on its own (monitor::MetricsExporter): running totals are exported
// as their growth, each once, and kept across restarts through the store; every label value
// exists from the start; a stream's lag is the age of its watermark; the status says what the
// options say of the daemon.
#include "isowatch/monitor/metrics_exporter.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/common/clock.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/monitor/monitor_options.h"
#include "isowatch/server/metrics.h"
#include "isowatch/store/store.h"

#include "tests/testing/temp_dir.h"

namespace isowatch::monitor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MetricsExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.Path().empty());
    auto store = store::Store::Open(dir_.Path(), {.sync_writes = false});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    options_.version = "1.2.3";
    options_.live.engine.clock = &clock_;
    live_ = std::make_unique<LiveChecker>(options_.live);
    exporter_ = std::make_unique<MetricsExporter>(store_.get(), &metrics_, options_, 1000);
  }
  void TearDown() override {
    exporter_.reset();
    store_.reset();
  }

  // Applies batch `seq` of stream "s": one writer, transaction `seq`, and the watermark; with
  // `clock`, a header whose metadata says the timestamps are that clock.
  void Apply(uint64_t seq, int64_t watermark, std::string clock = "") {
    v1::IngestBatch b;
    b.set_stream("s");
    if (!clock.empty()) (*b.mutable_header()->mutable_metadata())["timestamp_clock"] = clock;
    b.set_seq(seq);
    v1::Transaction* t = b.add_txns();
    t->set_id_int(static_cast<int64_t>(seq));
    t->set_session_int(1);
    t->set_status(v1::Transaction::COMMITTED);
    t->mutable_start()->set_physical(static_cast<int64_t>(10 * seq));
    t->mutable_commit()->set_physical(static_cast<int64_t>(10 * seq + 5));
    v1::Operation* op = t->add_ops();
    op->set_kind(v1::Operation::WRITE);
    op->mutable_key()->set_int_(1);
    op->mutable_value()->set_int_(static_cast<int64_t>(seq));
    b.mutable_watermark()->set_physical(watermark);
    const std::vector<uint32_t> all = {0};
    EXPECT_TRUE(live_->Apply(b, all, clock_.NowMs()).empty());
  }

  isowatch::testing::TempDir dir_{"isowatch-exporter"};
  std::unique_ptr<store::Store> store_;
  server::DaemonMetrics metrics_{"test"};
  common::ManualClock clock_{0};
  MonitorOptions options_;
  std::unique_ptr<LiveChecker> live_;
  std::unique_ptr<MetricsExporter> exporter_;
};

TEST_F(MetricsExporterTest, CountersGrowByWhatTheTotalsGrew) {
  ingest::IngestCounters counters;
  exporter_->SetIngestCounters(&counters);
  const auto reason = v1::KEY_KIND_CONFLICT;
  prometheus::Counter& refused = metrics_.RefusedTransactions(ingest::RefusalReasonName(reason));
  counters.refusals[reason] = 3;
  counters.batches_duplicate = 2;
  server::DaemonStatus status = exporter_->Refresh(0, *live_, {.late_refusals = 1});
  EXPECT_EQ(refused.Value(), 3);
  EXPECT_EQ(metrics_.duplicate_batches().Value(), 2);
  EXPECT_EQ(status.counts.refused_transactions, 4u);  // with the late one
  EXPECT_EQ(status.counts.duplicate_batches, 2u);

  // Refreshing again exports nothing new; growth is exported once.
  exporter_->Refresh(100, *live_, {});
  EXPECT_EQ(refused.Value(), 3);
  counters.refusals[reason] = 5;
  exporter_->Refresh(200, *live_, {});
  EXPECT_EQ(refused.Value(), 5);
  EXPECT_EQ(metrics_.duplicate_batches().Value(), 2);
}

// The sum of every sample of the metric family `name`.
double Total(server::DaemonMetrics& metrics, std::string_view name) {
  double total = 0;
  for (const prometheus::MetricFamily& f : metrics.registry().Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) total += m.counter.value;
  }
  return total;
}

TEST_F(MetricsExporterTest, EveryLabelValueExistsAtZeroFromTheStart) {
  ASSERT_TRUE(exporter_->Restore().ok());
  exporter_->EndRecovery(*live_, 0);
  exporter_->Refresh(0, *live_, {});
  const std::string text = metrics_.Serialize();
  for (int r = 1; r < ingest::kRefusalReasonCount; ++r) {
    const std::string reason(ingest::RefusalReasonName(static_cast<v1::RefusalReason>(r)));
    EXPECT_THAT(text, HasSubstr(fmt::format(
                          "isowatch_refused_transactions_total{{reason=\"{}\"}} 0\n", reason)));
  }
  EXPECT_THAT(text,
              HasSubstr("isowatch_refused_transactions_total{reason=\"history_conflict\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("reason=\"unspecified\"")));
  for (const char* anomaly : {"SESSION", "INT", "EXT", "NOCONFLICT"}) {
    EXPECT_THAT(
        text, HasSubstr(fmt::format(
                  "isowatch_violations_total{{anomaly=\"{}\",checker=\"online\",level=\"si\"}} 0\n",
                  anomaly)));
  }
  for (const char* counter :
       {"isowatch_watermark_regressions_total 0\n", "isowatch_refused_batches_total 0\n"}) {
    EXPECT_THAT(text, HasSubstr(counter));
  }
}

TEST_F(MetricsExporterTest, TotalsAreKeptAcrossARestart) {
  store::ViolationRecord v{.id = "v1", .checker = "online", .level = "si", .anomaly = "EXT"};
  ASSERT_TRUE(*store_->PutViolation(v));
  ASSERT_TRUE(exporter_->Restore().ok());
  exporter_->EndRecovery(*live_, 0);
  ingest::IngestCounters counters;
  exporter_->SetIngestCounters(&counters);
  counters.refusals[v1::MISSING_ID] = 4;
  counters.batches_duplicate = 2;
  counters.watermark_regressions = 1;
  server::DaemonStatus status = exporter_->Refresh(0, *live_, {.late_refusals = 3});
  EXPECT_EQ(status.counts.refused_transactions, 7u);
  EXPECT_EQ(status.counts.violations, 1u);
  EXPECT_EQ(Total(metrics_, "isowatch_violations_total"), 1);

  // A new process on the same store: the ingest counters and the live history's refusals start
  // again from 0, the metrics and the status from the totals.
  server::DaemonMetrics metrics{"test"};
  LiveChecker live(options_.live);
  MetricsExporter exporter(store_.get(), &metrics, options_, 2000);
  ASSERT_TRUE(exporter.Restore().ok());
  // The replay found the live history's refusals again: counted before the restart.
  exporter.EndRecovery(live, 3);
  ingest::IngestCounters fresh;
  exporter.SetIngestCounters(&fresh);
  status = exporter.Refresh(100, live, {.late_refusals = 3});
  EXPECT_EQ(status.counts.refused_transactions, 7u);
  EXPECT_EQ(status.counts.duplicate_batches, 2u);
  EXPECT_EQ(metrics.RefusedTransactions("missing_id").Value(), 4);
  EXPECT_EQ(metrics.RefusedTransactions("history_conflict").Value(), 3);
  EXPECT_EQ(metrics.duplicate_batches().Value(), 2);
  EXPECT_EQ(metrics.watermark_regressions().Value(), 1);
  EXPECT_EQ(Total(metrics, "isowatch_violations_total"), 1);
  EXPECT_EQ(metrics.Violations("online", "si", "EXT").Value(), 1);
  EXPECT_EQ(Total(metrics, "isowatch_refused_transactions_total"), 7);

  // What this process counts adds to them.
  fresh.refusals[v1::MISSING_ID] = 1;
  status = exporter.Refresh(200, live, {.late_refusals = 4});
  EXPECT_EQ(metrics.RefusedTransactions("missing_id").Value(), 5);
  EXPECT_EQ(metrics.RefusedTransactions("history_conflict").Value(), 4);
  EXPECT_EQ(status.counts.refused_transactions, 9u);
}

TEST_F(MetricsExporterTest, WithoutSavedTotalsTheReplayCounts) {
  // A store without totals (new, or written before they were kept): what the replay counted is
  // all there is, and is exported.
  ASSERT_TRUE(exporter_->Restore().ok());
  exporter_->EndRecovery(*live_, 2);
  const server::DaemonStatus status = exporter_->Refresh(0, *live_, {.late_refusals = 2});
  EXPECT_EQ(metrics_.RefusedTransactions("history_conflict").Value(), 2);
  EXPECT_EQ(status.counts.refused_transactions, 2u);
}

// Timestamps that are no clock (LSNs, counters): the lag is how long ago the watermark moved.
TEST_F(MetricsExporterTest, LagIsTheAgeOfTheWatermark) {
  Apply(1, 15);
  server::DaemonStatus status = exporter_->Refresh(10'000, *live_, {});
  ASSERT_EQ(status.streams.size(), 1u);
  EXPECT_EQ(status.streams[0].name, "s");
  ASSERT_TRUE(status.streams[0].lag_seconds.has_value());
  EXPECT_EQ(*status.streams[0].lag_seconds, 0.0);
  EXPECT_EQ(status.counts.ingested_transactions, 1u);

  // The watermark has not moved for 4 s.
  status = exporter_->Refresh(14'000, *live_, {});
  EXPECT_EQ(*status.streams[0].lag_seconds, 4.0);
  EXPECT_EQ(metrics_.StreamLagSeconds("s").Value(), 4.0);

  // It moves: the lag starts again.
  Apply(2, 25);
  status = exporter_->Refresh(15'000, *live_, {});
  EXPECT_EQ(*status.streams[0].lag_seconds, 0.0);
  EXPECT_EQ(status.counts.ingested_transactions, 2u);
}

TEST_F(MetricsExporterTest, LagOfAClockIsWallClockMinusTheWatermark) {
  // Watermark 10,000 ms since the epoch, at 14.5 s since the epoch.
  Apply(1, 10'000, "unix_ms");
  server::DaemonStatus status = exporter_->Refresh(14'500, *live_, {});
  ASSERT_EQ(status.streams.size(), 1u);
  ASSERT_TRUE(status.streams[0].lag_seconds.has_value());
  EXPECT_DOUBLE_EQ(*status.streams[0].lag_seconds, 4.5);
  EXPECT_DOUBLE_EQ(metrics_.StreamLagSeconds("s").Value(), 4.5);
  // It grows while the watermark stays, and drops when it moves (not to 0: to its own age).
  status = exporter_->Refresh(20'000, *live_, {});
  EXPECT_DOUBLE_EQ(*status.streams[0].lag_seconds, 10.0);
  Apply(2, 19'000);
  status = exporter_->Refresh(20'000, *live_, {});
  EXPECT_DOUBLE_EQ(*status.streams[0].lag_seconds, 1.0);
  // A watermark ahead of the daemon's clock (a skew) is no lag.
  Apply(3, 25'000);
  status = exporter_->Refresh(20'000, *live_, {});
  EXPECT_DOUBLE_EQ(*status.streams[0].lag_seconds, 0.0);
}

TEST_F(MetricsExporterTest, LagOfMicrosecondsAndSeconds) {
  Apply(1, 3, "unix_s");
  EXPECT_DOUBLE_EQ(*exporter_->Refresh(5'000, *live_, {}).streams[0].lag_seconds, 2.0);
  // A later header says microseconds (the watermarks only go up).
  Apply(2, 4'000'000, "unix_us");
  EXPECT_DOUBLE_EQ(*exporter_->Refresh(5'000, *live_, {}).streams[0].lag_seconds, 1.0);
}

TEST_F(MetricsExporterTest, StatusSaysWhatTheOptionsSay) {
  const server::DaemonStatus status = exporter_->Refresh(0, *live_, {});
  EXPECT_EQ(status.version, "1.2.3");
  EXPECT_EQ(status.start_unix_ms, 1000);
  EXPECT_EQ(status.memory.budget_bytes, 0u);
  // The store's RocksDB, and no spill.
  ASSERT_EQ(status.memory.rocksdb.size(), 1u);
  EXPECT_EQ(status.memory.rocksdb[0].db, "store");
}

}  // namespace
}  // namespace isowatch::monitor
