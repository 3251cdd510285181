// SPDX-License-Identifier: Apache-2.0
// plume on simulator histories with known ground truth, and against chronos and adya.
//
// The relationships tested: a history that is snapshot-isolated (chronos at si, which uses the
// timestamps plume ignores) is causally consistent, so plume finds nothing at tcc; a fault-free
// history is flagged at no level; each planted fault that is a weak-level anomaly (aborted read,
// intermediate read, thin-air read, fractured read, non-repeatable read) is found at the weakest
// level it breaks, naming the transaction the simulator says misbehaved; and plume and adya,
// which can both judge aborted, intermediate and thin-air reads, name the same ones.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/checkers/plume/plume.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/sim/simulator.h"

namespace isowatch::checkers::plume {
namespace {

using history::DataModel;
using history::History;
using history::Op;
using history::OpKind;
using history::Value;
using sim::Fault;
using sim::WorkloadOptions;
using verdict::Anomaly;
using verdict::IsolationLevel;
using verdict::Violation;

// A store that provides snapshot isolation, 1500 transactions in 10 sessions on 60 keys, with
// `faults` planted.
sim::SimResult Simulated(uint64_t seed, DataModel data, std::vector<sim::FaultSpec> faults = {}) {
  WorkloadOptions o{.sessions = 10,
                    .txns = 1500,
                    .keys = 60,
                    .data = data,
                    .level = IsolationLevel::kSnapshotIsolation,
                    .faults = std::move(faults),
                    .seed = seed};
  if (data == DataModel::kList) o.max_appends_per_key = 32;
  absl::StatusOr<sim::SimResult> r = sim::Simulate(o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) std::abort();
  return *std::move(r);
}

std::string Show(const std::vector<Violation>& vs) {
  std::string out;
  for (size_t i = 0; i < vs.size() && i < 3; ++i) out += vs[i].explanation + "\n";
  return out;
}

// (anomaly name, reader, key) of each finding of `anomalies` at `level` (any level if none).
using Named = std::set<std::tuple<std::string, std::string, int64_t>>;
Named Findings(const History& h, const std::vector<Violation>& vs, std::set<Anomaly> anomalies,
               std::optional<IsolationLevel> level = std::nullopt) {
  Named out;
  for (const Violation& v : vs) {
    if (!anomalies.contains(v.anomaly) || v.txns.empty()) continue;
    if (level.has_value() &&
        std::find(v.levels.begin(), v.levels.end(), *level) == v.levels.end() &&
        v.level != *level) {
      continue;
    }
    out.emplace(verdict::AnomalyName(v.anomaly), std::string(h.txn_name(v.txns[0])),
                v.key.valid() ? h.key(v.key).payload : -1);
  }
  return out;
}

// A copy of `h` (integer keys and values), with `change` applied to every register read
// (transaction, operation index, value read) before it is added: how reads are planted.
History Copy(const History& h,
             const std::function<Value(const history::Transaction&, uint32_t, Value)>& change) {
  history::HistoryBuilder b;
  b.SetDefaultInitialValue(h.initial().default_value);
  for (size_t i = 0; i < h.txns().size(); ++i) {
    const TxnId id(h.first_txn() + i);
    const history::Transaction& t = h.txns()[i];
    history::TxnHeader header{
        .id = h.txn_name(id), .session = h.session_name(t.session), .status = t.status};
    if (t.has_start) header.start = t.start;
    if (t.has_commit) header.commit = t.commit;
    if (!b.BeginTxn(header).ok()) std::abort();
    std::span<const Op> ops = h.ops(t);
    for (uint32_t pos = 0; pos < ops.size(); ++pos) {
      const Op& op = ops[pos];
      const KeyId k = b.IntKey(h.key(op.key()).payload);
      switch (op.kind()) {
        case OpKind::kRead:
          if (op.unknown()) {
            b.UnknownRead(k);
          } else {
            b.Read(k, change(t, pos, op.value()));
          }
          break;
        case OpKind::kWrite:
          b.Write(k, op.value());
          break;
        case OpKind::kAppend:
          b.Append(k, op.value());
          break;
        case OpKind::kListRead: {
          std::span<const Value> e = h.list_elements(op);
          b.ListRead(k, std::vector<Value>(e.begin(), e.end()));
          break;
        }
      }
    }
    b.EndTxn();
  }
  auto out = std::move(b).Finish();
  if (!out.ok()) std::abort();
  return *std::move(out);
}

TEST(PlumeSimulatorTest, FaultFreeHistoriesAreNotFlagged) {
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const sim::SimResult r = Simulated(seed, data);
      const PlumeResult p = CheckPlume(r.history);
      EXPECT_TRUE(p.complete) << p.undecided;
      EXPECT_TRUE(p.violations.empty()) << "seed " << seed << ":\n" << Show(p.violations);
      EXPECT_EQ(p.stats.nodes, r.committed);
      EXPECT_GT(p.stats.wr_edges, 0u);
      EXPECT_GT(p.stats.forced_tcc, 0u) << "no writer set against a read: a weak test";
    }
  }
}

