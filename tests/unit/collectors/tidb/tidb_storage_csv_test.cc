// SPDX-License-Identifier: Apache-2.0
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/storage_csv.h"
#include "collectors/tidb/storage_schema.h"
#include "tests/unit/collectors/tidb/samples.h"

namespace isowatch::tidb {
namespace {

using testing::Describe;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadSample;
using testing::SplitRecords;

// The tables of the recorded integration test, as their values show (its SQL is not among
// the samples): update_pk (id primary key, pad) and update_uk (id primary key, uk, pad).
StorageTableSchema UpdatePk() {
  return StorageTableSchema{.schema = "test",
                            .table = "update_pk",
                            .columns = {{"id", "INT", true}, {"pad", "VARCHAR", false}}};
}
StorageTableSchema UpdateUk() {
  return StorageTableSchema{
      .schema = "test",
      .table = "update_uk",
      .columns = {{"id", "INT", true}, {"uk", "INT", false}, {"pad", "VARCHAR", false}}};
}

// The recorded result file without the test authors' `#` comments and blank lines, which a
// real sink file does not have.
std::string SinkFile(const std::string& name) {
  std::string out;
  for (const std::string& line : SplitRecords(ReadSample(name), "\n")) {
    if (!line.empty() && line[0] != '#') out += line + "\n";
  }
  return out;
}

// The [sink.csv] options of a changefeed's recorded configuration.
StorageCsvOptions OptionsOf(const std::string& conf) {
  const std::string toml = ReadSample(conf);
  EXPECT_THAT(toml, HasSubstr("include-commit-ts = true")) << conf;
  EXPECT_THAT(toml, HasSubstr("terminator = \"\\n\"")) << conf;
  StorageCsvOptions options;
  options.terminator = "\n";
  options.output_old_value = toml.find("output-old-value = true") != std::string::npos;
  return options;
}

TEST(StorageCsvTest, DecodesARecordedFileRowByRow) {
  const auto rows = DecodeStorageCsv(
      SinkFile("csv-storage-update-pk/clustered/result/changefeed1_pk.res"), UpdatePk(),
      OptionsOf("csv-storage-update-pk/clustered/conf/changefeed1.toml"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<std::string> described;
  for (const RowChange& row : *rows) described.push_back(Describe(row));
  EXPECT_THAT(
      described,
      ElementsAre("INSERT test.update_pk @450253245302439944 key(id) [id=1 pad=example1]",
                  "INSERT test.update_pk @450253245302439944 key(id) [id=2 pad=example2]",
                  "INSERT test.update_pk @450253245302439946 key(id) [id=10 pad=example10]",
                  "INSERT test.update_pk @450253245302439946 key(id) [id=20 pad=example20]",
                  "INSERT test.update_pk @450253245302439947 key(id) [id=100 pad=example100]",
                  "INSERT test.update_pk @450253245302439948 key(id) [id=1000 "
                  "pad=example1000]",
                  "UPDATE test.update_pk @450253245485940746 key(id) [id=1 pad=example2]",
                  "UPDATE test.update_pk @450253245485940746 key(id) [id=2 pad=example1]",
                  "DELETE test.update_pk @450253245485940749 key(id) [id=10 pad=example10]",
                  "DELETE test.update_pk @450253245485940749 key(id) [id=20 pad=example20]",
                  "INSERT test.update_pk @450253245485940749 key(id) [id=30 pad=example10]",
                  "INSERT test.update_pk @450253245485940749 key(id) [id=40 pad=example20]",
                  "DELETE test.update_pk @450253245485940752 key(id) [id=100 pad=example100]",
                  "INSERT test.update_pk @450253245485940752 key(id) [id=200 pad=example100]",
                  "UPDATE test.update_pk @450253245485940753 key(id) [id=1000 "
                  "pad=example1001]"));
  // 2024-06-05 09:30:23.694 UTC, as the samples' README dates the first commit ts.
  EXPECT_EQ(TsoPhysicalMs((*rows)[0].commit_ts), 1717579823694u);
}

TEST(StorageCsvTest, DecodesEveryRecordedFile) {
  struct Expected {
    size_t rows;
    size_t transactions;
  };
  // Counted from the files (records that are not comments; distinct commit ts).
  const std::map<std::string, Expected> expected = {
      {"clustered/result/changefeed1_pk.res", {15, 8}},
      {"clustered/result/changefeed1_uk.res", {17, 8}},
      {"clustered/result/changefeed2_pk.res", {18, 8}},
      {"clustered/result/changefeed2_uk.res", {18, 8}},
      {"clustered/result/changefeed3_pk.res", {15, 8}},
      {"clustered/result/changefeed3_uk.res", {12, 8}},
      {"clustered/result/changefeed4_pk.res", {18, 8}},
      {"clustered/result/changefeed4_uk.res", {18, 8}},
      {"nonclustered/result/changefeed1_pk.res", {17, 8}},
      {"nonclustered/result/changefeed1_uk.res", {17, 8}},
      {"nonclustered/result/changefeed2_pk.res", {18, 8}},
      {"nonclustered/result/changefeed2_uk.res", {18, 8}},
      {"nonclustered/result/changefeed3_pk.res", {12, 8}},
      {"nonclustered/result/changefeed3_uk.res", {12, 8}},
      {"nonclustered/result/changefeed4_pk.res", {18, 8}},
      {"nonclustered/result/changefeed4_uk.res", {18, 8}}};
  for (const auto& [name, want] : expected) {
    const std::string dir = name.substr(0, name.find('/'));
    const std::string changefeed = name.substr(name.rfind('/') + 1, 11);  // "changefeedN"
    const StorageCsvOptions options =
        OptionsOf(fmt::format("csv-storage-update-pk/{}/conf/{}.toml", dir, changefeed));
    const bool uk = name.find("_uk") != std::string::npos;
    const auto rows = DecodeStorageCsv(SinkFile("csv-storage-update-pk/" + name),
                                       uk ? UpdateUk() : UpdatePk(), options);
    ASSERT_TRUE(rows.ok()) << name << ": " << rows.status();
    EXPECT_EQ(rows->size(), want.rows) << name;
    std::set<Tso> commits;
    for (const RowChange& row : *rows) {
      commits.insert(row.commit_ts);
      EXPECT_EQ(row.table, uk ? "update_uk" : "update_pk") << name;
      EXPECT_EQ(row.key_columns, std::vector<std::string>{"id"}) << name;
      // With old values TiCDC splits every update into a delete and an insert.
      if (options.output_old_value) {
        EXPECT_NE(row.op, RowOp::kUpdate) << name;
      }
    }
    EXPECT_EQ(commits.size(), want.transactions) << name;
  }
}

TEST(StorageCsvTest, ReadsQuotedDelimitersTerminatorsQuotesAndNulls) {
  StorageCsvOptions options;  // CRLF, the sink's default
  const auto rows = DecodeStorageCsv(
      "\"I\",\"update_pk\",\"test\",450253245302439944,1,\"a,b\r\nc\"\"d\"\r\n"
      "\"D\",\"update_pk\",\"test\",450253245302439945,2,\\N\r\n"
      "\"U\",\"update_pk\",\"test\",450253245302439946,3,\"\\N\"",
      UpdatePk(), options);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].columns[1].value, "a,b\r\nc\"d");
  EXPECT_EQ((*rows)[1].columns[1].value, std::nullopt);
  EXPECT_EQ((*rows)[2].columns[1].value, "\\N");
}

TEST(StorageCsvTest, RefusesFilesWithoutTheCommitTs) {
  StorageCsvOptions options;
  options.include_commit_ts = false;
  const auto rows =
      DecodeStorageCsv("\"I\",\"update_pk\",\"test\",1,\"a\"\r\n", UpdatePk(), options);
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(rows.status().message(), HasSubstr("include-commit-ts = true"));
}

struct Malformed {
  const char* content;
  const char* says;
};

class StorageCsvMalformedTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(StorageCsvMalformedTest, IsRefusedNamingTheLineAndColumn) {
  StorageCsvOptions options;
  options.terminator = "\n";
  options.output_old_value = true;
  const auto rows = DecodeStorageCsv(GetParam().content, UpdatePk(), options);
  ASSERT_FALSE(rows.ok()) << GetParam().content;
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rows.status().message(), HasSubstr(GetParam().says));
}

INSTANTIATE_TEST_SUITE_P(
    Files, StorageCsvMalformedTest,
    ::testing::Values(
        Malformed{"\"I\",\"update_pk\",\"test\",5,false,1,\"a\"\n\n",
                  "line 2, column 1: an empty record"},
        Malformed{"\"I\",\"update_pk\",\"test\",5,false,1\n",
                  "line 1, column 1: 6 fields, expected 7"},
        Malformed{"\"X\",\"update_pk\",\"test\",5,false,1,\"a\"\n",
                  "line 1, column 1: operation \"X\" is not I, U or D"},
        Malformed{"\"I\",\"update_pk\",\"test\",5,false,1,\"a\"\n\"I\",\"other\",\"test\",5,"
                  "false,1,\"a\"\n",
                  "line 2, column 5: a row of test.other in a file of test.update_pk"},
        Malformed{"\"I\",\"update_pk\",\"test\",5x,false,1,\"a\"\n",
                  "line 1, column 24: commit ts \"5x\" is not a TSO"},
        Malformed{"\"I\",\"update_pk\",\"test\",0,false,1,\"a\"\n", "commit ts \"0\" is not"},
        Malformed{"\"I\",\"update_pk\",\"test\",99999999999999999999,false,1,\"a\"\n",
                  "is not a TSO"},
        Malformed{"\"I\",\"update_pk\",\"test\",5,maybe,1,\"a\"\n",
                  "column 26: is-update \"maybe\" is not true or false"},
        Malformed{"\"I\",\"update_pk\",\"test\",\\N,false,1,\"a\"\n",
                  "column 24: NULL where the record's header is"},
        Malformed{"\"I\",\"update_pk\",\"test\",5,false,1,\"a\n",
                  "line 1, column 34: a quoted value that is never closed"},
        Malformed{"\"I\",\"update_pk\",\"test\",5,false,1,\"a\"b\n",
                  "line 1, column 37: text after a closing quote"},
        Malformed{"\"I\",\"update_pk\",\"test\",5,false,1,a\"b\n",
                  "line 1, column 35: a quote inside an unquoted value"}));

TEST(StorageSchemaTest, ParsesTheDocumentedTableSchemaFile) {
  const auto schema = ParseStorageTableSchema(
      ReadSample("docs-excerpts/storage-schema_441349361156227074_3131721815.json"));
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->schema, "schema1");
  EXPECT_EQ(schema->table, "table1");
  EXPECT_EQ(schema->table_version, 441349361156227074u);
  EXPECT_EQ(schema->query, "ALTER TABLE schema1.table1 ADD OfficeLocation blob(20)");
  EXPECT_THAT(schema->columns,
              ElementsAre(StorageTableSchema::ColumnInfo{"Id", "INT", true},
                          StorageTableSchema::ColumnInfo{"LastName", "CHAR", false},
                          StorageTableSchema::ColumnInfo{"FirstName", "VARCHAR", false},
                          StorageTableSchema::ColumnInfo{"HireDate", "DATETIME", false},
                          StorageTableSchema::ColumnInfo{"OfficeLocation", "BLOB", false}));
  EXPECT_THAT(schema->KeyColumns(), ElementsAre("Id"));
}

