// SPDX-License-Identifier: Apache-2.0
// The polygraph checker on range reads with tombstones (the Viper notes, "Range queries"): every
// returned record, live or tombstoned, is a read of its key, and every other key of the history
// in the range was absent. Each violating history has a valid near miss.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/verdict/violation.h"

#include "tests/unit/checkers/polygraph/polygraph_testing.h"

namespace isowatch::checkers::polygraph {
namespace {

using history::HistoryBuilder;
using history::KeyBound;
using history::KeyValue;
using history::Value;
using testing::Show;
using testing::Violates;
using verdict::Anomaly;
using verdict::IsolationLevel;

// A tiny history builder: integer keys and values, absent initial values.
class Builder {
 public:
  Builder& Txn(const std::string& id) {
    if (open_) b_.EndTxn();
    if (!b_.BeginTxn({.id = id, .session = id}).ok()) std::abort();
    open_ = true;
    return *this;
  }
  Builder& W(int64_t k, int64_t v) {
    b_.Write(b_.IntKey(k), Value::Int(v));
    return *this;
  }
  Builder& R(int64_t k, std::optional<int64_t> v) {
    b_.Read(b_.IntKey(k), v ? Value::Int(*v) : Value::Absent());
    return *this;
  }
  // A delete: a write of tombstone `v`.
  Builder& Delete(int64_t k, int64_t v) {
    b_.MarkTombstone(b_.IntKey(k), Value::Int(v));
    return W(k, v);
  }
  Builder& Range(int64_t low, int64_t high, std::vector<std::pair<int64_t, int64_t>> live,
                 std::vector<std::pair<int64_t, int64_t>> dead = {}) {
    std::vector<KeyValue> l;
    std::vector<KeyValue> d;
    for (auto [k, v] : live) l.push_back({b_.IntKey(k), Value::Int(v)});
    for (auto [k, v] : dead) d.push_back({b_.IntKey(k), Value::Int(v)});
    b_.RangeRead(KeyBound::At(b_.IntKey(low)), KeyBound::At(b_.IntKey(high)), l, d);
    return *this;
  }
  history::History Build() {
    if (open_) b_.EndTxn();
    auto h = std::move(b_).Finish();
    if (!h.ok()) std::abort();
    return *std::move(h);
  }

 private:
  HistoryBuilder b_;
  bool open_ = false;
};

struct RangeCase {
  const char* name;
  history::History h;
  bool valid;                                     // at both levels
  std::optional<Anomaly> anomaly = std::nullopt;  // of the first finding, when invalid
};

TEST(PolygraphRangeTest, RangeReadsWithTombstones) {
  std::vector<RangeCase> cases;
  // Q sees key 5 from T1 but not T1's insert of key 2 in its range.
  cases.push_back({"missed insert",
                   Builder().Txn("T1").W(2, 1).W(5, 1).Txn("Q").R(5, 1).Range(1, 3, {}).Build(),
                   false});
  cases.push_back(
      {"insert seen",
       Builder().Txn("T1").W(2, 1).W(5, 1).Txn("Q").R(5, 1).Range(1, 3, {{2, 1}}).Build(), true});
  cases.push_back(
      {"range before the insert",
       Builder().Txn("T1").W(2, 1).W(5, 1).Txn("Q").R(5, std::nullopt).Range(1, 3, {}).Build(),
       true});
  // A deleted key is returned as its tombstone.
  cases.push_back({"tombstone seen",
                   Builder()
                       .Txn("T1")
                       .W(2, 1)
                       .Txn("T2")
                       .R(2, 1)
                       .Delete(2, 100)
                       .W(5, 2)
                       .Txn("Q")
                       .R(5, 2)
                       .Range(1, 3, {}, {{2, 100}})
                       .Build(),
                   true});
  cases.push_back({"deleted key missing after its insert",
                   Builder()
                       .Txn("T1")
                       .W(2, 1)
                       .Txn("T2")
                       .R(2, 1)
                       .Delete(2, 100)
                       .W(5, 2)
                       .Txn("Q")
                       .R(5, 2)
                       .Range(1, 3, {})
                       .Build(),
                   false});
  cases.push_back({"a record outside the range",
                   Builder().Txn("T1").W(7, 1).Txn("Q").Range(1, 3, {{7, 1}}).Build(), false,
                   Anomaly::kThinAir});
  cases.push_back({"own insert missing", Builder().Txn("Q").W(2, 7).Range(1, 3, {}).Build(), false,
                   Anomaly::kInt});
  cases.push_back(
      {"own insert seen", Builder().Txn("Q").W(2, 7).Range(1, 3, {{2, 7}}).Build(), true});
  for (const RangeCase& c : cases) {
    for (bool prune : {true, false}) {
      const PolygraphResult r = CheckPolygraph(c.h, {.prune = prune});
      ASSERT_TRUE(r.complete) << c.name << ": " << r.undecided;
      for (IsolationLevel level :
           {IsolationLevel::kSerializable, IsolationLevel::kSnapshotIsolation}) {
        EXPECT_EQ(!Violates(r, level), c.valid)
            << c.name << " at " << verdict::IsolationLevelName(level) << ":\n"
            << Show(r);
      }
      if (c.anomaly.has_value() && !r.violations.empty()) {
        EXPECT_EQ(verdict::AnomalyName(r.violations.front().anomaly),
                  verdict::AnomalyName(*c.anomaly))
            << c.name << ": " << r.violations.front().explanation;
      }
    }
  }
}

}  // namespace
}  // namespace isowatch::checkers::polygraph
