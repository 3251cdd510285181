// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/without_timestamps.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "isowatch/history/history_builder.h"

#include "tests/testing/canonical_history.h"

namespace isowatch::history {
namespace {

// One history that holds every kind of thing the model keeps: bytes and integer keys, registers
// and lists, an installed initial version, tombstones, range reads before, between and after the
// operations, an unknown read, real time, every status; with `timed`, start and commit
// timestamps and an xid too.
History Everything(bool timed) {
  HistoryBuilder b;
  b.set_source("everything");
  b.set_format("viper", "viper");
  b.set_time_unit("ms");
  const KeyId x = b.BytesKey("x");
  const KeyId y = b.IntKey(2);
  const KeyId list = b.IntKey(3);
  b.SetDefaultInitialValue(Value::Int(0));
  b.SetInitialVersion(x, b.BytesValue("x0"));
  const Value initial_list[] = {Value::Int(1)};
  b.SetInitialList(list, initial_list);
  b.MarkTombstone(y, Value::Int(-1));
  auto begin = [&](std::string_view id, std::string_view session, TxnStatus status, int64_t at) {
    TxnHeader header{.id = id,
                     .session = session,
                     .status = status,
                     .real_time = TxnHeader::RealTime{.invoke = at, .complete = at + 5}};
    if (timed) {
      header.start = Timestamp{at, 0};
      header.commit = Timestamp{at + 1, 0};
      header.xid = static_cast<uint64_t>(at);
    }
    EXPECT_TRUE(b.BeginTxn(header).ok());
  };
  begin("t1", "a", TxnStatus::kCommitted, 10);
  const KeyValue live[] = {{x, b.BytesValue("x0")}};
  const KeyValue dead[] = {{y, Value::Int(-1)}};
  b.RangeRead(KeyBound::Unbounded(), KeyBound::At(y), live, dead);
  b.Write(x, b.BytesValue("x1"));
  b.RangeRead(KeyBound::At(x), KeyBound::Unbounded(), {}, {});
  b.Append(list, Value::Int(2));
  const Value seen[] = {Value::Int(1), Value::Int(2)};
  b.ListRead(list, seen);
  b.RangeRead(KeyBound::At(y), KeyBound::At(y), {}, dead);
  b.EndTxn();
  begin("t2", "b", TxnStatus::kAborted, 20);
  b.Write(y, Value::Int(7));
  b.EndTxn();
  begin("t3", "a", TxnStatus::kUnknown, 30);
  b.UnknownRead(y);
  b.Read(x, b.BytesValue("x1"));
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *std::move(h) : History();
}

TEST(WithoutTimestampsTest, KeepsEverythingButTheTimestamps) {
  const History timed = Everything(true);
  ASSERT_TRUE(timed.has_commit_timestamps());
  absl::StatusOr<History> bare = WithoutTimestamps(timed);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_FALSE(bare->has_commit_timestamps());
  EXPECT_EQ(bare->xid(bare->txn(TxnId(0))), 0u);
  EXPECT_EQ(bare->range_read_count(), 3u);
  EXPECT_EQ(bare->info().format, "viper");
  EXPECT_EQ(bare->info().time_unit, "ms");
  EXPECT_EQ(bare->source(), "everything");
  EXPECT_EQ(testing::CanonicalHistory(*bare), testing::CanonicalHistory(Everything(false)));
}

}  // namespace
}  // namespace isowatch::history
