// SPDX-License-Identifier: Apache-2.0
#include <string>
#include <variant>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/canal_json.h"
#include "collectors/tidb/cdc_event.h"
#include "tests/unit/collectors/tidb/samples.h"

namespace isowatch::tidb {
namespace {

using testing::Describe;
using ::testing::HasSubstr;
using testing::ReadSample;
using testing::SplitRecords;

// The one row `message` decodes to; fails the test otherwise.
RowChange DecodeOneRow(const std::string& message) {
  auto events = DecodeCanalJson(message);
  EXPECT_TRUE(events.ok()) << events.status();
  if (!events.ok() || events->size() != 1 || !std::holds_alternative<RowChange>((*events)[0])) {
    ADD_FAILURE() << "not one row: " << message;
    return RowChange{};
  }
  return std::get<RowChange>((*events)[0]);
}

TEST(CanalJsonTest, DecodesTheRecordedStorageSinkRowsWithTheExtension) {
  const std::string content = ReadSample("canal-json-storage-active-active/DataContent1.json");
  const std::vector<std::string> records = SplitRecords(content, "\r\n");
  ASSERT_EQ(records.size(), 8u);
  std::vector<std::string> described;
  for (const std::string& record : records) described.push_back(Describe(DecodeOneRow(record)));
  EXPECT_EQ(described[0],
            "INSERT test_active.message @464043256649875456 key(id) [id=20 first_name=t "
            "last_name=TT _tidb_origin_ts=NULL _tidb_softdelete_time=NULL]");
  EXPECT_EQ(described[1],
            "INSERT test_active.message @464043256649875456 key(id) [id=21 first_name=u "
            "last_name=UU _tidb_origin_ts=NULL _tidb_softdelete_time=NULL]");
  EXPECT_EQ(described[2],
            "INSERT test_active.message @464073967049113629 key(id) [id=5 first_name=e "
            "last_name=E _tidb_origin_ts=464073966942421014 _tidb_softdelete_time=NULL]");
  EXPECT_EQ(described[5],
            "UPDATE test_active.message @464074446196178963 key(id) [id=7 first_name=g "
            "last_name=G _tidb_origin_ts=NULL _tidb_softdelete_time=2026-02-05 22:58:40.992217] "
            "old[id=7 first_name=g last_name=G _tidb_origin_ts=464074440387592202 "
            "_tidb_softdelete_time=NULL]");
  EXPECT_EQ(described[6],
            "INSERT test_active.message @464074440387592202 key(id) [id=8 first_name=h "
            "last_name=H _tidb_origin_ts=NULL _tidb_softdelete_time=NULL]");
  EXPECT_EQ(described[7],
            "UPDATE test_active.message @464074446600667164 key(id) [id=8 first_name=h "
            "last_name=H _tidb_origin_ts=464074446196178963 _tidb_softdelete_time=2026-02-05 "
            "22:58:40.992217] old[id=8 first_name=h last_name=H _tidb_origin_ts=NULL "
            "_tidb_softdelete_time=NULL]");
}

TEST(CanalJsonTest, EventTimeIsThePhysicalPartOfTheCommitTsInTheUneditedRecords) {
  // The samples' README: records 3-10 of the active-active recording have es == commitTs >> 18
  // (records 1-2 look edited). The decoder keeps the commit ts whole; this checks it read the
  // right 64-bit number.
  const std::vector<std::string> records =
      SplitRecords(ReadSample("canal-json-storage-active-active/DataContent1.json") + "\r\n" +
                       ReadSample("canal-json-storage-active-active/DataContent2.json"),
                   "\r\n");
  ASSERT_EQ(records.size(), 10u);
  const uint64_t es[] = {0,
                         0,
                         1770301693150,
                         1770301693150,
                         1770303499850,
                         1770303520951,
                         1770303498793,
                         1770303522494,
                         1770344412751,
                         1770344427851};
  for (size_t i = 2; i < records.size(); ++i) {
    EXPECT_EQ(TsoPhysicalMs(DecodeOneRow(records[i]).commit_ts), es[i]) << "record " << i + 1;
  }
}

TEST(CanalJsonTest, DecodesACompositeKey) {
  const std::vector<std::string> records =
      SplitRecords(ReadSample("canal-json-storage-active-active/DataContent2.json"), "\r\n");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(Describe(DecodeOneRow(records[1])),
            "INSERT test_active.message2 @464085169694572575 key(id,first_name) [id=101 "
            "first_name=b last_name=B _tidb_origin_ts=NULL _tidb_softdelete_time=NULL]");
}

TEST(CanalJsonTest, RefusesEveryRecordedMessageWithoutTheExtension) {
  for (const char* name :
       {"insert.json", "update.json", "delete.json", "ddl_create.json", "ddl_query.json"}) {
    const std::string message = ReadSample(std::string("canal-json-pulsar-no-extension/") + name);
    ASSERT_FALSE(message.empty()) << name;
    const auto events = DecodeCanalJson(message);
    ASSERT_FALSE(events.ok()) << name;
    EXPECT_EQ(events.status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_THAT(events.status().message(), HasSubstr("enable-tidb-extension=true")) << name;
  }
  EXPECT_THAT(
      DecodeCanalJson(ReadSample("canal-json-pulsar-no-extension/update.json")).status().message(),
      HasSubstr("UPDATE of demo.readings without _tidb.commitTs"));
}

TEST(CanalJsonTest, TheRecordedRowsDecodeOnceTheExtensionIsThere) {
  // The same messages with a commit ts added: what the changefeed would send with the
  // extension. The delete carries the deleted row in `data`.
  std::string message = ReadSample("canal-json-pulsar-no-extension/delete.json");
  ASSERT_EQ(message.substr(message.size() - 2), "}\n");
  message.pop_back();
  message.insert(message.size() - 1, R"(,"_tidb":{"commitTs":468286178115387393})");
  EXPECT_EQ(Describe(DecodeOneRow(message)),
            "DELETE demo.readings @468286178115387393 key(id) [id=1 device=dev-a value=11]");
  message = ReadSample("canal-json-pulsar-no-extension/update.json");
  message.pop_back();
  message.insert(message.size() - 1, R"(,"_tidb":{"commitTs":468286178115387393})");
  EXPECT_EQ(Describe(DecodeOneRow(message)),
            "UPDATE demo.readings @468286178115387393 key(id) [id=1 device=dev-a value=11] "
            "old[id=1 device=dev-a value=10]");
}

// The docs' watermark example carries `//` comments; without them it is the message.
std::string WithoutLineComments(const std::string& text) {
  std::string out;
  for (const std::string& line : SplitRecords(text, "\n")) {
    out += line.substr(0, line.find("//")) + "\n";
  }
  return out;
}

TEST(CanalJsonTest, DecodesTheDocumentedWatermark) {
  const std::string doc = ReadSample("docs-excerpts/canal-json-watermark.doc.jsonc");
  ASSERT_FALSE(doc.empty());
  EXPECT_EQ(DecodeCanalJson(doc).status().code(), absl::StatusCode::kInvalidArgument);
  const auto events = DecodeCanalJson(WithoutLineComments(doc));
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  ASSERT_TRUE(std::holds_alternative<Watermark>((*events)[0]));
  const Tso ts = std::get<Watermark>((*events)[0]).ts;
  EXPECT_EQ(ts, 429918007904436226u);
  EXPECT_EQ(TsoPhysicalMs(ts), 1640007049196u);  // the example's es
}

TEST(CanalJsonTest, DecodesADdlWithTheExtension) {
  const auto events = DecodeCanalJson(
      R"j({"id":0,"database":"demo","table":"t","pkNames":null,"isDdl":true,"type":"CREATE",)j"
      R"j("es":1,"ts":2,"sql":"CREATE TABLE t (id INT PRIMARY KEY)","sqlType":null,)j"
      R"j("mysqlType":null,"data":null,"old":null,"_tidb":{"commitTs":450253245302439944}})j");
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(std::get<SchemaChange>((*events)[0]),
            (SchemaChange{"demo", "t", 450253245302439944, "CREATE TABLE t (id INT PRIMARY KEY)"}));
}

TEST(CanalJsonTest, SplitsABatchOfRowsWithTheirOldImages) {
  const auto events = DecodeCanalJson(
      R"({"database":"d","table":"t","pkNames":["k"],"isDdl":false,"type":"UPDATE",)"
      R"("data":[{"k":"1","v":"b"},{"k":"2","v":null}],"old":[{"k":"1","v":"a"},{"k":"2","v":"c"}],)"
      R"("_tidb":{"commitTs":"450253245302439944"}})");
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(Describe(std::get<RowChange>((*events)[1])),
            "UPDATE d.t @450253245302439944 key(k) [k=2 v=NULL] old[k=2 v=c]");
}

struct Malformed {
  const char* message;
  absl::StatusCode code;
  const char* says;
};

class CanalJsonMalformedTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(CanalJsonMalformedTest, IsRefusedWithAClearError) {
  const auto events = DecodeCanalJson(GetParam().message);
  ASSERT_FALSE(events.ok()) << GetParam().message;
  EXPECT_EQ(events.status().code(), GetParam().code) << events.status();
  EXPECT_THAT(events.status().message(), HasSubstr(GetParam().says));
}

constexpr const char* kInvalid = "";
INSTANTIATE_TEST_SUITE_P(
    Messages, CanalJsonMalformedTest,
    ::testing::Values(
        Malformed{kInvalid, absl::StatusCode::kInvalidArgument, "not a JSON document"},
        Malformed{"[1,2]", absl::StatusCode::kInvalidArgument, "expected an object, found array"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":1)",
                  absl::StatusCode::kInvalidArgument, "not a JSON document"},
        Malformed{R"({"database":"d","table":"t"})", absl::StatusCode::kInvalidArgument,
                  "type: missing"},
        Malformed{R"({"type":"MERGE","database":"d","table":"t","_tidb":{"commitTs":5}})",
                  absl::StatusCode::kInvalidArgument, "\"MERGE\" is not INSERT"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":-5}})",
                  absl::StatusCode::kInvalidArgument, "_tidb.commitTs: expected a TSO"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":0}})",
                  absl::StatusCode::kInvalidArgument, "a TSO of 0"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":"12x"}})",
                  absl::StatusCode::kInvalidArgument, "\"12x\" is not a TSO"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":18446744073709551616}})",
                  absl::StatusCode::kInvalidArgument, "not a JSON document"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":1.5}})",
                  absl::StatusCode::kInvalidArgument, "found another number"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{}})",
                  absl::StatusCode::kFailedPrecondition, "without _tidb.commitTs"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":[]})",
                  absl::StatusCode::kInvalidArgument, "_tidb: expected an object"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[],)"
                  R"("_tidb":{"commitTs":7}})",
                  absl::StatusCode::kInvalidArgument, "data: a row change without a row"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":{"k":"1"},)"
                  R"("_tidb":{"commitTs":7}})",
                  absl::StatusCode::kInvalidArgument, "data: expected an array, found object"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":["1"]}],)"
                  R"("_tidb":{"commitTs":7}})",
                  absl::StatusCode::kInvalidArgument, "data[0].k: expected a column value"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("old":[{"k":"0"}],"_tidb":{"commitTs":7}})",
                  absl::StatusCode::kInvalidArgument, "1 rows in old for 1 in data of an INSERT"},
        Malformed{R"({"type":"UPDATE","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("old":[{"k":"0"},{"k":"2"}],"_tidb":{"commitTs":7}})",
                  absl::StatusCode::kInvalidArgument, "2 rows in old for 1 in data"},
        Malformed{R"({"type":"INSERT","database":"d","table":7,"data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":7}})",
                  absl::StatusCode::kInvalidArgument, "table: expected a string, found number"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","pkNames":[1],)"
                  R"("data":[{"k":"1"}],"_tidb":{"commitTs":7}})",
                  absl::StatusCode::kInvalidArgument, "pkNames[0]: expected a string"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":7,"onlyHandleKey":true}})",
                  absl::StatusCode::kUnimplemented, "only the row's handle key"},
        Malformed{R"({"type":"INSERT","database":"d","table":"t","data":[{"k":"1"}],)"
                  R"("_tidb":{"commitTs":7,"claimCheckLocation":"s3://b/x"}})",
                  absl::StatusCode::kUnimplemented, "claim-check"},
        Malformed{R"({"type":"TIDB_WATERMARK","_tidb":null})",
                  absl::StatusCode::kFailedPrecondition,
                  "TIDB_WATERMARK without _tidb.watermarkTs"},
        Malformed{R"({"type":"CREATE","isDdl":"yes"})", absl::StatusCode::kInvalidArgument,
                  "isDdl: expected a boolean"}));

}  // namespace
}  // namespace isowatch::tidb
