// SPDX-License-Identifier: Apache-2.0
// How the daemon reports violations (monitor::ViolationReporter): every one counted, whether it
// was stored in full or summarised; those stored in full logged at a bounded rate and within a
// byte budget; the summaries that grew said every interval in a bounded number of lines.
#include "isowatch/monitor/violation_reporter.h"

#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "isowatch/server/metrics.h"
#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

#include "tests/testing/fake_clock.h"
#include "tests/testing/temp_dir.h"

namespace isowatch::monitor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A NOCONFLICT violation of the online engine on `key` between transactions `a` and `b`.
store::ViolationRecord Conflict(int id, std::string key, std::string a, std::string b) {
  store::ViolationRecord r;
  r.id = fmt::format("{:016x}", id);
  r.checker = "online";
  r.level = "si";
  r.anomaly = "NOCONFLICT";
  r.streams = {"s"};
  r.json = fmt::format(R"({{"anomaly":"NOCONFLICT","txns":[{},{}],"key":{}}})", a, b, key);
  r.key = std::move(key);
  r.txns = {{.id = std::move(a), .stream = "s"}, {.id = std::move(b), .stream = "s"}};
  return r;
}

// `n` violations on key `key`, of transactions (first + i, first + i + 1).
std::vector<store::ViolationRecord> OnKey(int first, int n, const std::string& key) {
  std::vector<store::ViolationRecord> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(
        Conflict(first + i, key, std::to_string(first + i), std::to_string(first + i + 100000)));
  }
  return out;
}

size_t Lines(const std::string& text, std::string_view containing) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(containing) != line.npos;
  return n;
}

class ViolationReporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_)));
  }
  void TearDown() override {
    spdlog::set_default_logger(before_);
    reporter_.reset();
    store_.reset();
  }

  void Open(store::ViolationBounds bounds, FindingsLogOptions log) {
    auto store =
        store::Store::Open(dir_.Path(), {.sync_writes = false, .violation_bounds = bounds});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    reporter_ = std::make_unique<ViolationReporter>(store_.get(), &metrics_, &clock_, log);
  }

  uint64_t Report(const std::vector<store::ViolationRecord>& records) {
    absl::StatusOr<uint64_t> fresh = reporter_->Report(records);
    EXPECT_TRUE(fresh.ok()) << fresh.status();
    return fresh.value_or(0);
  }

  std::string Log() {
    spdlog::default_logger()->flush();
    return log_.str();
  }

  double Counted() { return metrics_.Violations("online", "si", "NOCONFLICT").Value(); }
  double Summarised() {
    return metrics_.ViolationsSummarised("online", "si", "NOCONFLICT").Value();
  }

  isowatch::testing::TempDir dir_{"isowatch-reporter"};
  isowatch::testing::FakeClock clock_;
  server::DaemonMetrics metrics_{"test"};
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> before_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ViolationReporter> reporter_;
};

TEST_F(ViolationReporterTest, CountsEveryViolationAndLogsThoseKeptInFull) {
  ASSERT_NO_FATAL_FAILURE(Open({.max_per_key = 3}, {}));
  EXPECT_EQ(Report(OnKey(0, 50, "7")), 50u);
  EXPECT_EQ(Counted(), 50);
  EXPECT_EQ(Summarised(), 47);
  // Again: found before, neither counted nor logged.
  EXPECT_EQ(Report(OnKey(0, 3, "7")), 0u);
  EXPECT_EQ(Counted(), 50);
  const std::string log = Log();
  EXPECT_EQ(Lines(log, "violation 0000000000000000 (si NOCONFLICT): {\"anomaly\""), 1u) << log;
  EXPECT_EQ(Lines(log, "violation "), 3u) << log;
  EXPECT_EQ(reporter_->log_status().logged, 3u);
  EXPECT_EQ(reporter_->log_status().unlogged, 0u);
}

