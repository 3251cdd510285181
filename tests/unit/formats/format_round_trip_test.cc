// SPDX-License-Identifier: Apache-2.0
// Every black-box format against the checker: a simulator history with planted faults, reduced to
// what the format can say, written in the format, detected and read back, is judged exactly as
// the reduced history is. And detection names every format's own sample.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/without_timestamps.h"
#include "isowatch/sim/simulator.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/source_dir.h"
#include "tests/testing/temp_dir.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::HistoryBuilder;
using history::Op;
using history::OpKind;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;
using ::testing::Not;

// What each format can say, as a filter on a timestamp-free history.
struct Reduction {
  bool zero_initial = false;               // initial value 0, absent reads read 0 (text, dbcop)
  bool committed_only = false;             // only committed transactions (Cobra, ViperBench)
  bool aborted_writes_only = false;        // aborted transactions keep their writes only (text)
  bool drop_unknown = false;               // no transaction of unknown outcome (text, dbcop)
  bool uncommitted_reads_unknown = false;  // reads of others are not observations (EDN)
};

// `h` reduced as `r` says. Reads of values only a dropped transaction wrote are dropped too (a
// log of committed transactions cannot name their writer).
History Reduce(const History& h, const Reduction& r) {
  std::map<std::pair<uint32_t, int64_t>, bool> kept_writes;  // (key, value) -> kept
  auto keeps = [&r](const history::Transaction& t) {
    if (r.committed_only && !t.committed()) return false;
    if (r.drop_unknown && t.status == TxnStatus::kUnknown) return false;
    return true;
  };
  for (uint32_t i = 0; i < h.size(); ++i) {
    const history::Transaction& t = h.txn(TxnId(i));
    for (const Op& op : h.ops(TxnId(i))) {
      if (op.is_write() && op.value().is_int() && keeps(t)) {
        kept_writes[{op.key().value(), op.value().as_int()}] = true;
      }
    }
  }
  HistoryBuilder b;
  if (r.zero_initial) b.SetDefaultInitialValue(Value::Int(0));
  for (uint32_t i = 0; i < h.size(); ++i) {
    const history::Transaction& t = h.txn(TxnId(i));
    if (!keeps(t)) continue;
    const history::TxnHeader header{.id = h.txn_name(TxnId(i)),
                                    .id_numeric = t.ext_id_numeric,
                                    .session = h.session_name(t.session),
                                    .session_numeric = h.session_numeric(t.session),
                                    .status = t.status};
    EXPECT_TRUE(b.BeginTxn(header).ok());
    for (const Op& op : h.ops(TxnId(i))) {
      const KeyId k = b.IntKey(h.key(op.key()).payload);
      if (op.is_write()) {
        if (op.kind() == OpKind::kWrite) b.Write(k, op.value());
        if (op.kind() == OpKind::kAppend) b.Append(k, op.value());
        continue;
      }
      if (r.aborted_writes_only && !t.committed()) continue;
      if (op.unknown() || (r.uncommitted_reads_unknown && !t.committed())) {
        b.UnknownRead(k);
      } else if (op.kind() == OpKind::kListRead) {
        std::span<const Value> seen = h.list_elements(op);
        b.ListRead(k, std::vector<Value>(seen.begin(), seen.end()));
      } else if (op.value().absent()) {
        b.Read(k, r.zero_initial ? Value::Int(0) : Value::Absent());
      } else if (!r.committed_only ||
                 kept_writes.contains({op.key().value(), op.value().as_int()})) {
        b.Read(k, op.value());
      }
    }
    b.EndTxn();
  }
  auto out = std::move(b).Finish();
  EXPECT_TRUE(out.ok()) << out.status();
  return *std::move(out);
}

// adya's findings counted by anomaly, and the graph's edge counts: independent of how a format
// names and orders transactions (which decides which of several cycles a search meets first).
std::string Judge(const History& h) {
  checkers::adya::AdyaResult r = checkers::adya::CheckAdya(h);
  std::map<std::string, int> found;
  for (const verdict::Violation& v : r.violations) ++found[verdict::AnomalyName(v.anomaly)];
  std::string out = fmt::format("nodes {} ww {} wr {} rw {} complete {}\n", r.stats.nodes,
                                r.stats.ww_edges, r.stats.wr_edges, r.stats.rw_edges, r.complete);
  for (const auto& [what, n] : found) out += fmt::format("{} x{}\n", what, n);
  return out;
}

struct FormatCase {
  FileFormat format;
  Reduction reduction;
  history::DataModel data;
};

class FormatRoundTripTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(FormatRoundTripTest, PlantedFaultsAreJudgedAlikeAfterARoundTrip) {
  const FormatCase& c = GetParam();
  testing::TempDir dir;
  int violations = 0;
  std::vector<sim::Fault> faults = {sim::Fault::kLostUpdate, sim::Fault::kAbortedRead,
                                    sim::Fault::kFracturedVisibility};
  if (c.data == history::DataModel::kKeyValue) faults.push_back(sim::Fault::kIntermediateRead);
  for (sim::Fault fault : faults) {
    sim::WorkloadOptions o;
    o.seed = 11;
    o.txns = 400;
    o.sessions = 6;
    o.keys = 20;
    o.level = verdict::IsolationLevel::kSerializable;
    o.data = c.data;
    if (c.data == history::DataModel::kList) o.max_appends_per_key = 24;
    o.faults = {{.fault = fault, .rate = 0.05}};
    auto simulated = sim::Simulate(o);
    ASSERT_TRUE(simulated.ok()) << simulated.status();
    absl::StatusOr<History> bare = history::WithoutTimestamps(simulated->history);
    ASSERT_TRUE(bare.ok()) << bare.status();
    const History reduced = Reduce(*bare, c.reduction);
    const std::string path = (std::filesystem::path(dir.Path()) /
                              fmt::format("{}.{}", sim::FaultName(fault), FileFormatName(c.format)))
                                 .string();
    absl::Status written = WriteHistoryFile(reduced, path, c.format);
    ASSERT_TRUE(written.ok()) << sim::FaultName(fault) << ": " << written;
    FileFormat used = FileFormat::kAuto;
    absl::StatusOr<History> back = ReadHistoryFile(path, FileFormat::kAuto, {}, &used);
    ASSERT_TRUE(back.ok()) << sim::FaultName(fault) << ": " << back.status();
    EXPECT_EQ(used, c.format) << "detected as " << FileFormatName(used);
    const std::string want = Judge(reduced);
    EXPECT_EQ(Judge(*back), want) << sim::FaultName(fault);
    violations += static_cast<int>(std::count(want.begin(), want.end(), '\n')) - 1;
  }
  EXPECT_GT(violations, 0) << "no planted fault survived the reduction";
}

std::string CaseName(const ::testing::TestParamInfo<FormatCase>& info) {
  std::string name = fmt::format("{}_{}", FileFormatName(info.param.format),
                                 info.param.data == history::DataModel::kList ? "list" : "kv");
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, FormatRoundTripTest,
    ::testing::Values(
        FormatCase{
            FileFormat::kEdn, {.uncommitted_reads_unknown = true}, history::DataModel::kKeyValue},
        FormatCase{
            FileFormat::kEdn, {.uncommitted_reads_unknown = true}, history::DataModel::kList},
        FormatCase{FileFormat::kElleJson,
                   {.uncommitted_reads_unknown = true},
                   history::DataModel::kKeyValue},
        FormatCase{
            FileFormat::kElleJson, {.uncommitted_reads_unknown = true}, history::DataModel::kList},
        FormatCase{FileFormat::kText,
                   {.zero_initial = true, .aborted_writes_only = true, .drop_unknown = true},
                   history::DataModel::kKeyValue},
        FormatCase{FileFormat::kDbcopBincode,
                   {.zero_initial = true, .drop_unknown = true},
                   history::DataModel::kKeyValue},
        FormatCase{FileFormat::kCobra, {.committed_only = true}, history::DataModel::kKeyValue},
        FormatCase{FileFormat::kViper, {.committed_only = true}, history::DataModel::kKeyValue},
        FormatCase{FileFormat::kNative, {}, history::DataModel::kList}),
    CaseName);

// Each format's own samples are detected as that format, and a file no format fits is refused
// with every format's reason.
TEST(FormatDetectionTest, SamplesAreDetectedByContent) {
  const std::filesystem::path root =
      std::filesystem::path(testing::SourceDir()) / "tests/histories/formats";
  const std::vector<std::pair<std::string, FileFormat>> samples = {
      {"edn/list_append.edn", FileFormat::kEdn},
      {"edn/list_append_wrapped.edn", FileFormat::kEdn},
      {"edn/rw_register.edn", FileFormat::kEdn},
      {"edn/rw_register.json", FileFormat::kElleJson},
      {"text/polysi_plume.txt", FileFormat::kText},
      {"text/isovista.txt", FileFormat::kText},
      {"dbcop/sample.bincode", FileFormat::kDbcopBincode},
      {"dbcop/new.json", FileFormat::kDbcopJson},
      {"cobra/sample", FileFormat::kCobra},
      {"viper/sample", FileFormat::kViper},
      {"viper/ranges", FileFormat::kViper}};
  for (const auto& [name, format] : samples) {
    absl::StatusOr<FileFormat> detected = DetectFileFormat((root / name).string());
    ASSERT_TRUE(detected.ok()) << name << ": " << detected.status();
    EXPECT_EQ(*detected, format) << name << " detected as " << FileFormatName(*detected);
    absl::StatusOr<History> h = ReadHistoryFile((root / name).string(), FileFormat::kAuto, {});
    EXPECT_TRUE(h.ok()) << name << ": " << h.status();
  }
  testing::TempDir dir;
  const std::string odd = (std::filesystem::path(dir.Path()) / "odd.txt").string();
  {
    std::ofstream out(odd);
    out << "hello\n";
  }
  absl::StatusOr<FileFormat> none = DetectFileFormat(odd);
  ASSERT_FALSE(none.ok());
  for (const FormatDescription& d : Formats()) {
    if (!d.directory) {
      EXPECT_THAT(std::string(none.status().message()), HasSubstr(d.name));
    }
  }
}

