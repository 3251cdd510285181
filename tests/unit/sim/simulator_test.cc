// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/simulator.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "isowatch/history/history.h"
#include "isowatch/workload/key_chooser.h"
#include "isowatch/workload/rng.h"

namespace isowatch::sim {
namespace {

using history::DataModel;
using history::History;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using verdict::Anomaly;
using verdict::ExtKind;
using verdict::IsolationLevel;
using workload::Distribution;

WorkloadOptions Small(uint64_t seed = 1) {
  WorkloadOptions o;
  o.sessions = 8;
  o.txns = 600;
  o.ops_per_txn = 6;
  o.keys = 50;
  o.seed = seed;
  return o;
}

SimResult RunSim(const WorkloadOptions& o) {
  auto r = Simulate(o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return SimResult{};
  return *std::move(r);
}

// Everything a history holds, as text.
std::string Dump(const History& h) {
  std::string out;
  for (uint32_t i = 0; i < h.size(); ++i) {
    const Transaction& t = h.txn(TxnId(i));
    out += fmt::format("{} s={} seq={} {} {} {}:", h.txn_name(TxnId(i)), h.session_name(t.session),
                       t.seq, history::TxnStatusName(t.status), t.start.ToString(),
                       t.has_commit ? t.commit.ToString() : "-");
    for (const auto& op : h.ops(t)) {
      out += fmt::format(" {}({}", history::OpKindName(op.kind()), h.KeyToString(op.key()));
      if (op.kind() == OpKind::kListRead) {
        out += "," + h.ListToString(h.list_elements(op));
      } else {
        out += "," + h.ValueToString(op.value());
      }
      out += ")";
    }
    out += "\n";
  }
  return out;
}

std::string DumpExpected(const std::vector<ExpectedViolation>& expected) {
  std::string out;
  for (const auto& e : expected) {
    out += fmt::format("{} {} [{}] {} {}\n", verdict::AnomalyName(e.anomaly),
                       verdict::ExtKindName(e.ext_kind), fmt::join(e.txns, ","), e.key.value_or(-1),
                       FaultName(e.cause));
  }
  return out;
}

bool ReadOnly(const History& h, const Transaction& t) {
  for (const auto& op : h.ops(t)) {
    if (op.is_write()) return false;
  }
  return true;
}

TEST(SimulatorTest, SameOptionsGiveTheSameHistory) {
  WorkloadOptions o = Small(7);
  o.faults = {{Fault::kStaleSnapshot, 0.05}, {Fault::kLostUpdate, 0.05}};
  SimResult a = RunSim(o);
  SimResult b = RunSim(o);
  EXPECT_EQ(Dump(a.history), Dump(b.history));
  EXPECT_EQ(DumpExpected(a.expected), DumpExpected(b.expected));
  EXPECT_EQ(a.committed, b.committed);
  o.seed = 8;
  SimResult c = RunSim(o);
  EXPECT_NE(Dump(a.history), Dump(c.history));
}

TEST(SimulatorTest, CountsAddUp) {
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    for (bool record_aborted : {true, false}) {
      WorkloadOptions o = Small();
      o.data = data;
      o.record_aborted = record_aborted;
      SimResult r = RunSim(o);
      EXPECT_EQ(r.committed + r.aborted, o.txns);
      EXPECT_GT(r.aborted, 0u);
      EXPECT_EQ(r.history.size(), record_aborted ? o.txns : r.committed);
      size_t aborted = 0;
      for (const Transaction& t : r.history.txns()) aborted += t.status == TxnStatus::kAborted;
      EXPECT_EQ(aborted, record_aborted ? r.aborted : 0u);
    }
  }
}

TEST(SimulatorTest, CountCommittedRetriesUntilEnoughCommit) {
  WorkloadOptions o = Small(5);
  o.keys = 5;  // heavy contention: many aborts
  o.count_committed = true;
  auto r = Simulate(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->committed, o.txns);
  EXPECT_GT(r->aborted, 0u);
  EXPECT_EQ(r->history.size(), r->committed + r->aborted);
}

TEST(SimulatorTest, NoTransactionsGiveAnEmptyHistory) {
  WorkloadOptions o = Small();
  o.txns = 0;
  SimResult r = RunSim(o);
  EXPECT_EQ(r.history.size(), 0u);
  EXPECT_EQ(r.committed, 0u);
}

TEST(SimulatorTest, TimestampsFollowTheStore) {
  for (IsolationLevel level : {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
    WorkloadOptions o = Small();
    o.level = level;
    o.read_ratio = 0.8;
    o.ops_per_txn = 3;
    SimResult r = RunSim(o);
    size_t read_only = 0;
    std::set<history::Timestamp> writer_commits;
    for (const Transaction& t : r.history.txns()) {
      ASSERT_TRUE(t.has_start);
      if (t.status == TxnStatus::kAborted) {
        EXPECT_FALSE(t.has_commit);
        continue;
      }
      ASSERT_TRUE(t.has_commit);
      EXPECT_LE(t.start, t.commit);
      if (ReadOnly(r.history, t)) {
        EXPECT_EQ(t.start, t.commit);
        ++read_only;
      } else {
        EXPECT_LT(t.start, t.commit);
        // The oracle gives every committing writer its own timestamp.
        EXPECT_TRUE(writer_commits.insert(t.commit).second);
      }
    }
    EXPECT_GT(read_only, 10u);
  }
}

TEST(SimulatorTest, SessionsRunOneTransactionAtATime) {
  WorkloadOptions o = Small();
  o.sessions = 5;
  SimResult r = RunSim(o);
  const History& h = r.history;
  EXPECT_EQ(h.session_count(), 5u);
  size_t checked = 0;
  for (uint32_t i = 0; i < h.size(); ++i) {
    const Transaction& t = h.txn(TxnId(i));
    EXPECT_TRUE(h.session_numeric(t.session));
    // The nearest committed predecessor committed at or before this transaction's start.
    TxnId p = t.session_prev;
    while (p.valid() && !h.txn(p).committed()) p = h.txn(p).session_prev;
    if (!p.valid()) continue;
    EXPECT_LE(h.txn(p).commit, t.start) << h.txn_name(TxnId(i));
    ++checked;
  }
  EXPECT_GT(checked, 500u);
}

// With the session-order fault, exactly the transactions the ground truth names start before
// their session predecessor committed.
TEST(SimulatorTest, OnlySessionFaultsBreakSessionOrder) {
  WorkloadOptions o = Small();
  o.faults = {{Fault::kSessionOrder, 0.4}};
  SimResult r = RunSim(o);
  const History& h = r.history;
  std::set<std::pair<std::string, std::string>> broken;
  for (uint32_t i = 0; i < h.size(); ++i) {
    const Transaction& t = h.txn(TxnId(i));
    if (!t.committed()) continue;
    TxnId p = t.session_prev;
    while (p.valid() && !h.txn(p).committed()) p = h.txn(p).session_prev;
    if (p.valid() && h.txn(p).commit > t.start) {
      broken.insert({std::string(h.txn_name(TxnId(i))), std::string(h.txn_name(p))});
    }
  }
  std::set<std::pair<std::string, std::string>> expected;
  for (const ExpectedViolation& e : r.expected) {
    ASSERT_EQ(e.anomaly, Anomaly::kSession);
    expected.insert({e.txns[0], e.txns[1]});
  }
  EXPECT_GT(broken.size(), 15u);
  EXPECT_EQ(broken, expected);
}

TEST(SimulatorTest, IdsAreSequentialNumbers) {
  SimResult r = RunSim(Small());
  for (uint32_t i = 0; i < r.history.size(); ++i) {
    EXPECT_EQ(r.history.txn_name(TxnId(i)), std::to_string(i + 1));
    EXPECT_TRUE(r.history.txn(TxnId(i)).ext_id_numeric);
  }
}

TEST(SimulatorTest, WrittenValuesAreUnique) {
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    WorkloadOptions o = Small();
    o.data = data;
    SimResult r = RunSim(o);
    std::set<int64_t> seen;
    size_t writes = 0;
    size_t reads = 0;
    for (const Transaction& t : r.history.txns()) {
      for (const auto& op : r.history.ops(t)) {
        if (op.is_write()) {
          ++writes;
          ASSERT_TRUE(op.value().is_int());
          EXPECT_TRUE(seen.insert(op.value().as_int()).second);
        } else {
          ++reads;
          EXPECT_EQ(op.kind(), data == DataModel::kList ? OpKind::kListRead : OpKind::kRead);
        }
      }
    }
    EXPECT_GT(writes, 1000u);
    EXPECT_GT(reads, 1000u);
    EXPECT_EQ(r.history.data_model(),
              data == DataModel::kList ? history::DataModel::kList : history::DataModel::kKeyValue);
  }
}

TEST(SimulatorTest, ListsGrowByAppends) {
  WorkloadOptions o = Small();
  o.data = DataModel::kList;
  o.keys = 5;
  SimResult r = RunSim(o);
  size_t longest = 0;
  for (const Transaction& t : r.history.txns()) {
    for (const auto& op : r.history.ops(t)) {
      if (op.kind() == OpKind::kListRead) {
        longest = std::max(longest, r.history.list_elements(op).size());
      }
    }
  }
  EXPECT_GT(longest, 50u);
}

TEST(SimulatorTest, RetiredListKeysKeepListsShort) {
  WorkloadOptions o = Small();
  o.data = DataModel::kList;
  o.keys = 5;
  o.max_appends_per_key = 10;
  SimResult r = RunSim(o);
  size_t longest = 0;
  for (const Transaction& t : r.history.txns()) {
    for (const auto& op : r.history.ops(t)) {
      if (op.kind() == OpKind::kListRead) {
        longest = std::max(longest, r.history.list_elements(op).size());
      }
    }
  }
  EXPECT_LE(longest, 10u);
  EXPECT_GE(longest, 5u);
  EXPECT_GT(r.history.key_count(), 50u);  // about 600 * 6 / 2 appends, 10 per key
  o.data = DataModel::kKeyValue;
  EXPECT_FALSE(Simulate(o).ok());
}

TEST(SimulatorTest, RepeatedReadsAndDoubleWritesOccur) {
  SimResult r = RunSim(Small());
  size_t repeated_reads = 0;
  size_t double_writes = 0;
  for (const Transaction& t : r.history.txns()) {
    std::map<KeyId, int> reads;
    std::map<KeyId, int> writes;
    for (const auto& op : r.history.ops(t)) (op.is_read() ? reads : writes)[op.key()]++;
    for (const auto& [k, n] : reads) repeated_reads += n > 1;
    for (const auto& [k, n] : writes) double_writes += n > 1;
  }
  EXPECT_GT(repeated_reads, 50u);
  EXPECT_GT(double_writes, 50u);
}

TEST(SimulatorTest, WorkloadSkewShowsInTheHistory) {
  auto hottest_share = [](Distribution dist) {
    WorkloadOptions o = Small();
    o.keys = 1000;
    o.dist = dist;
    SimResult r = RunSim(o);
    std::map<int64_t, int> count;
    int total = 0;
    for (const Transaction& t : r.history.txns()) {
      for (const auto& op : r.history.ops(t)) {
        ++count[r.history.key(op.key()).payload];
        ++total;
      }
    }
    int top = 0;
    for (int64_t k = 0; k < 10; ++k) top += count[k];
    return static_cast<double>(top) / total;
  };
  double uniform = hottest_share(Distribution::kUniform);
  EXPECT_LT(uniform, 0.03);
  EXPECT_GT(hottest_share(Distribution::kZipfian), 10 * uniform);
  EXPECT_GT(hottest_share(Distribution::kHotspot), 3 * uniform);
}

TEST(SimulatorTest, RejectsInvalidOptions) {
  auto invalid = [](auto mutate) {
    WorkloadOptions o = Small();
    mutate(o);
    auto r = Simulate(o);
    return !r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(invalid([](WorkloadOptions& o) { o.sessions = 0; }));
  EXPECT_TRUE(invalid([](WorkloadOptions& o) { o.keys = 0; }));
  EXPECT_TRUE(invalid([](WorkloadOptions& o) { o.ops_per_txn = 0; }));
  EXPECT_TRUE(invalid([](WorkloadOptions& o) { o.read_ratio = 1.5; }));
  EXPECT_TRUE(invalid([](WorkloadOptions& o) { o.zipf_theta = 0; }));
  EXPECT_TRUE(invalid([](WorkloadOptions& o) { o.faults = {{Fault::kLostUpdate, -0.1}}; }));
  EXPECT_TRUE(invalid([](WorkloadOptions& o) {
    o.data = DataModel::kList;
    o.faults = {{Fault::kIntermediateRead, 0.1}};
  }));
}

TEST(SimulatorTest, FaultNamesRoundTrip) {
  std::set<std::string> names;
  for (Fault f : kAllFaults) {
    names.insert(FaultName(f));
    EXPECT_EQ(ParseFault(FaultName(f)), f);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kFaultCount));
  EXPECT_EQ(ParseFault("lost-update"), Fault::kLostUpdate);
  EXPECT_EQ(ParseFault("non-repeatable-read"), Fault::kNonRepeatableRead);
  EXPECT_FALSE(ParseFault("lost_update").has_value());
}

TEST(SimulatorTest, FaultFreeRunsExpectNothing) {
  for (IsolationLevel level : {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
    for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
      WorkloadOptions o = Small();
      o.level = level;
      o.data = data;
      SimResult r = RunSim(o);
      EXPECT_TRUE(r.expected.empty()) << DumpExpected(r.expected);
      for (uint64_t n : r.injected) EXPECT_EQ(n, 0u);
    }
  }
}

// The (anomaly, kind) pairs each fault may cause.
using Shape = std::pair<Anomaly, ExtKind>;
std::set<Shape> AllowedShapes(Fault f, IsolationLevel level, bool record_aborted) {
  const bool si = level == IsolationLevel::kSnapshotIsolation;
  const Shape before{Anomaly::kExt, ExtKind::kBefore};
  switch (f) {
    case Fault::kLostUpdate:
      if (si) return {{Anomaly::kNoConflict, ExtKind::kNone}};
      return {before};
    case Fault::kStaleSnapshot:
    case Fault::kFracturedVisibility:
      return {before};
    case Fault::kSessionOrder:
      // SER: a writer reads an old snapshot; a read-only transaction commits at its early start.
      if (si) return {{Anomaly::kSession, ExtKind::kNone}};
      return {before, {Anomaly::kSession, ExtKind::kNone}};
    case Fault::kAbortedRead:
      return {{Anomaly::kExt, record_aborted ? ExtKind::kAborted : ExtKind::kNever}};
    case Fault::kIntermediateRead:
      return {{Anomaly::kExt, ExtKind::kIntermediate}};
    case Fault::kNonRepeatableRead:
      return si ? std::set<Shape>{{Anomaly::kInt, ExtKind::kNone}}
                : std::set<Shape>{{Anomaly::kInt, ExtKind::kNone}, before};
  }
  return {};
}

struct FaultCase {
  Fault fault;
  IsolationLevel level;
  DataModel data;
  bool record_aborted = true;
};

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << FaultName(c.fault) << "/" << verdict::IsolationLevelName(c.level) << "/"
      << (c.data == DataModel::kList ? "list" : "kv") << (c.record_aborted ? "" : "/unrecorded");
}

class SimulatorFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(SimulatorFaultTest, InjectsAndExpectsTheRightViolations) {
  const FaultCase& c = GetParam();
  WorkloadOptions o;
  o.sessions = 10;
  o.txns = 1500;
  o.ops_per_txn = 6;
  o.keys = 40;
  o.level = c.level;
  o.data = c.data;
  o.record_aborted = c.record_aborted;
  // A non-repeatable read needs a repeated read and a commit in between: arm it more often.
  o.faults = {{c.fault, c.fault == Fault::kNonRepeatableRead ? 0.5 : 0.1}};
  o.seed = 11;
  SimResult r = RunSim(o);
  const History& h = r.history;
  const uint64_t injected = r.injected[static_cast<int>(c.fault)];
  EXPECT_GT(injected, 15u) << FaultName(c.fault);
  for (Fault other : kAllFaults) {
    if (other != c.fault) {
      EXPECT_EQ(r.injected[static_cast<int>(other)], 0u);
    }
  }
  EXPECT_GE(r.expected.size(), 10u) << FaultName(c.fault);
  const std::set<Shape> allowed = AllowedShapes(c.fault, c.level, c.record_aborted);
  std::set<Shape> seen;
  std::set<std::string> faulty;
  for (const ExpectedViolation& e : r.expected) {
    EXPECT_EQ(e.cause, c.fault);
    Shape shape{e.anomaly, e.ext_kind};
    seen.insert(shape);
    EXPECT_TRUE(allowed.count(shape)) << DumpExpected({e});
    ASSERT_FALSE(e.txns.empty());
    for (const std::string& id : e.txns) {
      TxnId t = h.FindTxn(id);
      ASSERT_TRUE(t.valid()) << id;
    }
    TxnId first = h.FindTxn(e.txns[0]);
    EXPECT_TRUE(h.txn(first).committed());
    EXPECT_EQ(e.key.has_value(), e.anomaly != Anomaly::kSession);
    if (e.key) {
      EXPECT_TRUE(h.FindIntKey(*e.key).valid());
    }
    switch (e.anomaly) {
      case Anomaly::kSession:
        ASSERT_EQ(e.txns.size(), 2u);
        EXPECT_GT(h.txn(h.FindTxn(e.txns[1])).commit, c.level == IsolationLevel::kSerializable
                                                          ? h.txn(first).commit
                                                          : h.txn(first).start);
        break;
      case Anomaly::kInt:
        EXPECT_EQ(e.txns.size(), 1u);
        break;
      case Anomaly::kNoConflict: {
        ASSERT_EQ(e.txns.size(), 2u);
        const Transaction& a = h.txn(first);
        const Transaction& b = h.txn(h.FindTxn(e.txns[1]));
        EXPECT_LT(a.commit, b.commit);
        EXPECT_LT(b.start, a.commit);
        break;
      }
      case Anomaly::kExt:
        if (c.fault == Fault::kAbortedRead && c.record_aborted) {
          ASSERT_EQ(e.txns.size(), 2u);
          EXPECT_EQ(h.txn(h.FindTxn(e.txns[1])).status, TxnStatus::kAborted);
        }
        if (c.fault == Fault::kIntermediateRead) {
          ASSERT_EQ(e.txns.size(), 2u);
          EXPECT_TRUE(h.txn(h.FindTxn(e.txns[1])).committed());
        }
        break;
      default:  // the simulator's ground truth holds only the four anomalies above
        ADD_FAILURE() << verdict::AnomalyName(e.anomaly);
        break;
    }
    if (e.anomaly != Anomaly::kNoConflict) faulty.insert(e.txns[0]);
  }
  // The shapes the fault is defined by all occur.
  if (c.fault == Fault::kNonRepeatableRead) {
    EXPECT_TRUE(seen.count({Anomaly::kInt, ExtKind::kNone}));
  } else if (allowed.size() == 1) {
    EXPECT_EQ(seen, allowed);
  } else {
    EXPECT_TRUE(seen.count({Anomaly::kExt, ExtKind::kBefore}));
  }
  // Every transaction that violates something carries the fault, so there are at most as many
  // as there were injections.
  if (c.fault != Fault::kLostUpdate) {
    EXPECT_LE(faulty.size(), injected);
  }
}

std::string CaseName(const ::testing::TestParamInfo<FaultCase>& info) {
  std::string name = fmt::format("{}_{}_{}{}", FaultName(info.param.fault),
                                 verdict::IsolationLevelName(info.param.level),
                                 info.param.data == DataModel::kList ? "list" : "kv",
                                 info.param.record_aborted ? "" : "_unrecorded");
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::vector<FaultCase> AllCases() {
  std::vector<FaultCase> cases;
  for (Fault f : kAllFaults) {
    for (IsolationLevel level :
         {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
      for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
        if (f == Fault::kIntermediateRead && data == DataModel::kList) continue;
        cases.push_back({f, level, data});
      }
    }
  }
  cases.push_back(
      {Fault::kAbortedRead, IsolationLevel::kSnapshotIsolation, DataModel::kKeyValue, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllFaults, SimulatorFaultTest, ::testing::ValuesIn(AllCases()), CaseName);

TEST(SimulatorTest, FaultsStartAtFromTxn) {
  WorkloadOptions o = Small();
  o.txns = 1000;
  o.faults = {{Fault::kSessionOrder, 0.2, /*from_txn=*/800}};
  SimResult r = RunSim(o);
  EXPECT_GT(r.injected[static_cast<int>(Fault::kSessionOrder)], 0u);
  // Transactions begun before 800 complete with ids below roughly 800 + sessions.
  for (const ExpectedViolation& e : r.expected) EXPECT_GT(std::stoi(e.txns[0]), 790);
}

TEST(SimulatorTest, AllFaultsTogether) {
  WorkloadOptions o = Small();
  o.txns = 2000;
  for (Fault f : kAllFaults) o.faults.push_back({f, 0.03});
  SimResult r = RunSim(o);
  std::set<Fault> causes;
  for (const ExpectedViolation& e : r.expected) causes.insert(e.cause);
  EXPECT_EQ(causes.size(), static_cast<size_t>(kFaultCount));
}

TEST(SimulatorTest, GroundTruthJson) {
  WorkloadOptions o = Small();
  o.faults = {{Fault::kSessionOrder, 0.1}, {Fault::kAbortedRead, 0.1}};
  SimResult r = RunSim(o);
  ASSERT_FALSE(r.expected.empty());
  std::ostringstream out;
  WriteGroundTruth(r, o.level, out);
  rapidjson::Document doc;
  doc.Parse(out.str().c_str());
  ASSERT_FALSE(doc.HasParseError()) << out.str();
  EXPECT_STREQ(doc["level"].GetString(), "si");
  EXPECT_EQ(doc["committed"].GetUint64(), r.committed);
  EXPECT_EQ(doc["aborted"].GetUint64(), r.aborted);
  const auto& expected = doc["expected"].GetArray();
  ASSERT_EQ(expected.Size(), r.expected.size());
  for (rapidjson::SizeType i = 0; i < expected.Size(); ++i) {
    const auto& e = expected[i];
    const ExpectedViolation& want = r.expected[i];
    EXPECT_STREQ(e["anomaly"].GetString(), verdict::AnomalyName(want.anomaly));
    EXPECT_STREQ(e["cause"].GetString(), FaultName(want.cause));
    ASSERT_EQ(e["txns"].Size(), want.txns.size());
    for (rapidjson::SizeType j = 0; j < want.txns.size(); ++j) {
      EXPECT_EQ(e["txns"][j].GetString(), want.txns[j]);
    }
    if (want.anomaly == Anomaly::kExt) {
      EXPECT_STREQ(e["ext_kind"].GetString(), verdict::ExtKindName(want.ext_kind));
    } else {
      EXPECT_FALSE(e.HasMember("ext_kind"));
    }
    EXPECT_EQ(e.HasMember("key"), want.key.has_value());
    if (want.key) {
      EXPECT_EQ(e["key"].GetInt64(), *want.key);
    }
  }
}

}  // namespace
}  // namespace isowatch::sim