TEST_F(ViolationReporterTest, SaysWhatItSummarisedEveryInterval) {
  ASSERT_NO_FATAL_FAILURE(Open({.max_per_key = 2}, {.summary_interval_ms = 60'000}));
  Report(OnKey(0, 30, "7"));
  Report(OnKey(100, 5, "8"));
  reporter_->Tick();
  EXPECT_EQ(Lines(Log(), "summarised"), 0u) << "the interval has not passed";
  clock_.Advance(absl::Seconds(60));
  reporter_->Tick();
  std::string log = Log();
  EXPECT_THAT(log, HasSubstr("28 more violations of si NOCONFLICT on key 7 summarised in the last "
                             "60 s (28 summarised in all, 2 kept in full; the last: "
                             "000000000000001d, transactions [29, 100029])"));
  EXPECT_THAT(log, HasSubstr("3 more violations of si NOCONFLICT on key 8 summarised"));
  // Said once: nothing grew since.
  clock_.Advance(absl::Seconds(60));
  reporter_->Tick();
  EXPECT_EQ(Lines(Log(), "summarised in the last"), 2u);
  Report(OnKey(200, 4, "7"));
  reporter_->Tick(/*now=*/true);
  EXPECT_THAT(Log(), HasSubstr("4 more violations of si NOCONFLICT on key 7 summarised in the last "
                               "0 s (32 summarised in all"));
}

TEST_F(ViolationReporterTest, NamesAtMostSummaryLinesSummariesAndCountsTheRest) {
  ASSERT_NO_FATAL_FAILURE(Open({.max_per_key = 1}, {.summary_lines = 3}));
  for (int k = 0; k < 8; ++k) Report(OnKey(1000 * k, 2 + k, std::to_string(k)));
  reporter_->Tick(/*now=*/true);
  const std::string log = Log();
  EXPECT_EQ(Lines(log, "more violations of si NOCONFLICT on key"), 3u) << log;
  // The largest growth first: keys 7, 6 and 5 (8, 7 and 6 summarised).
  EXPECT_THAT(log, HasSubstr("8 more violations of si NOCONFLICT on key 7"));
  EXPECT_THAT(log, HasSubstr("6 more violations of si NOCONFLICT on key 5"));
  EXPECT_THAT(log, Not(HasSubstr("on key 4 ")));
  // Keys 0 to 4: 1 + 2 + 3 + 4 + 5.
  EXPECT_THAT(log, HasSubstr("15 more violations summarised in the last 0 s in 5 other summaries"));
}

TEST_F(ViolationReporterTest, LogsAtMostTheRatePerMinuteAndCountsTheOthers) {
  ASSERT_NO_FATAL_FAILURE(Open({}, {.lines_per_minute = 5}));
  Report(OnKey(0, 12, "1"));
  EXPECT_EQ(Lines(Log(), "violation 0"), 5u);
  EXPECT_EQ(reporter_->log_status().unlogged, 7u);
  EXPECT_EQ(Counted(), 12);
  reporter_->Tick(/*now=*/true);
  EXPECT_THAT(Log(), HasSubstr("7 violations stored in full were not logged in the last 0 s "
                               "(findings.log_per_minute = 5); GET /api/v1/violations lists them"));
  // A minute later the rate allows more.
  clock_.Advance(absl::Seconds(60));
  Report(OnKey(100, 2, "2"));
  EXPECT_EQ(Lines(Log(), "violation 0"), 7u);
  EXPECT_FALSE(reporter_->log_status().budget_spent);
}

TEST_F(ViolationReporterTest, StopsLoggingInFullOnceTheBudgetIsSpent) {
  ASSERT_NO_FATAL_FAILURE(Open({}, {.lines_per_minute = 1000, .max_log_bytes = 1000}));
  Report(OnKey(0, 40, "1"));
  const FindingsLogStatus status = reporter_->log_status();
  EXPECT_TRUE(status.budget_spent);
  EXPECT_LE(status.log_bytes, 1000u);
  EXPECT_GT(status.logged, 0u);
  EXPECT_EQ(status.logged + status.unlogged, 40u);
  const std::string log = Log();
  EXPECT_EQ(Lines(log, "findings.max_log_bytes = 1000) is spent"), 1u) << log;
  // A minute later, still none.
  clock_.Advance(absl::Seconds(60));
  Report(OnKey(100, 3, "2"));
  EXPECT_EQ(reporter_->log_status().logged, status.logged);
  EXPECT_EQ(Counted(), 43);
}

TEST_F(ViolationReporterTest, SaysOnceThatTheStoreLimitIsReached) {
  ASSERT_NO_FATAL_FAILURE(Open({.max_bytes = 500}, {}));
  Report(OnKey(0, 20, "1"));
  Report(OnKey(100, 20, "2"));
  EXPECT_TRUE(store_->violation_space().limit_reached);
  EXPECT_EQ(Counted(), 40);
  EXPECT_GT(Summarised(), 0);
  const std::string log = Log();
  EXPECT_EQ(Lines(log, "the store's limit for violations (findings.max_store_bytes) is reached"),
            1u)
      << log;
  reporter_->Tick(/*now=*/true);
  EXPECT_THAT(Log(), HasSubstr("of si NOCONFLICT past the store's limit"));
}

}  // namespace
}  // namespace isowatch::monitor