TEST(StorageSchemaTest, ParsesTheDocumentedDatabaseSchemaFile) {
  const auto schema = ParseStorageTableSchema(
      ReadSample("docs-excerpts/storage-schema_441349361156227000_3131721815.database.json"));
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->schema, "schema1");
  EXPECT_EQ(schema->table, "");
  EXPECT_EQ(schema->table_version, 441349361156227000u);
  EXPECT_TRUE(schema->columns.empty());
}

TEST(StorageSchemaTest, ParsesTheDocumentedMetadataFile) {
  const auto checkpoint = ParseStorageMetadata(ReadSample("docs-excerpts/storage-metadata.json"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(*checkpoint, 433305438660591626u);
}

TEST(StorageSchemaTest, RefusesMalformedFiles) {
  EXPECT_THAT(ParseStorageMetadata("{}").status().message(), HasSubstr("checkpoint-ts: missing"));
  EXPECT_THAT(ParseStorageMetadata(R"({"checkpoint-ts":-1})").status().message(),
              HasSubstr("checkpoint-ts: expected a TSO"));
  EXPECT_THAT(ParseStorageMetadata("{").status().message(), HasSubstr("not a JSON document"));
  EXPECT_THAT(ParseStorageTableSchema(R"({"Schema":"s","Table":"t"})").status().message(),
              HasSubstr("TableVersion: missing"));
  EXPECT_THAT(ParseStorageTableSchema(R"({"Schema":"s","TableVersion":1,"TableColumns":[{}]})")
                  .status()
                  .message(),
              HasSubstr("TableColumns[0].ColumnName: missing"));
  EXPECT_THAT(ParseStorageTableSchema(R"({"Schema":"s","TableVersion":1,"TableColumns":)"
                                      R"([{"ColumnName":"a","ColumnIsPk":"yes"}]})")
                  .status()
                  .message(),
              HasSubstr("\"yes\" is not \"true\" or \"false\""));
  EXPECT_THAT(ParseStorageTableSchema(R"({"Schema":"s","TableVersion":1,"TableColumns":)"
                                      R"([{"ColumnName":"a"}],"TableColumnsTotal":"2"})")
                  .status()
                  .message(),
              HasSubstr("says 2 columns, TableColumns has 1"));
}

}  // namespace
}  // namespace isowatch::tidb
