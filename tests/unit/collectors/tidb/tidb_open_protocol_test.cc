// SPDX-License-Identifier: Apache-2.0
#include <string>
#include <variant>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/open_protocol.h"
#include "tests/unit/collectors/tidb/open_protocol_frames.h"
#include "tests/unit/collectors/tidb/samples.h"

namespace isowatch::tidb {
namespace {

using testing::Describe;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::OpenProtocolKey;
using testing::OpenProtocolValue;
using testing::ReadSample;
using testing::SplitRecords;

// Each event as a line: rows through Describe(), "DDL db.t @ts query", "WATERMARK ts".
std::vector<std::string> DescribeAll(const std::vector<CdcEvent>& events) {
  std::vector<std::string> out;
  for (const CdcEvent& event : events) {
    if (const auto* row = std::get_if<RowChange>(&event)) {
      out.push_back(Describe(*row));
    } else if (const auto* ddl = std::get_if<SchemaChange>(&event)) {
      out.push_back("DDL " + ddl->schema + "." + ddl->table + " @" +
                    std::to_string(ddl->commit_ts) + " " + ddl->query);
    } else {
      out.push_back("WATERMARK " + std::to_string(std::get<Watermark>(event).ts));
    }
  }
  return out;
}

std::vector<std::string> DecodeSample(const std::string& kind, int n) {
  const std::string key = ReadSample(fmt::format("open-protocol-binary/key/{}_key_{}", kind, n));
  const std::string value =
      ReadSample(fmt::format("open-protocol-binary/value/{}_value_{}", kind, n));
  EXPECT_GE(key.size(), 8u) << kind << n;
  auto events = DecodeOpenProtocol(key, value);
  EXPECT_TRUE(events.ok()) << kind << n << ": " << events.status();
  return events.ok() ? DescribeAll(*events) : std::vector<std::string>{"error"};
}

TEST(OpenProtocolTest, DecodesTheRecordedRowMessages) {
  EXPECT_THAT(DecodeSample("row", 0), ElementsAre("INSERT a.b @1 key() [col1=aa]"));
  EXPECT_THAT(DecodeSample("row", 1),
              ElementsAre("INSERT a.b @1 key() [col1=aa]", "INSERT a.b @2 key() [col1=bb]",
                          "INSERT a.b @3 key() [col1=bb]", "INSERT a.c @4 key() [col1=cc]"));
  EXPECT_THAT(DecodeSample("row", 2), ElementsAre());
}

TEST(OpenProtocolTest, DecodesTheRecordedDdlMessages) {
  EXPECT_THAT(DecodeSample("ddl", 0), ElementsAre("DDL a.b @1 create table a"));
  EXPECT_THAT(DecodeSample("ddl", 1),
              ElementsAre("DDL a.b @1 create table a", "DDL a.b @2 create table b",
                          "DDL a.b @3 create table c"));
  EXPECT_THAT(DecodeSample("ddl", 2), ElementsAre());
}

TEST(OpenProtocolTest, DecodesTheRecordedResolvedMessages) {
  // A resolved event's value is an 8-byte zero length, not nothing.
  EXPECT_EQ(ReadSample("open-protocol-binary/value/rts_value_0"), std::string(8, '\0'));
  EXPECT_THAT(DecodeSample("rts", 0), ElementsAre("WATERMARK 1"));
  EXPECT_THAT(DecodeSample("rts", 1), ElementsAre("WATERMARK 1", "WATERMARK 2", "WATERMARK 3"));
  EXPECT_THAT(DecodeSample("rts", 2), ElementsAre());
}

TEST(OpenProtocolTest, RefusesAKeyPairedWithAnotherKindOfValue) {
  const std::string rts_key = ReadSample("open-protocol-binary/key/rts_key_0");
  const std::string row_value = ReadSample("open-protocol-binary/value/row_value_0");
  const auto events = DecodeOpenProtocol(rts_key, row_value);
  ASSERT_FALSE(events.ok());
  EXPECT_THAT(events.status().message(),
              HasSubstr("event 0 (key byte 16, value byte 8): open-protocol: value: a resolved "
                        "event with a 31-byte value"));
  EXPECT_FALSE(DecodeOpenProtocol(ReadSample("open-protocol-binary/key/row_key_1"),
                                  ReadSample("open-protocol-binary/value/row_value_0"))
                   .ok());
}

// The key and value of one line of the documented event stream
// (docs-excerpts/open-protocol-event-stream.log): `[key="<escaped JSON>"] [value=...]`.
std::pair<std::string, std::string> LoggedEvent(const std::string& line) {
  auto unescape = [](std::string text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) ++i;
      out.push_back(text[i]);
    }
    return out;
  };
  const size_t key_start = line.find("[key=\"") + 6;
  const size_t key_end = line.find("\"] [value=");
  const size_t value_start = key_end + 10;
  std::string value = line.substr(value_start, line.rfind(']') - value_start);
  if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
  return {unescape(line.substr(key_start, key_end - key_start)), unescape(value)};
}

