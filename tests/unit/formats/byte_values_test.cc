// SPDX-License-Identifier: Apache-2.0
// formats::WithByteValues: the same history with byte-string values, and the same verdicts.
#include "isowatch/formats/byte_values.h"

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/sim/simulator.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Value;

// The violations Chronos finds, by anomaly, key and the source ids of their transactions.
std::set<std::string> Verdicts(const History& h, verdict::IsolationLevel level) {
  checkers::ChronosOptions options;
  options.level = level;
  std::set<std::string> out;
  for (const verdict::Violation& v : checkers::RunChronos(h, options).violations) {
    std::string line = fmt::format("{} {}", verdict::AnomalyName(v.anomaly),
                                   v.key.valid() ? h.KeyToString(v.key) : "-");
    for (TxnId t : v.txns) line += " " + h.TxnLabel(t);
    out.insert(line);
  }
  return out;
}

// "v<n>" for an integer, the value itself otherwise.
std::string Expected(const History& h, Value v) {
  return v.is_int() ? fmt::format("\"v{}\"", v.as_int()) : h.ValueToString(v);
}

TEST(WithByteValues, SameTransactionsWithTextValuesAndTheSameVerdicts) {
  for (const history::DataModel data : {history::DataModel::kKeyValue, history::DataModel::kList}) {
    sim::WorkloadOptions o;
    o.seed = 5;
    o.data = data;
    o.txns = 600;
    o.keys = 30;
    for (sim::Fault f : sim::kAllFaults) {
      if (data == history::DataModel::kList && f == sim::Fault::kIntermediateRead) continue;
      o.faults.push_back({f, 0.03, /*from_txn=*/20});
    }
    auto sim = sim::Simulate(o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    const History& h = sim->history;
    absl::StatusOr<History> converted = WithByteValues(h);
    ASSERT_TRUE(converted.ok()) << converted.status();
    const History& b = *converted;

    ASSERT_EQ(b.size(), h.size());
    EXPECT_EQ(b.data_model(), h.data_model());
    size_t byte_values = 0;
    for (uint64_t i = 0; i < h.size(); ++i) {
      const TxnId id(i);
      ASSERT_EQ(b.TxnLabel(id), h.TxnLabel(id));
      ASSERT_EQ(b.txn(id).status, h.txn(id).status);
      ASSERT_EQ(b.txn(id).commit, h.txn(id).commit);
      const auto ops = h.ops(id);
      const auto converted_ops = b.ops(id);
      ASSERT_EQ(converted_ops.size(), ops.size());
      for (size_t k = 0; k < ops.size(); ++k) {
        const Op& op = ops[k];
        const Op& c = converted_ops[k];
        ASSERT_EQ(c.kind(), op.kind());
        ASSERT_EQ(b.KeyToString(c.key()), h.KeyToString(op.key()));
        if (op.kind() == OpKind::kListRead) {
          const auto elements = h.list_elements(op);
          const auto converted_elements = b.list_elements(c);
          ASSERT_EQ(converted_elements.size(), elements.size());
          for (size_t e = 0; e < elements.size(); ++e) {
            EXPECT_EQ(b.ValueToString(converted_elements[e]), Expected(h, elements[e]));
          }
        } else {
          EXPECT_EQ(b.ValueToString(c.value()), Expected(h, op.value()));
          if (c.value().is_bytes()) ++byte_values;
        }
      }
    }
    EXPECT_GT(byte_values, h.size());
    for (const verdict::IsolationLevel level :
         {verdict::IsolationLevel::kSnapshotIsolation, verdict::IsolationLevel::kSerializable}) {
      const std::set<std::string> expected = Verdicts(h, level);
      EXPECT_FALSE(expected.empty());
      EXPECT_EQ(Verdicts(b, level), expected);
    }
  }
}

}  // namespace
}  // namespace isowatch::formats
