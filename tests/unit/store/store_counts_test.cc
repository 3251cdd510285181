// SPDX-License-Identifier: Apache-2.0
// What the store counts for the daemon's metrics: the violations by kind, kept with each
// violation and across reopenings (and counted from the records of a store that lacks them), and
// the daemon's opaque counter totals.
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/store/internal/codec.h"
#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

#include "tests/unit/store/store_fixture.h"

namespace isowatch::store {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// Stores five violations of three kinds (one put twice, counted once).
void PutFive(Store& store) {
  for (const auto& [id, level, anomaly] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"a", "si", "EXT"},
                                                                      {"b", "si", "EXT"},
                                                                      {"c", "ser", "SESSION"},
                                                                      {"d", "si", "EXT"},
                                                                      {"a", "si", "EXT"}}) {
    ASSERT_TRUE(store.PutViolation(Violation(id, level, anomaly, {"s"}, 1)).ok());
  }
  ViolationRecord adya = Violation("e", "ser", "G2-item", {"s"}, 2);
  adya.checker = "adya";
  ASSERT_TRUE(*store.PutViolation(adya));
}

TEST_F(StoreTest, CountsViolationsByKindAcrossReopenings) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(store->CountViolationsByKind().empty());
    ASSERT_NO_FATAL_FAILURE(PutFive(*store));
    EXPECT_THAT(store->CountViolationsByKind(),
                ElementsAre(Pair(Kind("adya", "ser", "G2-item"), 1u),
                            Pair(Kind("online", "ser", "SESSION"), 1u),
                            Pair(Kind("online", "si", "EXT"), 3u)));
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CountViolations(), 5u);
  EXPECT_THAT(store->CountViolationsByKind(),
              ElementsAre(Pair(Kind("adya", "ser", "G2-item"), 1u),
                          Pair(Kind("online", "ser", "SESSION"), 1u),
                          Pair(Kind("online", "si", "EXT"), 3u)));
  ASSERT_TRUE(*store->PutViolation(Violation("f", "ser", "SESSION", {"s"}, 3)));
  EXPECT_THAT(store->CountViolationsByKind(),
              ElementsAre(Pair(Kind("adya", "ser", "G2-item"), 1u),
                          Pair(Kind("online", "ser", "SESSION"), 2u),
                          Pair(Kind("online", "si", "EXT"), 3u)));
}

TEST_F(StoreTest, CountsByKindMissingOrWrongAreCountedAgainFromTheRecords) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    ASSERT_NO_FATAL_FAILURE(PutFive(*store));
  }
  {
    // As a store written before the counts were kept: one count missing, one wrong.
    RawDb raw(dir_);
    ASSERT_TRUE(raw.Db()
                    .Delete({}, raw.Cf("meta"),
                            internal::EncodeViolationCountKey(Kind("online", "si", "EXT")))
                    .ok());
    ASSERT_TRUE(raw.Db()
                    .Put({}, raw.Cf("meta"),
                         internal::EncodeViolationCountKey(Kind("online", "rc", "G0")),
                         internal::EncodeNumberKey(7))
                    .ok());
  }
  for (int reopen = 0; reopen < 2; ++reopen) {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    EXPECT_THAT(store->CountViolationsByKind(),
                ElementsAre(Pair(Kind("adya", "ser", "G2-item"), 1u),
                            Pair(Kind("online", "ser", "SESSION"), 1u),
                            Pair(Kind("online", "si", "EXT"), 3u)))
        << "reopening " << reopen;
  }
}

TEST_F(StoreTest, KeepsTheLastCounterTotals) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    auto none = store->CounterTotals();
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_EQ(*none, "");
    ASSERT_TRUE(store->SetCounterTotals("first").ok());
    ASSERT_TRUE(store->SetCounterTotals(std::string("second\0", 7)).ok());
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto totals = store->CounterTotals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(*totals, std::string("second\0", 7));
}

}  // namespace
}  // namespace isowatch::store
