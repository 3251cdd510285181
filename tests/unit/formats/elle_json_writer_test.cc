// SPDX-License-Identifier: Apache-2.0
// The elle-cli JSON writer: what it writes, that it reads back as the EDN writer's output does,
// and what it refuses.
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/edn.h"
#include "isowatch/history/history_builder.h"

#include "tests/testing/canonical_history.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Timestamp;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;

std::string Canonical(const History& h) { return isowatch::testing::CanonicalHistory(h); }

History ReadSample(std::string_view name) {
  return samples::Expect(ReadEdnFile(samples::SamplePath("edn", name), {}));
}

absl::Status WriteJson(const History& h, std::string* text) {
  std::ostringstream out;
  absl::Status s = WriteElleJson(h, out);
  *text = out.str();
  return s;
}

std::string Json(const History& h) {
  std::string text;
  absl::Status s = WriteJson(h, &text);
  EXPECT_TRUE(s.ok()) << s;
  return text;
}

std::string JsonError(const History& h) {
  std::string text;
  absl::Status s = WriteJson(h, &text);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(ElleJsonWriterTest, WritesTheNotesTwinOfTheEdnSample) {
  // The members in another order than the notes' sample, and the EDN keyword :x as the string
  // ":x", which reads back as the same key.
  EXPECT_EQ(Json(ReadSample("rw_register.edn")),
            "[{\"type\":\"invoke\",\"f\":\"txn\",\"process\":0,\"index\":0,\"time\":10,"
            "\"value\":[[\"w\",\":x\",1],[\"r\",\":y\",null]]},\n"
            "{\"type\":\"invoke\",\"f\":\"txn\",\"process\":1,\"index\":1,\"time\":15,"
            "\"value\":[[\"r\",\":x\",null]]},\n"
            "{\"type\":\"ok\",\"f\":\"txn\",\"process\":0,\"index\":2,\"time\":20,"
            "\"value\":[[\"w\",\":x\",1],[\"r\",\":y\",null]]},\n"
            "{\"type\":\"ok\",\"f\":\"txn\",\"process\":1,\"index\":3,\"time\":30,"
            "\"value\":[[\"r\",\":x\",1]]}\n"
            "]\n");
}

TEST(ElleJsonWriterTest, ReadsBackAsTheEdnWritersOutputDoes) {
  for (const char* name :
       {"list_append.edn", "rw_register.edn", "ts.edn", "list_append_completions.edn"}) {
    SCOPED_TRACE(name);
    const History h = ReadSample(name);
    std::ostringstream edn;
    ASSERT_TRUE(WriteEdn(h, edn).ok());
    const History from_edn = samples::Expect(ReadEdnString(edn.str(), {}, "h.edn"));
    const std::string json = Json(h);
    const History from_json = samples::Expect(ReadElleJsonString(json, {}, "h.json"));
    EXPECT_EQ(Canonical(from_json), Canonical(from_edn)) << json;
    EXPECT_EQ(from_json.info().dialect, from_edn.info().dialect);
    // And as a file: detected by its content.
    EXPECT_TRUE(SniffElleJson(json).ok());
    EXPECT_FALSE(SniffEdn(json).ok());
  }
}

TEST(ElleJsonWriterTest, StringsAreEscapedAndTimestampsKept) {
  history::HistoryBuilder b;
  history::TxnHeader t{.id = "a", .session = "client"};
  t.real_time = history::TxnHeader::RealTime{5, 10};
  t.start = Timestamp{100, 0};
  t.commit = Timestamp{104, 0};
  ASSERT_TRUE(b.BeginTxn(t).ok());
  b.Write(b.BytesKey("k \"1\"\n\\"), b.BytesValue("v\t\x01"));
  b.Append(b.IntKey(-7), Value::Int(3));
  const Value elements[] = {Value::Int(3)};
  b.ListRead(b.IntKey(-7), elements);
  b.EndTxn();
  const History h = samples::Expect(std::move(b).Finish());
  const std::string json = Json(h);
  EXPECT_THAT(json, HasSubstr(R"(["w","k \"1\"\n\\","v\t\u0001"])"));
  EXPECT_THAT(json, HasSubstr(R"(["append",-7,3],["r",-7,[3]])"));
  EXPECT_THAT(json, HasSubstr(R"("ts":{"rts":100,"cts":104})"));
  const History back = samples::Expect(ReadElleJsonString(json, {}, "h.json"));
  ASSERT_EQ(back.size(), 1U);
  const history::Transaction& txn = back.txn(TxnId(uint32_t{0}));
  EXPECT_EQ(txn.start, (Timestamp{100, 0}));
  EXPECT_EQ(txn.commit, (Timestamp{104, 0}));
  EXPECT_EQ(txn.invoke_time, 5);
  EXPECT_EQ(txn.complete_time, 10);
  EXPECT_TRUE(back.FindBytesKey("k \"1\"\n\\").valid());
  EXPECT_EQ(back.bytes(back.ops(TxnId(uint32_t{0}))[0].value().bytes_index()), "v\t\x01");
}

TEST(ElleJsonWriterTest, AnEmptyHistoryIsAnEmptyArray) {
  const History h = samples::Expect(history::HistoryBuilder().Finish());
  EXPECT_EQ(Json(h), "[]\n");
}

TEST(ElleJsonWriterTest, RefusesWhatItCannotSay) {
  auto one = [](auto add, TxnStatus status = TxnStatus::kCommitted,
                std::optional<Timestamp> start = std::nullopt,
                std::optional<Timestamp> commit = std::nullopt) {
    history::HistoryBuilder b;
    history::TxnHeader t{.id = "1", .session = "0", .status = status};
    t.start = start;
    t.commit = commit;
    EXPECT_TRUE(b.BeginTxn(t).ok());
    add(b);
    b.EndTxn();
    return samples::Expect(std::move(b).Finish());
  };
  EXPECT_THAT(JsonError(one([](auto& b) { b.Write(b.BytesKey("\xff\xfe"), Value::Int(1)); })),
              HasSubstr("transaction 1: elle-cli JSON holds UTF-8 text only"));
  EXPECT_THAT(JsonError(one([](auto& b) { b.Write(b.IntKey(1), b.BytesValue("caf\xc3")); })),
              HasSubstr("UTF-8 text only"));
  EXPECT_THAT(JsonError(one([](auto& b) { b.UnknownRead(b.IntKey(1)); })),
              HasSubstr("(elle-cli JSON's null in an \"ok\" is an observed absent value)"));
  EXPECT_THAT(JsonError(one([](auto&) {}, TxnStatus::kAborted, Timestamp{1, 0}, Timestamp{1, 0})),
              HasSubstr("carries \"ts\" on \"ok\" completions only"));
}

}  // namespace
}  // namespace isowatch::formats
