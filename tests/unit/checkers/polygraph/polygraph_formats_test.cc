// SPDX-License-Identifier: Apache-2.0
// The polygraph checker gives the same verdicts on one history written in each black-box format
// it is meant for (text, dbcop, Cobra, Viper) and read back, as on the history itself.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/without_timestamps.h"
#include "isowatch/sim/simulator.h"

#include "tests/testing/temp_dir.h"

namespace isowatch::checkers::polygraph {
namespace {

using formats::FileFormat;
using history::History;
using history::Op;
using history::OpKind;
using history::Value;

// What the four formats hold: the committed transactions of `h` (without timestamps), integer
// values, no reads of values only a dropped transaction wrote, and reads of the initial value as
// reads of 0 (`zero_initial`: text, dbcop) or of nothing (Cobra, Viper).
History Portable(const History& h, bool zero_initial) {
  std::map<std::pair<uint32_t, int64_t>, bool> committed_writes;
  for (uint64_t i = 0; i < h.size(); ++i) {
    if (!h.txn(TxnId(i)).committed()) continue;
    for (const Op& op : h.ops(TxnId(i))) {
      if (op.kind() == OpKind::kWrite) committed_writes[{op.key().value(), op.value().as_int()}];
    }
  }
  history::HistoryBuilder b;
  if (zero_initial) b.SetDefaultInitialValue(Value::Int(0));
  for (uint64_t i = 0; i < h.size(); ++i) {
    const history::Transaction& t = h.txn(TxnId(i));
    if (!t.committed()) continue;
    if (!b.BeginTxn({.id = h.txn_name(TxnId(i)), .session = h.session_name(t.session)}).ok()) {
      std::abort();
    }
    for (const Op& op : h.ops(TxnId(i))) {
      const KeyId k = b.IntKey(h.key(op.key()).payload);
      if (op.kind() == OpKind::kWrite) {
        b.Write(k, op.value());
      } else if (op.kind() == OpKind::kRead && !op.unknown()) {
        if (op.value().absent()) {
          b.Read(k, zero_initial ? Value::Int(0) : Value::Absent());
        } else if (committed_writes.contains({op.key().value(), op.value().as_int()})) {
          b.Read(k, op.value());
        }
      }
    }
    b.EndTxn();
  }
  absl::StatusOr<History> out = std::move(b).Finish();
  if (!out.ok()) std::abort();
  return *std::move(out);
}

// The verdict at each level, and the findings of the checks before the graph counted by anomaly:
// independent of how a format names and orders transactions (which decides which of several
// cycles a search meets first, and so how a cycle is classified).
std::string Judge(const History& h) {
  const PolygraphResult r = CheckPolygraph(h);
  std::map<std::string, int> found;
  bool ser = true;
  bool si = true;
  for (const verdict::Violation& v : r.violations) {
    const bool both = v.levels.size() > 1;
    ser = ser && !(both || v.level == verdict::IsolationLevel::kSerializable);
    si = si && !(both || v.level == verdict::IsolationLevel::kSnapshotIsolation);
    if (both) ++found[verdict::AnomalyName(v.anomaly)];
  }
  std::string out = fmt::format("complete {} ser {} si {}\n", r.complete, ser ? "valid" : "invalid",
                                si ? "valid" : "invalid");
  for (const auto& [what, n] : found) out += fmt::format("{} x{}\n", what, n);
  return out;
}

TEST(PolygraphFormatsTest, SameVerdictInEveryBlackBoxFormat) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  int invalid = 0;
  for (sim::Fault fault : {sim::Fault::kLostUpdate, sim::Fault::kFracturedVisibility,
                           sim::Fault::kNonRepeatableRead, sim::Fault::kStaleSnapshot}) {
    absl::StatusOr<sim::SimResult> simulated =
        sim::Simulate({.sessions = 6,
                       .txns = 300,
                       .keys = 20,
                       .faults = {{.fault = fault, .rate = 0.05}},
                       .seed = 5});
    ASSERT_TRUE(simulated.ok()) << simulated.status();
    absl::StatusOr<History> bare = history::WithoutTimestamps(simulated->history);
    ASSERT_TRUE(bare.ok()) << bare.status();
    const History zero = Portable(*bare, true);
    const History absent = Portable(*bare, false);
    const std::string want = Judge(zero);
    EXPECT_EQ(Judge(absent), want) << sim::FaultName(fault);
    invalid += want.find("invalid") != std::string::npos ? 1 : 0;
    for (FileFormat format :
         {FileFormat::kText, FileFormat::kDbcopBincode, FileFormat::kCobra, FileFormat::kViper}) {
      const std::string path =
          (std::filesystem::path(dir.Path()) /
           fmt::format("{}.{}", sim::FaultName(fault), formats::FileFormatName(format)))
              .string();
      const bool zero_initial = format == FileFormat::kText || format == FileFormat::kDbcopBincode;
      absl::Status written = formats::WriteHistoryFile(zero_initial ? zero : absent, path, format);
      ASSERT_TRUE(written.ok()) << formats::FileFormatName(format) << ": " << written;
      absl::StatusOr<History> back = formats::ReadHistoryFile(path, format, {});
      ASSERT_TRUE(back.ok()) << formats::FileFormatName(format) << ": " << back.status();
      EXPECT_EQ(Judge(*back), want)
          << sim::FaultName(fault) << " in " << formats::FileFormatName(format);
    }
  }
  EXPECT_GE(invalid, 2) << "too few planted faults visible to compare verdicts on";
}

}  // namespace
}  // namespace isowatch::checkers::polygraph
