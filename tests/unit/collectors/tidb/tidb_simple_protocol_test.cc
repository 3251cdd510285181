// SPDX-License-Identifier: Apache-2.0
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/simple_protocol.h"
#include "tests/unit/collectors/tidb/samples.h"

namespace isowatch::tidb {
namespace {

using testing::Describe;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadSample;

RowChange DecodeOneRow(SimpleProtocolDecoder& decoder, const std::string& message) {
  auto events = decoder.Decode(message);
  EXPECT_TRUE(events.ok()) << events.status();
  if (!events.ok() || events->size() != 1 || !std::holds_alternative<RowChange>((*events)[0])) {
    ADD_FAILURE() << "not one row: " << message;
    return RowChange{};
  }
  return std::get<RowChange>((*events)[0]);
}

TEST(SimpleProtocolTest, DecodesTheDocumentedRowMessages) {
  SimpleProtocolDecoder decoder;
  EXPECT_EQ(Describe(DecodeOneRow(decoder, ReadSample("docs-excerpts/simple-insert.json"))),
            "INSERT simple.user @447984084414103554 key() [age=25 id=1 name=John Doe "
            "score=90.5]");
  EXPECT_EQ(Describe(DecodeOneRow(decoder, ReadSample("docs-excerpts/simple-update.json"))),
            "UPDATE simple.user @447984099186180098 key() [age=25 id=1 name=John Doe score=95] "
            "old[age=25 id=1 name=John Doe score=90.5]");
  EXPECT_EQ(Describe(DecodeOneRow(decoder, ReadSample("docs-excerpts/simple-delete.json"))),
            "DELETE simple.user @447984114259722243 key() [age=25 id=1 name=John Doe score=95]");
}

TEST(SimpleProtocolTest, DecodesTheDocumentedWatermark) {
  SimpleProtocolDecoder decoder;
  const auto events = decoder.Decode(ReadSample("docs-excerpts/simple-watermark.json"));
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(std::get<Watermark>((*events)[0]).ts, 447984124732375041u);
}

TEST(SimpleProtocolTest, CommitTimesPrecedeTheirBuildTimesByAboutASecond) {
  // Each buildTs is 0.77-1.13 s after commitTs >> 18 in the recorded messages. A TSO read
  // wrong (a bit lost, the wrong shift) would miss a window of a few seconds.
  const std::pair<const char*, uint64_t> samples[] = {{"simple-insert.json", 1708923662983},
                                                      {"simple-update.json", 1708923719184},
                                                      {"simple-delete.json", 1708923776484}};
  for (const auto& [name, build_ms] : samples) {
    SimpleProtocolDecoder decoder;
    const RowChange row = DecodeOneRow(decoder, ReadSample(std::string("docs-excerpts/") + name));
    const uint64_t commit_ms = TsoPhysicalMs(row.commit_ts);
    EXPECT_GE(build_ms - commit_ms, 500u) << name;
    EXPECT_LE(build_ms - commit_ms, 1500u) << name;
  }
}

// A BOOTSTRAP message as the JSON encoding writes it (field names from the protocol's schema,
// samples/simple-protocol/message.avsc.json).
const char* const kBootstrap =
    R"({"version":1,"type":"BOOTSTRAP","commitTs":0,"buildTs":1708923662000,)"
    R"("tableSchema":{"schema":"simple","table":"user","tableID":148,)"
    R"("version":447984074911121426,"columns":[{"name":"id","dataType":{"mysqlType":"int",)"
    R"("charset":"binary","collate":"binary","length":11},"nullable":false,"default":null}],)"
    R"("indexes":[{"name":"name","unique":true,"primary":false,"nullable":false,)"
    R"("columns":["name"]},{"name":"primary","unique":true,"primary":true,"nullable":false,)"
    R"("columns":["id"]}]}})";

TEST(SimpleProtocolTest, TakesKeyColumnsFromTheBootstrapSchema) {
  SimpleProtocolDecoder decoder;
  const auto bootstrap = decoder.Decode(kBootstrap);
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  EXPECT_TRUE(bootstrap->empty());
  EXPECT_EQ(decoder.bootstraps(), 1u);
  EXPECT_EQ(DecodeOneRow(decoder, ReadSample("docs-excerpts/simple-insert.json")).key_columns,
            std::vector<std::string>{"id"});
  EXPECT_EQ(decoder.KeyColumns("simple", "other"), nullptr);
}

TEST(SimpleProtocolTest, ADdlUpdatesTheKeyColumns) {
  SimpleProtocolDecoder decoder;
  ASSERT_TRUE(decoder.Decode(kBootstrap).ok());
  const auto events = decoder.Decode(
      R"({"version":1,"type":"ALTER","sql":"ALTER TABLE user DROP PRIMARY KEY",)"
      R"("commitTs":447984124732375100,"buildTs":1,"tableSchema":{"database":"simple",)"
      R"("table":"user","tableID":148,"version":2,"columns":[],"indexes":[{"name":"u",)"
      R"("unique":true,"primary":false,"nullable":true,"columns":["a"]},{"name":"v",)"
      R"("unique":true,"primary":false,"nullable":false,"columns":["b","c"]}]}})");
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(
      std::get<SchemaChange>((*events)[0]),
      (SchemaChange{"simple", "user", 447984124732375100, "ALTER TABLE user DROP PRIMARY KEY"}));
  ASSERT_NE(decoder.KeyColumns("simple", "user"), nullptr);
  EXPECT_THAT(*decoder.KeyColumns("simple", "user"), ElementsAre("b", "c"));
}

// The symbols of enum `name` in the protocol's Avro schema (samples/simple-protocol/
// message.avsc.json), wherever it is declared.
std::vector<std::string> SchemaEnum(const simdjson::dom::element& node, const std::string& name) {
  std::vector<std::string> out;
  if (simdjson::dom::object object; node.get(object) == simdjson::SUCCESS) {
    std::string_view type;
    std::string_view enum_name;
    simdjson::dom::array symbols;
    if (object["type"].get(type) == simdjson::SUCCESS && type == "enum" &&
        object["name"].get(enum_name) == simdjson::SUCCESS && enum_name == name &&
        object["symbols"].get(symbols) == simdjson::SUCCESS) {
      for (const simdjson::dom::element symbol : symbols) {
        out.emplace_back(symbol.get_string().value_unsafe());
      }
    }
    for (const simdjson::dom::key_value_pair field : object) {
      for (std::string& symbol : SchemaEnum(field.value, name)) out.push_back(std::move(symbol));
    }
  } else if (simdjson::dom::array array; node.get(array) == simdjson::SUCCESS) {
    for (const simdjson::dom::element element : array) {
      for (std::string& symbol : SchemaEnum(element, name)) out.push_back(std::move(symbol));
    }
  }
  return out;
}

TEST(SimpleProtocolTest, DecodesEveryMessageKindOfTheProtocolsSchema) {
  simdjson::dom::parser parser;
  const std::string schema = ReadSample("simple-protocol/message.avsc.json");
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(schema).get(root), simdjson::SUCCESS);
  const std::vector<std::string> dml = SchemaEnum(root, "DMLType");
  const std::vector<std::string> ddl = SchemaEnum(root, "DDLType");
  EXPECT_THAT(dml, ElementsAre("INSERT", "UPDATE", "DELETE"));
  EXPECT_EQ(ddl.size(), 8u);
  EXPECT_THAT(SchemaEnum(root, "MessageType"), ElementsAre("WATERMARK", "BOOTSTRAP", "DDL", "DML"));
  SimpleProtocolDecoder decoder;
  for (const std::string& type : dml) {
    const auto events = decoder.Decode(
        fmt::format(R"({{"version":1,"type":"{}","database":"d","table":"t","commitTs":7,)"
                    R"("data":{},"old":{}}})",
                    type, type == "DELETE" ? "null" : R"({"k":"1"})",
                    type == "INSERT" ? "null" : R"({"k":"0"})"));
    ASSERT_TRUE(events.ok()) << type << ": " << events.status();
    ASSERT_EQ(events->size(), 1u) << type;
    EXPECT_STREQ(RowOpName(std::get<RowChange>((*events)[0]).op), type.c_str());
  }
  for (const std::string& type : ddl) {
    const auto events = decoder.Decode(
        fmt::format(R"({{"version":1,"type":"{}","sql":"x","commitTs":7,"buildTs":1}})", type));
    ASSERT_TRUE(events.ok()) << type << ": " << events.status();
    ASSERT_EQ(events->size(), 1u) << type;
    EXPECT_TRUE(std::holds_alternative<SchemaChange>((*events)[0])) << type;
  }
}

struct Malformed {
  const char* message;
  absl::StatusCode code;
  const char* says;
};

class SimpleProtocolMalformedTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(SimpleProtocolMalformedTest, IsRefusedWithAClearError) {
  SimpleProtocolDecoder decoder;
  const auto events = decoder.Decode(GetParam().message);
  ASSERT_FALSE(events.ok()) << GetParam().message;
  EXPECT_EQ(events.status().code(), GetParam().code) << events.status();
  EXPECT_THAT(events.status().message(), HasSubstr(GetParam().says));
  EXPECT_EQ(decoder.bootstraps(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Messages, SimpleProtocolMalformedTest,
    ::testing::Values(
        Malformed{"nope", absl::StatusCode::kInvalidArgument, "simple: not a JSON document"},
        Malformed{R"({"type":"WATERMARK","commitTs":5})", absl::StatusCode::kInvalidArgument,
                  "version: missing"},
        Malformed{R"({"version":2,"type":"WATERMARK","commitTs":5})",
                  absl::StatusCode::kInvalidArgument, "version 2 is not supported"},
        Malformed{R"({"version":1,"type":"WATERMARK"})", absl::StatusCode::kInvalidArgument,
                  "commitTs: missing"},
        Malformed{R"({"version":1,"type":"WATERMARK","commitTs":0})",
                  absl::StatusCode::kInvalidArgument, "a TSO of 0"},
        Malformed{R"({"version":1,"type":"UPSERT","commitTs":5})",
                  absl::StatusCode::kInvalidArgument, "unknown message type \"UPSERT\""},
        Malformed{R"({"version":1,"type":"BOOTSTRAP","commitTs":0})",
                  absl::StatusCode::kInvalidArgument, "tableSchema: missing"},
        Malformed{R"({"version":1,"type":"BOOTSTRAP","tableSchema":{"table":"t"}})",
                  absl::StatusCode::kInvalidArgument, "tableSchema.database: missing"},
        Malformed{R"({"version":1,"type":"BOOTSTRAP","tableSchema":{"schema":"d","table":"t",)"
                  R"("indexes":[{"primary":true,"columns":[1]}]}})",
                  absl::StatusCode::kInvalidArgument, "tableSchema.indexes[0].columns[0]"},
        Malformed{R"({"version":1,"type":"INSERT","database":"d","table":"t","commitTs":5})",
                  absl::StatusCode::kInvalidArgument, "data: an INSERT without its row"},
        Malformed{R"({"version":1,"type":"DELETE","database":"d","table":"t","commitTs":5,)"
                  R"("data":{"k":"1"}})",
                  absl::StatusCode::kInvalidArgument, "old: a DELETE without the deleted row"},
        Malformed{R"({"version":1,"type":"INSERT","database":"d","table":"t","commitTs":5,)"
                  R"("data":{"k":"1"},"old":{"k":"0"}})",
                  absl::StatusCode::kInvalidArgument,
                  "old: INSERT carries one row, not both data and old"},
        Malformed{R"({"version":1,"type":"INSERT","database":"d","table":"t","commitTs":5,)"
                  R"("data":{"k":{"value":1}}})",
                  absl::StatusCode::kInvalidArgument, "data.k: expected a column value"},
        Malformed{R"({"version":1,"type":"INSERT","database":"d","commitTs":5,"data":{"k":"1"}})",
                  absl::StatusCode::kInvalidArgument, "table: missing"},
        Malformed{R"({"version":1,"type":"INSERT","database":"d","table":"t","commitTs":5,)"
                  R"("handleKeyOnly":true,"data":{"k":"1"}})",
                  absl::StatusCode::kUnimplemented, "only the row's handle key"},
        Malformed{R"({"version":1,"type":"UPDATE","database":"d","table":"t","commitTs":5,)"
                  R"("claimCheckLocation":"file:///x","data":{"k":"1"}})",
                  absl::StatusCode::kUnimplemented, "claim-check"}));

}  // namespace
}  // namespace isowatch::tidb