TEST(OpenProtocolTest, DecodesTheDocumentedEventStream) {
  const std::vector<std::string> lines =
      SplitRecords(ReadSample("docs-excerpts/open-protocol-event-stream.log"), "\n");
  ASSERT_EQ(lines.size(), 14u);
  std::vector<std::string> decoded;
  for (const std::string& line : lines) {
    const auto [key, value] = LoggedEvent(line);
    const auto events = DecodeOpenProtocol(OpenProtocolKey({key}), OpenProtocolValue({value}));
    ASSERT_TRUE(events.ok()) << line << ": " << events.status();
    ASSERT_EQ(events->size(), 1u);
    decoded.push_back(DescribeAll(*events)[0]);
  }
  // These columns carry no flags ("f"), so nothing marks `val` as binary: its base64 text is
  // kept as sent (the TiCDC of that recording wrote every string as base64; current TiCDC
  // writes text as text and only binary columns, flagged 0x01, as base64).
  EXPECT_THAT(
      decoded,
      ElementsAre("DDL test.t1 @415508856908021766 CREATE TABLE test.t1(id int primary key, val "
                  "varchar(16))",
                  "WATERMARK 415508856908021766",
                  "DDL test.t1 @415508856908021766 CREATE TABLE test.t1(id int primary key, val "
                  "varchar(16))",
                  "WATERMARK 415508856908021766",
                  "INSERT test.t1 @415508878783938562 key(id) [id=1 val=YWE=]",
                  "INSERT test.t1 @415508878783938562 key(id) [id=2 val=YmI=]",
                  "INSERT test.t1 @415508878783938562 key(id) [id=3 val=Y2M=]",
                  "INSERT test.t1 @415508878783938562 key(id) [id=3 val=Y2M=]",
                  "DELETE test.t1 @415508881418485761 key(id) [id=1]",
                  "DELETE test.t1 @415508881418485761 key(id) [id=2]",
                  "INSERT test.t1 @415508881418485761 key(id) [id=3 val=ZGQ=]",
                  "INSERT test.t1 @415508881418485761 key(id) [id=4 val=ZWU=]",
                  "WATERMARK 415508881038376963", "WATERMARK 415508881038376963"));
}

TEST(OpenProtocolTest, DecodesAnUpdateWithItsPreviousRowAndBinaryColumns) {
  const auto events = DecodeOpenProtocol(
      OpenProtocolKey({R"({"ts":455000614534643717,"scm":"bank","tbl":"acct","t":1,"rid":3})"}),
      OpenProtocolValue(
          {R"({"u":{"id":{"t":3,"h":true,"f":11,"v":7},"b":{"t":252,"f":1,)"
           R"("v":"AAEC"},"s":{"t":15,"f":64,"v":"text"},"n":{"t":8,"f":65,"v":null}},)"
           R"("p":{"id":{"t":3,"h":true,"f":11,"v":7},"b":{"t":252,"f":1,"v":""},)"
           R"("s":{"t":15,"f":64,"v":"old"},"n":{"t":8,"f":65,"v":18446744073709551615}}})"}));
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  const RowChange& row = std::get<RowChange>((*events)[0]);
  EXPECT_EQ(row.op, RowOp::kUpdate);
  EXPECT_EQ(row.commit_ts, 455000614534643717u);
  EXPECT_THAT(row.key_columns, ElementsAre("id"));
  EXPECT_THAT(row.columns, ElementsAre(Column{"id", "7"}, Column{"b", std::string("\0\1\2", 3)},
                                       Column{"s", "text"}, Column{"n", std::nullopt}));
  EXPECT_THAT(row.old_columns, ElementsAre(Column{"id", "7"}, Column{"b", ""}, Column{"s", "old"},
                                           Column{"n", "18446744073709551615"}));
}

TEST(OpenProtocolTest, TakesTheHandleKeyFlagAsAKeyColumn) {
  const auto events = DecodeOpenProtocol(
      OpenProtocolKey({R"({"ts":9,"scm":"d","tbl":"t","t":1})"}),
      OpenProtocolValue({R"({"d":{"a":{"t":3,"f":2,"v":1},"b":{"t":3,"f":0,"v":2}}})"}));
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(Describe(std::get<RowChange>((*events)[0])), "DELETE d.t @9 key(a) [a=1 b=2]");
}

struct Malformed {
  std::string key;
  std::string value;
  absl::StatusCode code;
  std::string says;
};

class OpenProtocolMalformedTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(OpenProtocolMalformedTest, IsRefusedWithAClearError) {
  const auto events = DecodeOpenProtocol(GetParam().key, GetParam().value);
  ASSERT_FALSE(events.ok());
  EXPECT_EQ(events.status().code(), GetParam().code) << events.status();
  EXPECT_THAT(events.status().message(), HasSubstr(GetParam().says));
}