// Snapshot isolation implies causal consistency: wherever chronos finds a history
// snapshot-isolated, plume finds it causally consistent, whatever the planted fault. (adya's
// snapshot isolation is Adya's, without session order, which causal consistency includes: a
// transaction that misses its session predecessor's write passes adya at si and is a TAP-k.)
TEST(PlumeSimulatorTest, SnapshotValidImpliesCausallyValid) {
  int snapshot_valid = 0;
  int snapshot_invalid = 0;
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    for (Fault fault : sim::kAllFaults) {
      if (fault == Fault::kIntermediateRead && data == DataModel::kList) continue;  // kv only
      const sim::SimResult r = Simulated(7, data, {{.fault = fault, .rate = 0.02}});
      const bool chronos_si =
          RunChronos(r.history, {.level = IsolationLevel::kSnapshotIsolation}).violations.empty();
      const PlumeResult p = CheckPlume(r.history, {.levels = {IsolationLevel::kCausal}});
      ASSERT_TRUE(p.complete) << p.undecided;
      if (chronos_si) {
        ++snapshot_valid;
        EXPECT_TRUE(p.violations.empty()) << sim::FaultName(fault) << ":\n" << Show(p.violations);
      } else {
        ++snapshot_invalid;
      }
    }
  }
  // Lost updates of registers are snapshot-invalid and causally valid: plume must not flag
  // them. (Lost appends leave list reads that no one order of appends explains: those are
  // flagged at every level, as adya does.)
  EXPECT_GT(snapshot_invalid, 0);
  {
    const sim::SimResult r =
        Simulated(8, DataModel::kKeyValue, {{.fault = Fault::kLostUpdate, .rate = 0.05}});
    ASSERT_FALSE(
        RunChronos(r.history, {.level = IsolationLevel::kSnapshotIsolation}).violations.empty());
    const PlumeResult p = CheckPlume(r.history);
    EXPECT_TRUE(p.violations.empty()) << Show(p.violations);
  }
  EXPECT_GT(snapshot_valid, 0);
}

struct WeakFault {
  Fault fault;
  std::set<Anomaly> taps;  // what plume must name the misbehaving transaction with
  IsolationLevel weakest;  // the weakest level the fault breaks
};

class PlumeWeakFaultTest : public ::testing::TestWithParam<std::tuple<WeakFault, DataModel>> {};

// Checking at the fault's weakest level alone, plume names every misbehaving transaction the
// simulator reports (every one it can see); at read committed, a fault that only breaks read
// atomic is not reported with the fault's patterns.
TEST_P(PlumeWeakFaultTest, FoundAtTheWeakestLevelItBreaks) {
  const auto& [c, data] = GetParam();
  size_t injected = 0;
  size_t found = 0;
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    const sim::SimResult r = Simulated(seed, data, {{.fault = c.fault, .rate = 0.03}});
    const PlumeResult p = CheckPlume(r.history, {.levels = {c.weakest}});
    ASSERT_TRUE(p.complete) << p.undecided;
    std::set<std::string> readers;
    for (const Violation& v : p.violations) {
      if (c.taps.contains(v.anomaly)) readers.insert(std::string(r.history.txn_name(v.txns[0])));
    }
    for (const sim::ExpectedViolation& e : r.expected) {
      if (e.cause != c.fault || e.txns.empty()) continue;
      ++injected;
      if (readers.contains(e.txns[0])) ++found;
    }
    if (c.weakest != IsolationLevel::kReadCommitted) {
      const PlumeResult rc = CheckPlume(r.history, {.levels = {IsolationLevel::kReadCommitted}});
      for (const Violation& v : rc.violations) {
        EXPECT_FALSE(c.taps.contains(v.anomaly) && v.anomaly != Anomaly::kTapH) << v.explanation;
      }
    }
  }
  EXPECT_GT(injected, 0u) << "the fault never fired";
  EXPECT_EQ(found, injected) << "misbehaving transactions plume did not name";
}

const WeakFault kWeakFaults[] = {
    {Fault::kAbortedRead, {Anomaly::kTapB}, IsolationLevel::kReadCommitted},
    {Fault::kIntermediateRead, {Anomaly::kTapF}, IsolationLevel::kReadCommitted},
    {Fault::kNonRepeatableRead, {Anomaly::kTapJ}, IsolationLevel::kReadAtomic},
};

