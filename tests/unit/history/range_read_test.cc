// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/range_read.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::history {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void Begin(HistoryBuilder& b, std::string_view id) {
  ASSERT_TRUE(b.BeginTxn({.id = id, .session = "s"}).ok());
}

TEST(RangeReadTest, KeptBesideTheOperationsAtTheirPositions) {
  HistoryBuilder b;
  const KeyId k1 = b.IntKey(1);
  const KeyId k2 = b.IntKey(2);
  const KeyId k5 = b.IntKey(5);
  Begin(b, "plain");
  b.Write(k1, Value::Int(10));
  b.EndTxn();
  Begin(b, "ranged");
  const KeyValue first_live[] = {{k1, Value::Int(10)}, {k2, Value::Int(20)}};
  const KeyValue first_dead[] = {{k5, Value::Int(-5)}};
  b.RangeRead(KeyBound::At(k1), KeyBound::At(k5), first_live, first_dead);
  b.Read(k1, Value::Int(10));
  b.Write(k2, Value::Int(21));
  b.RangeRead(KeyBound::Unbounded(), KeyBound::At(k2), {}, {});
  b.RangeRead(KeyBound::At(k2), KeyBound::Unbounded(), first_live, {});
  b.EndTxn();
  Begin(b, "after");
  b.Read(k2, Value::Int(21));
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();

  EXPECT_EQ(h->range_read_count(), 3u);
  EXPECT_THAT(h->range_reads(TxnId(0)), IsEmpty());
  EXPECT_THAT(h->range_reads(TxnId(2)), IsEmpty());
  EXPECT_EQ(h->ops(TxnId(1)).size(), 2u);  // the range reads are not operations
  const auto ranges = h->range_reads(TxnId(1));
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].position, 0u);
  EXPECT_EQ(ranges[0].low, KeyBound::At(k1));
  EXPECT_EQ(ranges[0].high, KeyBound::At(k5));
  EXPECT_THAT(h->range_live(ranges[0]),
              ElementsAre(KeyValue{k1, Value::Int(10)}, KeyValue{k2, Value::Int(20)}));
  EXPECT_THAT(h->range_dead(ranges[0]), ElementsAre(KeyValue{k5, Value::Int(-5)}));
  EXPECT_EQ(ranges[1].position, 2u);
  EXPECT_TRUE(ranges[1].low.unbounded);
  EXPECT_EQ(ranges[1].high, KeyBound::At(k2));
  EXPECT_THAT(h->range_live(ranges[1]), IsEmpty());
  EXPECT_THAT(h->range_dead(ranges[1]), IsEmpty());
  EXPECT_EQ(ranges[2].position, 2u);
  EXPECT_TRUE(ranges[2].high.unbounded);
  EXPECT_THAT(h->range_live(ranges[2]),
              ElementsAre(KeyValue{k1, Value::Int(10)}, KeyValue{k2, Value::Int(20)}));
  EXPECT_THAT(h->range_dead(ranges[2]), IsEmpty());
}

TEST(RangeReadTest, HistoryWithoutRangeReadsHasNone) {
  HistoryBuilder b;
  Begin(b, "1");
  b.Write(b.IntKey(1), Value::Int(1));
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->range_read_count(), 0u);
  EXPECT_THAT(h->range_reads(TxnId(0)), IsEmpty());
  EXPECT_TRUE(h->tombstones().empty());
  EXPECT_FALSE(h->IsTombstone(b.IntKey(1), Value::Int(1)));
}