const std::string kRowKey = R"({"ts":5,"scm":"d","tbl":"t","t":1})";
const std::string kRowValue = R"({"u":{"k":{"t":3,"h":true,"v":1}}})";

INSTANTIATE_TEST_SUITE_P(
    Messages, OpenProtocolMalformedTest,
    ::testing::Values(
        Malformed{"", "", absl::StatusCode::kInvalidArgument,
                  "key byte 0: 0 bytes, too few for the protocol version"},
        Malformed{testing::BigEndian64(2), "", absl::StatusCode::kInvalidArgument,
                  "protocol version 2, expected 1"},
        Malformed{OpenProtocolKey({kRowKey}) + "abc", OpenProtocolValue({kRowValue}),
                  absl::StatusCode::kInvalidArgument,
                  "key byte 50: 3 bytes left, too few for the length of event 1"},
        Malformed{OpenProtocolKey({kRowKey}).substr(0, 40), OpenProtocolValue({kRowValue}),
                  absl::StatusCode::kInvalidArgument,
                  "key byte 8: event 0 is 34 bytes long, but only 24 follow"},
        Malformed{OpenProtocolKey({kRowKey}) + testing::BigEndian64(~uint64_t{0}),
                  OpenProtocolValue({kRowValue}), absl::StatusCode::kInvalidArgument,
                  "event 1 is 18446744073709551615 bytes long"},
        Malformed{OpenProtocolKey({kRowKey, kRowKey}), OpenProtocolValue({kRowValue}),
                  absl::StatusCode::kInvalidArgument, "2 events in the key, 1 in the value"},
        Malformed{OpenProtocolKey({"{"}), OpenProtocolValue({""}),
                  absl::StatusCode::kInvalidArgument, "event 0 (key byte 16, value byte 8)"},
        Malformed{OpenProtocolKey({R"({"scm":"d","tbl":"t","t":1})"}),
                  OpenProtocolValue({kRowValue}), absl::StatusCode::kInvalidArgument,
                  "key.ts: missing"},
        Malformed{OpenProtocolKey({R"({"ts":5,"t":4})"}), OpenProtocolValue({""}),
                  absl::StatusCode::kInvalidArgument, "key.t: unknown event type 4"},
        Malformed{OpenProtocolKey({R"({"ts":5})"}), OpenProtocolValue({""}),
                  absl::StatusCode::kInvalidArgument, "key.t: expected the event type"},
        Malformed{OpenProtocolKey({R"({"ts":5,"tbl":"t","t":1})"}), OpenProtocolValue({kRowValue}),
                  absl::StatusCode::kInvalidArgument, "key.scm: missing"},
        Malformed{OpenProtocolKey({kRowKey}), OpenProtocolValue({"{}"}),
                  absl::StatusCode::kInvalidArgument, "a row needs \"u\""},
        Malformed{OpenProtocolKey({kRowKey}),
                  OpenProtocolValue({R"({"u":{"k":{"v":1}},"d":{"k":{"v":1}}})"}),
                  absl::StatusCode::kInvalidArgument, "a row needs \"u\""},
        Malformed{OpenProtocolKey({kRowKey}), OpenProtocolValue({R"({"u":{"k":{"t":3}}})"}),
                  absl::StatusCode::kInvalidArgument, "value.u.k.v: missing"},
        Malformed{OpenProtocolKey({kRowKey}), OpenProtocolValue({R"({"u":{"k":7}})"}),
                  absl::StatusCode::kInvalidArgument, "value.u.k: expected an object"},
        Malformed{OpenProtocolKey({kRowKey}), OpenProtocolValue({R"({"u":{"k":{"t":"x","v":1}}})"}),
                  absl::StatusCode::kInvalidArgument, "value.u.k.t: expected an integer"},
        Malformed{OpenProtocolKey({kRowKey}),
                  OpenProtocolValue({R"({"u":{"k":{"t":252,"f":1,"v":"!!"}}})"}),
                  absl::StatusCode::kInvalidArgument, "a binary column that is not base64"},
        Malformed{OpenProtocolKey({R"({"ts":5,"t":2})"}), OpenProtocolValue({R"({"t":3})"}),
                  absl::StatusCode::kInvalidArgument, "value.q: missing"},
        Malformed{OpenProtocolKey({R"({"ts":5,"scm":"d","tbl":"t","t":1,"ohk":true})"}),
                  OpenProtocolValue({kRowValue}), absl::StatusCode::kUnimplemented,
                  "only the row's handle key"},
        Malformed{OpenProtocolKey({R"({"ts":5,"scm":"d","tbl":"t","t":1,"ccl":"s3://x"})"}),
                  OpenProtocolValue({kRowValue}), absl::StatusCode::kUnimplemented,
                  "claim-check"}));

}  // namespace
}  // namespace isowatch::tidb
