// SPDX-License-Identifier: Apache-2.0
// Violations in the store: one put twice is stored once, and queries filter by level, anomaly,
// stream and time and page through every record exactly once.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

#include "tests/unit/store/store_fixture.h"

namespace isowatch::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Ids(const std::vector<ViolationRecord>& records) {
  std::vector<std::string> ids;
  ids.reserve(records.size());
  for (const ViolationRecord& r : records) ids.push_back(r.id);
  return ids;
}

TEST_F(StoreTest, AViolationPutTwiceIsStoredOnce) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto first = store->PutViolation(Violation("id-1", "si", "EXT", {"a"}, 10));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  // Found again (a re-fed batch): same id, not stored again, even with other contents.
  auto again = store->PutViolation(Violation("id-1", "si", "EXT", {"a"}, 99));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(store->CountViolations(), 1u);
  auto page = store->QueryViolations({}, 10, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_EQ(page->violations[0].finalised_unix_ms, 10);
  EXPECT_EQ(store->PutViolation(Violation("", "si", "EXT", {}, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class StoreQueryTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store_ = OpenOrDie(dir_);
    ASSERT_NE(store_, nullptr);
    // 30 violations: level alternates, anomaly cycles through three kinds, streams vary.
    const char* anomalies[] = {"EXT", "SESSION", "NOCONFLICT"};
    for (int i = 0; i < 30; ++i) {
      std::vector<std::string> streams = {fmt::format("s{}", i % 4)};
      if (i % 5 == 0) streams.push_back("shared");
      ViolationRecord v = Violation(fmt::format("v{:02}", i), i % 2 == 0 ? "si" : "ser",
                                    anomalies[i % 3], streams, 1000 + 10 * i);
      all_.push_back(v);
      ASSERT_TRUE(*store_->PutViolation(v));
    }
  }

  std::vector<std::string> Expected(const std::function<bool(const ViolationRecord&)>& pred) {
    std::vector<std::string> ids;
    for (const ViolationRecord& v : all_) {
      if (pred(v)) ids.push_back(v.id);
    }
    return ids;
  }

  std::unique_ptr<Store> store_;
  std::vector<ViolationRecord> all_;
};

TEST_F(StoreQueryTest, FiltersByLevelAnomalyStreamAndTime) {
  ViolationFilter f;
  f.level = "ser";
  EXPECT_EQ(AllPages(*store_, f, 100),
            Expected([](const ViolationRecord& v) { return v.level == "ser"; }));
  EXPECT_EQ(AllPages(*store_, f, 100).size(), 15u);

  f = {};
  f.anomaly = "SESSION";
  EXPECT_EQ(AllPages(*store_, f, 100),
            Expected([](const ViolationRecord& v) { return v.anomaly == "SESSION"; }));

  f = {};
  f.stream = "shared";
  EXPECT_THAT(AllPages(*store_, f, 100), ElementsAre("v00", "v05", "v10", "v15", "v20", "v25"));
  f.stream = "s1";
  EXPECT_THAT(AllPages(*store_, f, 100),
              ElementsAre("v01", "v05", "v09", "v13", "v17", "v21", "v25", "v29"));

  f = {};
  f.since_unix_ms = 1050;  // inclusive
  f.until_unix_ms = 1100;  // exclusive
  EXPECT_THAT(AllPages(*store_, f, 100), ElementsAre("v05", "v06", "v07", "v08", "v09"));

  f = {};
  f.level = "si";
  f.anomaly = "EXT";
  f.since_unix_ms = 1100;
  EXPECT_EQ(AllPages(*store_, f, 100), Expected([](const ViolationRecord& v) {
              return v.level == "si" && v.anomaly == "EXT" && v.finalised_unix_ms >= 1100;
            }));
  f.anomaly = "G2-item";
  EXPECT_TRUE(AllPages(*store_, f, 100).empty());

  // Records come back whole.
  auto page = store_->QueryViolations({}, 1, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_TRUE(SameRecord(page->violations[0], all_[0]));
}

TEST_F(StoreQueryTest, PagingWalksEveryRecordExactlyOnce) {
  const std::vector<std::string> everything = Expected([](const ViolationRecord&) { return true; });
  ViolationFilter ser;
  ser.level = "ser";
  const std::vector<std::string> sers =
      Expected([](const ViolationRecord& v) { return v.level == "ser"; });
  for (size_t limit : {1, 2, 3, 7, 10, 15, 29, 30, 31}) {
    SCOPED_TRACE(limit);
    EXPECT_EQ(AllPages(*store_, {}, limit), everything);
    EXPECT_EQ(AllPages(*store_, ser, limit), sers);
  }
  // The last page has no token, even when it is full.
  auto page = store_->QueryViolations({}, 30, "");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->violations.size(), 30u);
  EXPECT_TRUE(page->next_page_token.empty());

  // Records stored after a page was served show up on the following pages.
  page = store_->QueryViolations({}, 29, "");
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->next_page_token.empty());
  ASSERT_TRUE(*store_->PutViolation(Violation("late", "si", "EXT", {"s0"}, 5000)));
  auto next = store_->QueryViolations({}, 29, page->next_page_token);
  ASSERT_TRUE(next.ok());
  EXPECT_THAT(Ids(next->violations), ElementsAre("v29", "late"));
}

TEST_F(StoreQueryTest, RefusesABadPageTokenOrLimit) {
  for (std::string_view token :
       {"x", "zzzzzzzzzzzzzzzz", "000000000000001", "00000000000000001", "-000000000000001",
        "+000000000000001", " 000000000000001", "0000000000000001 "}) {
    SCOPED_TRACE(token);
    auto page = store_->QueryViolations({}, 5, token);
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(page.status().message(), HasSubstr("page_token"));
  }
  EXPECT_EQ(store_->QueryViolations({}, 0, "").status().code(), absl::StatusCode::kInvalidArgument);
  // A well-formed token past the end is an empty last page.
  auto page = store_->QueryViolations({}, 5, "ffffffffffffffff");
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->violations.empty());
  EXPECT_TRUE(page->next_page_token.empty());
}

}  // namespace
}  // namespace isowatch::store