TEST(RangeReadTest, AbandonTxnDropsItsRangeReadsButNotItsTombstones) {
  HistoryBuilder b;
  const KeyId k = b.IntKey(7);
  Begin(b, "kept");
  const KeyValue live[] = {{k, Value::Int(1)}};
  b.RangeRead(KeyBound::At(k), KeyBound::At(k), live, {});
  b.EndTxn();
  Begin(b, "dropped");
  const KeyValue dead[] = {{k, Value::Int(2)}, {k, Value::Int(3)}};
  b.RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), live, dead);
  b.RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), {}, dead);
  b.MarkTombstone(k, Value::Int(2));
  b.AbandonTxn();
  // The next transaction takes the dropped one's index: it must not inherit its range reads.
  Begin(b, "next");
  b.Read(k, Value::Int(1));
  b.EndTxn();
  Begin(b, "last");
  b.RangeRead(KeyBound::At(k), KeyBound::Unbounded(), {}, dead);
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ(h->range_read_count(), 2u);
  EXPECT_EQ(h->range_reads(TxnId(0)).size(), 1u);
  EXPECT_THAT(h->range_reads(TxnId(1)), IsEmpty());
  ASSERT_EQ(h->range_reads(TxnId(2)).size(), 1u);
  const RangeRead& last = h->range_reads(TxnId(2))[0];
  EXPECT_THAT(h->range_live(last), IsEmpty());
  EXPECT_THAT(h->range_dead(last),
              ElementsAre(KeyValue{k, Value::Int(2)}, KeyValue{k, Value::Int(3)}));
  EXPECT_THAT(h->range_live(h->range_reads(TxnId(0))[0]), ElementsAre(KeyValue{k, Value::Int(1)}));
  EXPECT_TRUE(h->IsTombstone(k, Value::Int(2)));
  EXPECT_FALSE(h->IsTombstone(k, Value::Int(3)));
  EXPECT_FALSE(h->IsTombstone(k, Value::Int(1)));
}

TEST(RangeReadTest, RangeReadKeysAreRegisters) {
  for (int where = 0; where < 4; ++where) {
    HistoryBuilder b;
    const KeyId list = b.IntKey(1);
    const KeyId other = b.IntKey(2);
    Begin(b, "1");
    b.Append(list, Value::Int(1));
    const KeyValue pair[] = {{list, Value::Int(1)}};
    switch (where) {
      case 0:
        b.RangeRead(KeyBound::At(list), KeyBound::At(other), {}, {});
        break;
      case 1:
        b.RangeRead(KeyBound::At(other), KeyBound::At(list), {}, {});
        break;
      case 2:
        b.RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), pair, {});
        break;
      case 3:
        b.RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), {}, pair);
        break;
    }
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_FALSE(h.ok()) << where;
    EXPECT_THAT(std::string(h.status().message()), HasSubstr("key 1 is used both as a register"));
  }
}

TEST(RangeReadTest, TombstonedKeysAreRegisters) {
  HistoryBuilder b;
  const KeyId list = b.IntKey(1);
  b.MarkTombstone(list, Value::Int(9));
  Begin(b, "1");
  b.Append(list, Value::Int(1));
  b.EndTxn();
  EXPECT_FALSE(std::move(b).Finish().ok());
}

TEST(RangeReadTest, MemoryUsageCountsThem) {
  HistoryBuilder plain;
  HistoryBuilder ranged;
  for (HistoryBuilder* b : {&plain, &ranged}) {
    Begin(*b, "1");
    b->Write(b->IntKey(1), Value::Int(1));
    if (b == &ranged) {
      std::vector<KeyValue> live(100, KeyValue{b->IntKey(1), Value::Int(1)});
      b->RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), live, {});
    }
    b->EndTxn();
  }
  const size_t plain_bytes = std::move(plain).Finish()->MemoryUsage();
  const size_t ranged_bytes = std::move(ranged).Finish()->MemoryUsage();
  EXPECT_GE(ranged_bytes, plain_bytes + 100 * sizeof(KeyValue));
}

TEST(RangeReadDeathTest, LiveHistoriesRefuseRangeReadsAndTombstones) {
  HistoryBuilder b;
  b.StartLive(DataModel::kKeyValue);
  const KeyId k = b.IntKey(1);
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  EXPECT_DEATH(b.RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), {}, {}),
               "range reads in a live history");
  EXPECT_DEATH(b.MarkTombstone(k, Value::Int(1)), "tombstones in a live history");
}

TEST(RangeReadDeathTest, RangeReadOutsideATransactionIsABug) {
  HistoryBuilder b;
  EXPECT_DEATH(b.RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), {}, {}),
               "outside a transaction");
}

}  // namespace
}  // namespace isowatch::history