// Each fault on registers and on lists, but intermediate reads on registers only (appends have
// no intermediate values: the simulator refuses that fault on lists).
std::vector<std::tuple<WeakFault, DataModel>> WeakFaultCases() {
  std::vector<std::tuple<WeakFault, DataModel>> out;
  for (const WeakFault& f : kWeakFaults) {
    out.emplace_back(f, DataModel::kKeyValue);
    if (f.fault != Fault::kIntermediateRead) out.emplace_back(f, DataModel::kList);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Faults, PlumeWeakFaultTest, ::testing::ValuesIn(WeakFaultCases()),
    [](const ::testing::TestParamInfo<std::tuple<WeakFault, DataModel>>& param) {
      std::string name = fmt::format("{}_{}", sim::FaultName(std::get<0>(param.param).fault),
                                     std::get<1>(param.param) == DataModel::kList ? "list" : "kv");
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// The simulator's fractured visibility reads an older version of a key than the snapshot holds.
// Without timestamps that is an anomaly only where the reads order the two versions' writers
// causally before the reader (a stale read of a write nothing orders is a valid read): plume
// names some of the misbehaving transactions at causal consistency, and each finding it makes
// stands (the oracle test checks that the patterns are exact).
TEST(PlumeSimulatorTest, FracturedVisibilityIsFoundWhereTheReadsShowIt) {
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    size_t injected = 0;
    size_t found = 0;
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      const sim::SimResult r =
          Simulated(seed, data, {{.fault = Fault::kFracturedVisibility, .rate = 0.03}});
      const PlumeResult p = CheckPlume(r.history, {.levels = {IsolationLevel::kCausal}});
      std::set<std::string> named;
      for (const Violation& v : p.violations) {
        for (TxnId id : v.txns) named.insert(std::string(r.history.txn_name(id)));
      }
      for (const sim::ExpectedViolation& e : r.expected) {
        if (e.cause != Fault::kFracturedVisibility || e.txns.empty()) continue;
        ++injected;
        found += named.contains(e.txns[0]) ? 1 : 0;
      }
    }
    EXPECT_GT(injected, 0u);
    EXPECT_GT(found, 0u) << (data == DataModel::kList ? "lists" : "registers");
  }
}

// A fractured read planted where the reads prove it: T3 read x from W, and W read y from T1 and
// then overwrote it; T3's read of y is made to return T1's value. T1 causally precedes W, so T3
// saw part of W's writes: TAP-h if T3 read y after x (read committed forbids it: it saw W, then
// missed it), TAP-k if before (read atomic does).
TEST(PlumeSimulatorTest, PlantedFracturedReadIsFoundAtTheWeakestLevel) {
  const sim::SimResult r = Simulated(4, DataModel::kKeyValue);
  const History& h = r.history;
  // (key, value) -> (writer, position) of committed writes; per transaction, what it read
  // before writing each key.
  std::map<std::pair<int64_t, int64_t>, std::pair<TxnId, uint32_t>> writer;
  for (TxnId id : h.HeldTxns()) {
    if (!h.txn(id).committed()) continue;
    std::span<const Op> ops = h.ops(id);
    for (uint32_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind() == OpKind::kWrite && !ops[i].value().absent()) {
        writer[{h.key(ops[i].key()).payload, ops[i].value().payload()}] = {id, i};
      }
    }
  }
  auto read_before_write = [&](TxnId w, KeyId y) -> std::optional<Value> {
    std::optional<Value> seen;
    for (const Op& op : h.ops(w)) {
      if (op.key() != y) continue;
      if (op.kind() == OpKind::kWrite) return seen;
      if (op.kind() == OpKind::kRead && !op.unknown() && !seen.has_value()) seen = op.value();
    }
    return std::nullopt;
  };
  std::map<std::pair<uint64_t, uint32_t>, Value> plant;  // (txn, op) -> value
  std::map<std::string, Anomaly> expected;               // reader -> pattern
  std::set<uint64_t> touched;
  for (TxnId t3 : h.HeldTxns()) {
    if (!h.txn(t3).committed() || touched.contains(t3.value()) || expected.size() >= 6) continue;
    std::span<const Op> ops = h.ops(t3);
    for (uint32_t px = 0; px < ops.size() && !expected.contains(std::string(h.txn_name(t3)));
         ++px) {
      if (ops[px].kind() != OpKind::kRead || ops[px].unknown() || ops[px].value().absent()) {
        continue;
      }
      auto w = writer.find({h.key(ops[px].key()).payload, ops[px].value().payload()});
      if (w == writer.end() || w->second.first == t3 || touched.contains(w->second.first.value())) {
        continue;
      }
      for (uint32_t py = 0; py < ops.size(); ++py) {
        const Op& ry = ops[py];
        if (ry.kind() != OpKind::kRead || ry.unknown() || ry.key() == ops[px].key()) continue;
        bool own_write = false;
        for (uint32_t i = 0; i < ops.size(); ++i) {
          own_write = own_write || (ops[i].is_write() && ops[i].key() == ry.key());
        }
        const std::optional<Value> old = read_before_write(w->second.first, ry.key());
        if (own_write || !old.has_value() || *old == ry.value()) continue;
        plant[{t3.value(), py}] = *old;
        expected[std::string(h.txn_name(t3))] = py > px ? Anomaly::kTapH : Anomaly::kTapK;
        touched.insert(t3.value());
        touched.insert(w->second.first.value());
        break;
      }
    }
  }
  ASSERT_GE(expected.size(), 3u) << "too few places to plant a fractured read";
  const History planted = Copy(h, [&](const history::Transaction& t, uint32_t pos, Value v) {
    for (TxnId id : h.HeldTxns()) {
      if (&h.txn(id) != &t) continue;
      auto it = plant.find({id.value(), pos});
      return it == plant.end() ? v : it->second;
    }
    return v;
  });
  for (const auto& [reader, tap] : expected) {
    const IsolationLevel weakest =
        tap == Anomaly::kTapH ? IsolationLevel::kReadCommitted : IsolationLevel::kReadAtomic;
    const PlumeResult p = CheckPlume(planted, {.levels = {weakest}});
    bool named = false;
    for (const Violation& v : p.violations) {
      named = named || (v.anomaly == tap && planted.txn_name(v.txns[0]) == reader);
    }
    EXPECT_TRUE(named) << reader << " " << verdict::AnomalyName(tap) << ":\n" << Show(p.violations);
  }
}

