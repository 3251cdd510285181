// SPDX-License-Identifier: Apache-2.0
// The TimeKiller writer: read and built histories written and read back, byte for byte, with the
// snapshot extension and the initial transaction; and what it cannot write.
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/read_options.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/snapshot.h"

#include "tests/unit/formats/timekiller_fixture.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::HistoryBuilder;
using history::Timestamp;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;

std::string WriteInitial(const History& h) {
  std::ostringstream out;
  absl::Status s = WriteTimeKillerInitial(h, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

TEST_F(TimeKillerTest, ReadsAndWritesTheSnapshotExtension) {
  const std::string json =
      R"([{"tid":1,"sid":1,"xid":101,"snapshot":"100:103:102,100","cts":{"p":10},"ops":[]},)"
      R"({"tid":2,"sid":1,"xid":7,"sts":{"p":11},"cts":{"p":12},"ops":[{"t":"w","k":1,"v":2}]}])";
  absl::StatusOr<History> h = Read(json);
  ASSERT_TRUE(h.ok()) << h.status();
  const history::Transaction& t1 = h->txn(TxnId(0));
  EXPECT_FALSE(t1.has_start);
  EXPECT_EQ(h->xid(t1), 101u);
  ASSERT_TRUE(h->has_snapshot(t1));
  EXPECT_EQ(history::FormatSnapshot(h->snapshot(t1)), "100:103:100,102");
  EXPECT_EQ(h->xid(h->txn(TxnId(1))), 7u);
  EXPECT_TRUE(h->txn(TxnId(1)).has_start);
  const std::string written = Write(*h);
  EXPECT_NE(written.find(R"("xid":101,"snapshot":"100:103:100,102","cts")"), std::string::npos)
      << written;
  absl::StatusOr<History> back = Read(written);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Write(*back), written);
  EXPECT_EQ(Canonical(*back), Canonical(*h));
}

TEST_F(TimeKillerTest, RoundTripIsIdentityAndByteStable) {
  for (const std::string* sample : {&kv_sample_, &list_sample_}) {
    absl::StatusOr<History> first = Read(*sample);
    ASSERT_TRUE(first.ok()) << first.status();
    const std::string text1 = Write(*first);
    absl::StatusOr<History> second = Read(text1);
    ASSERT_TRUE(second.ok()) << second.status() << "\n" << text1;
    EXPECT_EQ(Canonical(*first), Canonical(*second));
    EXPECT_EQ(Write(*second), text1);
  }
  absl::StatusOr<History> kv = Read(kv_sample_);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(Write(*kv),
            "[\n"
            R"({"tid":1,"sid":0,"sts":{"p":100,"l":0},"cts":{"p":105,"l":2},"ops":[)"
            R"({"t":"w","k":3,"v":11},{"t":"r","k":4,"v":null}]},)"
            "\n"
            R"({"tid":"t2","sid":"s1","sts":{"p":105,"l":2},"cts":{"p":110,"l":0},"ops":[)"
            R"({"t":"r","k":3,"v":11},{"t":"w","k":4,"v":12}]})"
            "\n]\n");
  absl::StatusOr<History> list = Read(list_sample_);
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(Write(*list), HasSubstr(R"("ops":[{"t":"a","k":2,"v":40},{"t":"r","k":9,"v":[]}]})"));

  absl::StatusOr<History> empty = Read("[]");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(Write(*empty), "[\n]\n");
}

TEST_F(TimeKillerTest, RoundTripOfABuiltHistory) {
  // Ids that need escaping, extreme integers, session order, both data models and an initial
  // state; aborted transactions are not written.
  HistoryBuilder b;
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  KeyId reg = b.IntKey(kMin);
  KeyId list = b.IntKey(kMax);
  KeyId other = b.IntKey(-3);
  b.SetDefaultInitialValue(Value::Int(0));
  b.SetInitialRegister(reg, Value::Int(-1));
  const Value initial_list[] = {Value::Int(4), Value::Int(5)};
  b.SetInitialList(list, initial_list);
  ASSERT_TRUE(b.BeginTxn({.id = "a \"quoted\"\n\\ id \x01 \xc3\xa9",
                          .session = "s\t1",
                          .start = Timestamp{kMin, kMax},
                          .commit = Timestamp{kMax, 0}})
                  .ok());
  b.Write(reg, Value::Int(kMax));
  b.Read(other, Value::Absent());
  b.Append(list, Value::Int(kMin));
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "-12",
                          .id_numeric = true,
                          .session = "s\t1",
                          .start = Timestamp{1, 1},
                          .commit = Timestamp{2, 2}})
                  .ok());
  const Value seen[] = {Value::Int(4), Value::Int(5), Value::Int(kMin)};
  b.ListRead(list, seen);
  b.Read(reg, Value::Int(kMax));
  b.Write(other, Value::Absent());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "gone",
                          .session = "7",
                          .session_numeric = true,
                          .status = TxnStatus::kAborted,
                          .start = Timestamp{1, 0},
                          .commit = Timestamp{1, 0}})
                  .ok());
  b.Write(reg, Value::Int(99));
  b.EndTxn();
  absl::StatusOr<History> built = std::move(b).Finish();
  ASSERT_TRUE(built.ok()) << built.status();

  const std::string text = Write(*built);
  const std::string initial_text = WriteInitial(*built);
  EXPECT_EQ(initial_text,
            "{\"ops\":[\n"
            R"({"t":"w","k":-9223372036854775808,"v":-1},)"
            "\n"
            R"({"t":"a","k":9223372036854775807,"v":4},)"
            "\n"
            R"({"t":"a","k":9223372036854775807,"v":5})"
            "\n]}\n");
  EXPECT_THAT(text, HasSubstr(R"({"tid":"a \"quoted\"\n\\ id \u0001 )"));
  EXPECT_THAT(text, HasSubstr(R"({"tid":-12,"sid":"s\t1",)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("gone")));

  ReadOptions options;
  options.initial_value = 0;
  absl::StatusOr<History> again = ReadTimeKillerString(text, options, "again", initial_text);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  // The aborted transaction is not representable; everything else is the same.
  HistoryBuilder expected_builder;
  std::string without_aborted = Canonical(*built);
  without_aborted.erase(without_aborted.find("session 7 numeric=true\n"),
                        std::string("session 7 numeric=true\n").size());
  without_aborted.erase(without_aborted.find("txn gone"));
  EXPECT_EQ(Canonical(*again), without_aborted);
  EXPECT_EQ(Write(*again), text);
  EXPECT_EQ(WriteInitial(*again), initial_text);
}

TEST_F(TimeKillerTest, WriterErrors) {
  {
    HistoryBuilder b;
    ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s", .commit = Timestamp{1, 0}}).ok());
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    absl::Status s = WriteTimeKiller(*h, out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(s), HasSubstr("transaction 1 has no start timestamp"));
  }
  {
    HistoryBuilder b;
    KeyId k = b.BytesKey("name");
    ASSERT_TRUE(
        b.BeginTxn({.id = "1", .session = "s", .start = Timestamp{1, 0}, .commit = Timestamp{1, 0}})
            .ok());
    b.Write(k, Value::Int(1));
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    absl::Status s = WriteTimeKiller(*h, out);
    EXPECT_THAT(Message(s), HasSubstr("key \"name\" is not an integer"));
  }
  {
    HistoryBuilder b;
    KeyId k = b.IntKey(1);
    Value bytes = b.BytesValue("v");
    ASSERT_TRUE(
        b.BeginTxn({.id = "1", .session = "s", .start = Timestamp{1, 0}, .commit = Timestamp{1, 0}})
            .ok());
    b.Read(k, bytes);
    b.EndTxn();
    b.SetInitialRegister(k, bytes);
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    EXPECT_THAT(Message(WriteTimeKiller(*h, out)), HasSubstr("value \"v\" is not an integer"));
    EXPECT_THAT(Message(WriteTimeKillerInitial(*h, out)),
                HasSubstr("value \"v\" is not an integer"));
  }
  {
    HistoryBuilder b;
    KeyId k = b.IntKey(1);
    ASSERT_TRUE(
        b.BeginTxn({.id = "1", .session = "s", .start = Timestamp{1, 0}, .commit = Timestamp{1, 0}})
            .ok());
    b.UnknownRead(k);
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    EXPECT_THAT(Message(WriteTimeKiller(*h, out)), HasSubstr("unknown result"));
  }
}

}  // namespace
}  // namespace isowatch::formats
