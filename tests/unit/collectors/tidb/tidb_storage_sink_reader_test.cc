// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/storage_sink_reader.h"
#include "collectors/tidb/txn_grouper.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/collectors/tidb/samples.h"

namespace isowatch::tidb {
namespace {

using ::testing::HasSubstr;
using testing::ReadSample;
using testing::SplitRecords;

namespace fs = std::filesystem;

void WriteFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

constexpr const char* kSchema = R"({"Table":"update_pk","Schema":"test","Version":1,)"
                                R"("TableVersion":450253245302439000,"Query":"",)"
                                R"("TableColumns":[{"ColumnName":"id","ColumnType":"INT",)"
                                R"("ColumnIsPk":"true"},{"ColumnName":"pad",)"
                                R"("ColumnType":"VARCHAR"}],"TableColumnsTotal":"2"})";

// The recorded result file's records (without the test's comments), split in two halves.
std::pair<std::string, std::string> RecordedHalves() {
  std::vector<std::string> records;
  for (const std::string& line : SplitRecords(
           ReadSample("csv-storage-update-pk/clustered/result/changefeed1_pk.res"), "\n")) {
    if (!line.empty() && line[0] != '#') records.push_back(line + "\n");
  }
  std::pair<std::string, std::string> halves;
  for (size_t i = 0; i < records.size(); ++i) (i < 6 ? halves.first : halves.second) += records[i];
  return halves;
}

size_t CountRows(const std::vector<CdcEvent>& events) {
  return std::count_if(events.begin(), events.end(),
                       [](const CdcEvent& e) { return std::holds_alternative<RowChange>(e); });
}

class StorageSinkReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.Path().empty());
    root_ = dir_.Path();
    WriteFile(root_ / "test/meta/schema_450253245302438000_0000000001.json",
              R"({"Table":"","Schema":"test","Version":1,"TableVersion":450253245302438000,)"
              R"("Query":"CREATE DATABASE test","Type":1,"TableColumns":null,)"
              R"("TableColumnsTotal":0})");
    WriteFile(root_ / "test/update_pk/meta/schema_450253245302439000_3131721815.json", kSchema);
  }

  isowatch::testing::TempDir dir_{"tidb-storage"};
  fs::path root_;
  StorageCsvOptions options_{.terminator = "\n"};
};

TEST_F(StorageSinkReaderTest, ReadsNewFilesAndTheCheckpointThroughTheGrouper) {
  const auto [first, second] = RecordedHalves();
  const fs::path data = root_ / "test/update_pk/450253245302439000/2024-06-05";
  WriteFile(data / "CDC00000000000000000001.csv", first);
  WriteFile(data / "meta/CDC.index", "CDC00000000000000000001.csv\n");
  StorageSinkReader reader(root_.string(), StorageSinkReader::Format::kCsv, options_);
  TxnGrouper grouper(1);

  auto events = reader.Poll();
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(CountRows(*events), 6u);
  EXPECT_EQ(events->size(), 6u);  // no metadata yet: no watermark
  for (CdcEvent& event : *events) ASSERT_TRUE(grouper.Add(0, std::move(event)).ok());
  EXPECT_TRUE(grouper.Release().empty());

  // The sink writes the second file, then moves the checkpoint past the first four
  // transactions (450253245302439944 .. ...948).
  WriteFile(data / "CDC00000000000000000002.csv", second);
  WriteFile(root_ / "metadata", R"({"checkpoint-ts":450253245302439949})");
  events = reader.Poll();
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(CountRows(*events), 9u);  // only the new file
  ASSERT_TRUE(std::holds_alternative<Watermark>(events->back()));
  for (CdcEvent& event : *events) ASSERT_TRUE(grouper.Add(0, std::move(event)).ok());
  std::vector<CdcTxn> released = grouper.Release();
  ASSERT_EQ(released.size(), 4u);
  EXPECT_EQ(released[0].rows.size(), 2u);
  EXPECT_EQ(released[3].commit_ts, 450253245302439948u);
  EXPECT_EQ(reader.files_read(), 2u);

  // Nothing new: no rows, and the same checkpoint is not sent again.
  events = reader.Poll();
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());

  WriteFile(root_ / "metadata", R"({"checkpoint-ts":450253245485940754})");
  events = reader.Poll();
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  ASSERT_TRUE(grouper.Add(0, std::move((*events)[0])).ok());
  released = grouper.Release();
  EXPECT_EQ(released.size(), 4u);  // the last four transactions
  EXPECT_EQ(grouper.stats().rows, 15u);
  EXPECT_EQ(grouper.pending_txns(), 0u);
}

TEST_F(StorageSinkReaderTest, ReadsCanalJsonDataFiles) {
  const fs::path data =
      root_ / "test_active/message/464043256649875000/CDC00000000000000000001.json";
  WriteFile(data, ReadSample("canal-json-storage-active-active/DataContent1.json") + "\r\n");
  StorageSinkReader reader(root_.string(), StorageSinkReader::Format::kCanalJson);
  const auto events = reader.Poll();
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(CountRows(*events), 8u);
}

TEST_F(StorageSinkReaderTest, NamesTheFileAndLineOfAMalformedRecord) {
  const fs::path data = root_ / "test/update_pk/450253245302439000/CDC00000000000000000001.csv";
  WriteFile(data, "\"I\",\"update_pk\",\"test\",450253245302439944,1,\"a\"\n\"I\",\"update_pk\"\n");
  StorageSinkReader reader(root_.string(), StorageSinkReader::Format::kCsv, options_);
  const auto events = reader.Poll();
  ASSERT_FALSE(events.ok());
  EXPECT_THAT(events.status().message(), HasSubstr(data.string() + ": storage csv: line 2"));
  EXPECT_EQ(reader.files_read(), 0u);  // tried again on the next poll
}

TEST_F(StorageSinkReaderTest, RefusesADataFileWithoutItsSchema) {
  const fs::path data = root_ / "test/update_pk/450253245302439999/CDC00000000000000000001.csv";
  WriteFile(data, "\"I\",\"update_pk\",\"test\",450253245302439944,1,\"a\"\n");
  StorageSinkReader reader(root_.string(), StorageSinkReader::Format::kCsv, options_);
  const auto events = reader.Poll();
  EXPECT_EQ(events.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(events.status().message(),
              HasSubstr("no schema file for table version 450253245302439999"));
}

TEST_F(StorageSinkReaderTest, RefusesAMalformedMetadataFile) {
  WriteFile(root_ / "metadata", R"({"checkpoint":1})");
  StorageSinkReader reader(root_.string(), StorageSinkReader::Format::kCsv, options_);
  const auto events = reader.Poll();
  ASSERT_FALSE(events.ok());
  EXPECT_THAT(events.status().message(),
              HasSubstr("metadata: storage metadata: checkpoint-ts: missing"));
}

}  // namespace
}  // namespace isowatch::tidb