// A history with database timestamps is refused by every writable format that cannot hold them,
// never written without them; without its timestamps, they are not what stops it.
TEST(FormatWriteTest, BlackBoxFormatsRefuseTimestamps) {
  sim::WorkloadOptions o;
  o.txns = 50;
  o.keys = 5;
  o.count_committed = true;
  o.record_aborted = false;
  absl::StatusOr<sim::SimResult> simulated = sim::Simulate(o);
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  ASSERT_TRUE(simulated->history.has_commit_timestamps());
  absl::StatusOr<History> bare = history::WithoutTimestamps(simulated->history);
  ASSERT_TRUE(bare.ok()) << bare.status();
  testing::TempDir dir;
  int black_box = 0;
  for (const FormatDescription& d : Formats()) {
    if (!d.writable || d.timestamps) continue;
    ++black_box;
    const std::string path =
        (std::filesystem::path(dir.Path()) / fmt::format("{}{}", d.name, black_box)).string();
    absl::Status timed = WriteHistoryFile(simulated->history, path, d.format);
    EXPECT_EQ(timed.code(), absl::StatusCode::kInvalidArgument) << d.name;
    EXPECT_THAT(std::string(timed.message()), HasSubstr("--drop-timestamps")) << d.name;
    EXPECT_FALSE(std::filesystem::exists(path)) << d.name << ": written anyway";
    absl::Status untimed = WriteHistoryFile(*bare, path, d.format);
    EXPECT_THAT(std::string(untimed.message()), Not(HasSubstr("timestamps"))) << d.name;
  }
  EXPECT_EQ(black_box, 5);  // text, cobra, dbcop (file and directory), viper
}

// A history a format turns out part-way not to express leaves no partial file, and an older file
// at the path stays as it was: the writer writes beside it and renames only a whole file.
TEST(FormatWriteTest, AFailedWriteLeavesTheOldFile) {
  history::HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.Write(b.IntKey(1), history::Value::Int(1));
  b.EndTxn();
  // EDN's nil in an aborted transaction's read means "unknown", not "absent": it cannot say this.
  ASSERT_TRUE(b.BeginTxn({.id = "2", .session = "s", .status = history::TxnStatus::kAborted}).ok());
  b.Read(b.IntKey(2), history::Value::Absent());
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  testing::TempDir dir;
  const std::string path = (std::filesystem::path(dir.Path()) / "h.edn").string();
  std::ofstream(path) << "old\n";
  const absl::Status written = WriteHistoryFile(*h, path, FileFormat::kEdn);
  EXPECT_EQ(written.code(), absl::StatusCode::kInvalidArgument) << written;
  std::ifstream in(path);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "old\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  // A history the format can say replaces the file whole.
  history::HistoryBuilder ok;
  ASSERT_TRUE(ok.BeginTxn({.id = "1", .session = "s"}).ok());
  ok.Write(ok.IntKey(1), history::Value::Int(1));
  ok.EndTxn();
  absl::StatusOr<History> sayable = std::move(ok).Finish();
  ASSERT_TRUE(sayable.ok()) << sayable.status();
  ASSERT_TRUE(WriteHistoryFile(*sayable, path, FileFormat::kEdn).ok());
  absl::StatusOr<History> back = ReadHistoryFile(path, FileFormat::kEdn, {});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(FormatDetectionTest, DbcopRunDirectories) {
  testing::TempDir dir;
  const std::filesystem::path sample =
      std::filesystem::path(testing::SourceDir()) / "tests/histories/formats/dbcop/sample.bincode";
  std::filesystem::create_directories(std::filesystem::path(dir.Path()) / "run/hist-00000");
  std::filesystem::copy_file(sample,
                             std::filesystem::path(dir.Path()) / "run/hist-00000/history.bincode");
  const std::string run = (std::filesystem::path(dir.Path()) / "run").string();
  EXPECT_EQ(*DetectFileFormat(run), FileFormat::kDbcopBincode);
  absl::StatusOr<History> one = ReadHistoryFile(run, FileFormat::kAuto, {});
  ASSERT_TRUE(one.ok()) << one.status();
  std::filesystem::create_directories(std::filesystem::path(dir.Path()) / "run/hist-00001");
  std::filesystem::copy_file(sample,
                             std::filesystem::path(dir.Path()) / "run/hist-00001/history.bincode");
  absl::StatusOr<History> two = ReadHistoryFile(run, FileFormat::kDbcopBincode, {});
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(std::string(two.status().message()), HasSubstr("2 histories"));
}

}  // namespace
}  // namespace isowatch::formats
