// SPDX-License-Identifier: Apache-2.0
// The native format's range reads (Transaction.range_reads) and tombstones
// (InitialState.tombstones).
#include <sstream>
#include <string>
#include <string_view>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/native.h"
#include "isowatch/formats/proto_decoder.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history.pb.h"

#include "tests/testing/canonical_history.h"

namespace isowatch::formats {
namespace {

namespace pb = ::isowatch::v1;
using history::History;
using history::HistoryBuilder;
using history::KeyBound;
using history::KeyValue;
using history::Value;
using ::testing::HasSubstr;

std::string Dump(const History& h) { return isowatch::testing::CanonicalHistory(h); }

std::string Write(const History& h, NativeEncoding encoding) {
  std::ostringstream out;
  absl::Status s = WriteNative(h, encoding, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

// Range reads bounded and unbounded, at the start, in the middle and at the end of their
// transactions, with live and dead records, integer and bytes keys, absent values; tombstones.
History BuildRangeHistory() {
  HistoryBuilder b;
  const KeyId k1 = b.IntKey(1);
  const KeyId k2 = b.IntKey(2);
  const KeyId k9 = b.IntKey(9);
  const KeyId kb = b.BytesKey("b");
  b.MarkTombstone(k9, Value::Int(-90));
  b.MarkTombstone(k2, Value::Int(77));
  b.MarkTombstone(kb, b.BytesValue("gone"));
  EXPECT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  const KeyValue live[] = {{k1, Value::Int(10)}, {kb, Value::Absent()}};
  const KeyValue dead[] = {{k9, Value::Int(-90)}};
  b.RangeRead(KeyBound::At(k1), KeyBound::At(k9), live, dead);
  b.Read(k1, Value::Int(10));
  b.Write(k2, Value::Int(77));
  b.RangeRead(KeyBound::Unbounded(), KeyBound::At(k2), {}, {});
  b.EndTxn();
  EXPECT_TRUE(b.BeginTxn({.id = "2", .session = "s"}).ok());
  b.Write(k1, Value::Int(11));
  b.EndTxn();
  EXPECT_TRUE(b.BeginTxn({.id = "3", .session = "t"}).ok());
  b.Read(k2, Value::Int(77));
  const KeyValue dead_b[] = {{kb, b.BytesValue("gone")}, {k2, Value::Int(77)}};
  b.RangeRead(KeyBound::At(kb), KeyBound::Unbounded(), {}, dead_b);
  b.RangeRead(KeyBound::Unbounded(), KeyBound::Unbounded(), live, {});
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  EXPECT_TRUE(h.ok()) << h.status();
  return std::move(*h);
}

TEST(NativeRangeTest, RoundTripsInBothEncodings) {
  History h = BuildRangeHistory();
  const std::string dump = Dump(h);
  EXPECT_THAT(dump, HasSubstr("range 1 .. 9 live {1: 10, \"b\": null} dead {9: -90}"));
  EXPECT_THAT(dump, HasSubstr("tombstone \"b\" = \"gone\""));
  for (NativeEncoding encoding : {NativeEncoding::kBinary, NativeEncoding::kJsonLines}) {
    const std::string written = Write(h, encoding);
    absl::StatusOr<History> back = ReadNativeString(written, {}, "mem");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(Dump(*back), dump);
    EXPECT_EQ(back->range_read_count(), 4u);
    EXPECT_EQ(back->tombstones().size(), 3u);
    EXPECT_TRUE(back->IsTombstone(back->FindIntKey(9), Value::Int(-90)));
    EXPECT_EQ(Write(*back, encoding), written);
  }
}

TEST(NativeRangeTest, CanonicalFormShowsPositions) {
  History h = BuildRangeHistory();
  const std::string dump = Dump(h);
  // Transaction 1: a range read first, then the two operations, then the second range read.
  const size_t first = dump.find("range 1 .. 9");
  const size_t read = dump.find("  r 1 10");
  const size_t write = dump.find("  w 2 77");
  const size_t second = dump.find("range unbounded .. 2");
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, read);
  EXPECT_LT(read, write);
  EXPECT_LT(write, second);
}

TEST(NativeRangeTest, ReadsHandWrittenJsonLines) {
  constexpr std::string_view kText =
      R"({"header": {"version": 1, "initial": {"tombstones": [{"key": {"int": 4}, "value": {"int": 40}}]}}}
{"txn": {"id_int": 1, "session_int": 1, "ops": [{"kind": "READ", "key": {"int": 3}}], "range_reads": [{"position": 1, "low": {"int": 3}, "dead": [{"key": {"int": 4}, "value": {"int": 40}}], "live": [{"key": {"int": 3}}]}]}}
)";
  absl::StatusOr<History> h = ReadNativeString(kText, {}, "mem");
  ASSERT_TRUE(h.ok()) << h.status();
  const KeyId k3 = h->FindIntKey(3);
  const KeyId k4 = h->FindIntKey(4);
  EXPECT_TRUE(h->IsTombstone(k4, Value::Int(40)));
  ASSERT_EQ(h->range_reads(TxnId(0)).size(), 1u);
  const history::RangeRead& r = h->range_reads(TxnId(0))[0];
  EXPECT_EQ(r.position, 1u);
  EXPECT_EQ(r.low, KeyBound::At(k3));
  EXPECT_TRUE(r.high.unbounded);
  ASSERT_EQ(h->range_live(r).size(), 1u);
  EXPECT_TRUE(h->range_live(r)[0].value.absent());
  ASSERT_EQ(h->range_dead(r).size(), 1u);
  EXPECT_EQ(h->range_dead(r)[0], (KeyValue{k4, Value::Int(40)}));
}

TEST(NativeRangeTest, RejectsMalformedRangeReads) {
  struct Case {
    std::string_view range_reads;
    std::string_view error;
  };
  const Case cases[] = {
      {R"([{"position": 2}])", "range_reads[0]: position 2 is past its 1 operations"},
      {R"([{"position": 1}, {"position": 0}])",
       "range_reads[1]: position 0 is before the previous range read's 1"},
      {R"([{"position": 0, "live": [{"value": {"int": 1}}]}])",
       "range_reads[0]: live[0] has no key"},
      {R"([{"position": 1, "dead": [{}]}])", "range_reads[0]: dead[0] has no key"},
  };
  for (const Case& c : cases) {
    const std::string text =
        std::string(
            R"({"txn": {"id_int": 1, "ops": [{"kind": "READ", "key": {"int": 3}}], "range_reads": )") +
        std::string(c.range_reads) + "}}\n";
    absl::StatusOr<History> h = ReadNativeString(text, {}, "mem");
    ASSERT_FALSE(h.ok()) << c.range_reads;
    EXPECT_THAT(std::string(h.status().message()), HasSubstr(c.error));
    EXPECT_THAT(std::string(h.status().message()), HasSubstr("transaction 1"));
  }
  absl::StatusOr<History> h = ReadNativeString(
      R"({"header": {"version": 1, "initial": {"tombstones": [{"value": {"int": 1}}]}}})", {},
      "mem");
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(std::string(h.status().message()), HasSubstr("initial.tombstones[0] has no key"));
}

TEST(NativeRangeTest, LiveDecoderRefusesRangeReadsAndTombstones) {
  HistoryBuilder b;
  b.StartLive(history::DataModel::kKeyValue);
  ProtoDecoder decoder(b);
  pb::Transaction t;
  t.set_id_int(1);
  t.add_range_reads()->set_position(0);
  absl::StatusOr<TxnId> id = decoder.ApplyTxn(t, 0);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("transaction 1: range reads in a live history"));
  EXPECT_EQ(b.txn_count(), 0u);
  t.clear_range_reads();
  EXPECT_TRUE(decoder.ApplyTxn(t, 0).ok());  // the same transaction without them is fine

  pb::InitialState initial;
  pb::KeyValue* kv = initial.add_tombstones();
  kv->mutable_key()->set_int_(1);
  kv->mutable_value()->set_int_(2);
  HistoryBuilder fresh;
  fresh.StartLive(history::DataModel::kKeyValue);
  absl::Status s = ProtoDecoder(fresh).ApplyInitialState(initial);
  EXPECT_THAT(std::string(s.message()), HasSubstr("a live history holds no tombstones"));
}

}  // namespace
}  // namespace isowatch::formats