TEST(PlumeSimulatorTest, ThinAirReadIsTapA) {
  const sim::SimResult r = Simulated(3, DataModel::kKeyValue);
  int planted = 0;
  const History h = Copy(r.history, [&](const history::Transaction& t, uint32_t, Value v) {
    if (!t.committed() || v.absent() || planted >= 3 || v.payload() % 97 != 0) return v;
    ++planted;
    return Value::Int(v.payload() + 1000000000);
  });
  ASSERT_GT(planted, 0);
  const PlumeResult p = CheckPlume(h);
  size_t taps = 0;
  for (const Violation& v : p.violations) {
    EXPECT_EQ(v.anomaly, Anomaly::kTapA) << v.explanation;
    EXPECT_EQ(v.levels.front(), IsolationLevel::kReadCommitted);
    taps += v.anomaly == Anomaly::kTapA ? 1 : 0;
  }
  EXPECT_EQ(taps, static_cast<size_t>(planted));
}

// adya's G1a, G1b and thin-air reads are plume's TAP-b, TAP-f and TAP-a: the same readers and
// keys, on the same histories.
TEST(PlumeSimulatorTest, PlumeAndAdyaNameTheSameNonCycleReads) {
  size_t compared = 0;
  for (DataModel data : {DataModel::kKeyValue, DataModel::kList}) {
    for (Fault fault : {Fault::kAbortedRead, Fault::kIntermediateRead}) {
      if (fault == Fault::kIntermediateRead && data == DataModel::kList) continue;  // kv only
      const sim::SimResult r = Simulated(5, data, {{.fault = fault, .rate = 0.03}});
      int planted = 0;
      const History h = Copy(r.history, [&](const history::Transaction& t, uint32_t, Value v) {
        if (!t.committed() || v.absent() || planted >= 2 || v.payload() % 89 != 0) return v;
        ++planted;
        return Value::Int(v.payload() + 1000000000);
      });
      const std::vector<Violation> a = adya::CheckAdya(h).violations;
      const std::vector<Violation> p = CheckPlume(h).violations;
      const std::pair<Anomaly, Anomaly> same[] = {{Anomaly::kG1a, Anomaly::kTapB},
                                                  {Anomaly::kG1b, Anomaly::kTapF},
                                                  {Anomaly::kThinAir, Anomaly::kTapA}};
      for (const auto& [adya_name, plume_name] : same) {
        Named from_adya;
        for (const auto& [name, reader, key] : Findings(h, a, {adya_name})) {
          from_adya.emplace(verdict::AnomalyName(plume_name), reader, key);
        }
        const Named from_plume = Findings(h, p, {plume_name});
        EXPECT_EQ(from_adya, from_plume) << verdict::AnomalyName(adya_name);
        compared += from_plume.size();
      }
    }
  }
  EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace isowatch::checkers::plume
