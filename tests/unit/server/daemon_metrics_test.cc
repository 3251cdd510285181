// SPDX-License-Identifier: Apache-2.0
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/common/check.h"
#include "isowatch/server/metrics.h"

namespace isowatch::server {
namespace {

using ::testing::HasSubstr;

TEST(DaemonMetricsTest, RemoveStreamDropsItsSeries) {
  DaemonMetrics metrics("v");
  metrics.IngestedTransactions("gone").Increment();
  metrics.StreamLagSeconds("gone").Set(3);
  metrics.IngestedTransactions("kept").Increment();
  metrics.RemoveStream("gone");
  std::string text = metrics.Serialize();
  EXPECT_THAT(text, ::testing::Not(HasSubstr("stream=\"gone\"")));
  EXPECT_THAT(text, HasSubstr("isowatch_ingested_transactions_total{stream=\"kept\"} 1"));
}

// The value of an unlabelled counter or gauge in a scrape.
double ScrapedValue(const std::string& text, const std::string& name) {
  const auto pos = text.find("\n" + name + " ");
  if (pos == std::string::npos) return -1;
  return std::stod(text.substr(pos + name.size() + 2));
}

TEST(DaemonMetricsTest, InternalBugsCountWhatTheProcessCaughtOnce) {
  DaemonMetrics metrics("v");
  metrics.internal_bugs().Increment();
  const double start = ScrapedValue(metrics.Serialize(), "isowatch_internal_bugs_total");
  ASSERT_GE(start, 1.0);
  common::AddInternalBugsForTest(3);
  EXPECT_EQ(ScrapedValue(metrics.Serialize(), "isowatch_internal_bugs_total"), start + 3);
  // A second scrape adds nothing new.
  EXPECT_EQ(ScrapedValue(metrics.Serialize(), "isowatch_internal_bugs_total"), start + 3);
}

TEST(DaemonMetricsTest, ResidentMemoryIsReadAtScrapeTime) {
  DaemonMetrics metrics("v");
  std::string text = metrics.Serialize();
  // A running process has a resident set of more than a page.
  auto pos = text.find("\nprocess_resident_memory_bytes ");
  ASSERT_NE(pos, std::string::npos) << text;
  double value = std::stod(text.substr(pos + 31));
  EXPECT_GT(value, 4096.0);
}

}  // namespace
}  // namespace isowatch::server
