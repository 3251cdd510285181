// SPDX-License-Identifier: Apache-2.0
// The reads judged inside one read (docs/checkers/read-faults.md) are named alike by every
// checker that sees them: plume (TAP-a to TAP-f), adya and the polygraph (thin-air, G1a, G1b,
// INT) and Chronos (EXT, INT) each report the same verdict::ReadFault on the same reader and key,
// as registers and as lists, and none of them flags the valid near miss of each.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/checkers/plume/plume.h"
#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"

namespace isowatch::checkers {
namespace {

using ::isowatch::testing::TestHistory;
using verdict::Anomaly;
using verdict::IsolationLevel;
using verdict::ReadFault;
using verdict::Violation;

// What one checker said of the history: every (anomaly, read fault, first transaction, key).
struct Finding {
  std::string checker;
  Anomaly anomaly;
  ReadFault fault;
  std::string reader;
  int64_t key;
};

std::vector<Finding> Collect(const history::History& h, const std::vector<Violation>& vs) {
  std::vector<Finding> out;
  for (const Violation& v : vs) {
    out.push_back({v.checker, v.anomaly, v.read_fault,
                   v.txns.empty() ? "" : std::string(h.txn_name(v.txns.front())),
                   v.key.valid() ? h.key(v.key).payload : -1});
  }
  return out;
}

std::vector<Finding> Chronos(const history::History& h, IsolationLevel level) {
  ChronosResult r = RunChronos(h, {.level = level});
  EXPECT_TRUE(r.complete);
  return Collect(h, r.violations);
}

std::vector<Finding> Adya(const history::History& h) {
  adya::AdyaResult r = adya::CheckAdya(h);
  EXPECT_TRUE(r.complete) << r.undecided;
  return Collect(h, r.violations);
}

std::vector<Finding> Plume(const history::History& h) {
  plume::PlumeResult r = plume::CheckPlume(h);
  EXPECT_TRUE(r.complete);
  return Collect(h, r.violations);
}

// The polygraph at serializability and snapshot isolation at once: a finding inside one read
// names both levels.
std::vector<Finding> Polygraph(const history::History& h) {
  polygraph::PolygraphResult r = polygraph::CheckPolygraph(h);
  EXPECT_TRUE(r.complete) << r.undecided;
  for (const Violation& v : r.violations) {
    EXPECT_THAT(v.levels, ::testing::UnorderedElementsAre(IsolationLevel::kSnapshotIsolation,
                                                          IsolationLevel::kSerializable));
  }
  return Collect(h, r.violations);
}

struct Case {
  const char* name;
  ReadFault fault;  // kNone: a near miss, valid for every checker
  TestHistory history;
};

// Every case's reader is "r" and its key 1; the other transactions finish before it starts.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](const char* name, ReadFault fault) -> TestHistory& {
    cases.push_back({name, fault, TestHistory()});
    cases.back().history.DefaultInitial(0);
    return cases.back().history;
  };
  using S = history::TxnStatus;
  // Registers.
  add("kv_thin_air", ReadFault::kThinAir).Txn("w", "a", 1, 2).W(1, 1).Txn("r", "b", 3, 4).R(1, 9);
  add("kv_thin_air_near", ReadFault::kNone).Txn("w", "a", 1, 2).W(1, 1).Txn("r", "b", 3, 4).R(1, 1);
  add("kv_aborted", ReadFault::kAborted)
      .Txn("x", "a", 1, 2, S::kAborted)
      .W(1, 5)
      .Txn("r", "b", 3, 4)
      .R(1, 5);
  add("kv_aborted_near", ReadFault::kNone)
      .Txn("x", "a", 1, 2, S::kAborted)
      .W(1, 5)
      .Txn("r", "b", 3, 4)
      .R(1, 0);
  add("kv_future", ReadFault::kFuture).Txn("r", "b", 1, 2).R(1, 7).W(1, 7);
  add("kv_future_near", ReadFault::kNone).Txn("r", "b", 1, 2).W(1, 7).R(1, 7);
  add("kv_not_own_write", ReadFault::kNotOwnWrite)
      .Txn("w", "a", 1, 2)
      .W(1, 1)
      .Txn("r", "b", 3, 4)
      .W(1, 2)
      .R(1, 1);
  add("kv_not_own_write_near", ReadFault::kNone)
      .Txn("w", "a", 1, 2)
      .W(1, 1)
      .Txn("r", "b", 3, 4)
      .W(1, 2)
      .R(1, 2);
  add("kv_not_last_write", ReadFault::kNotLastWrite).Txn("r", "b", 1, 2).W(1, 1).W(1, 2).R(1, 1);
  add("kv_not_last_write_near", ReadFault::kNone).Txn("r", "b", 1, 2).W(1, 1).W(1, 2).R(1, 2);
  add("kv_intermediate", ReadFault::kIntermediate)
      .Txn("w", "a", 1, 2)
      .W(1, 1)
      .W(1, 2)
      .Txn("r", "b", 3, 4)
      .R(1, 1);
  add("kv_intermediate_near", ReadFault::kNone)
      .Txn("w", "a", 1, 2)
      .W(1, 1)
      .W(1, 2)
      .Txn("r", "b", 3, 4)
      .R(1, 2);
  // Lists.
  add("list_thin_air", ReadFault::kThinAir)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .Txn("r", "b", 3, 4)
      .L(1, {1, 9});
  add("list_thin_air_near", ReadFault::kNone)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .Txn("r", "b", 3, 4)
      .L(1, {1});
  add("list_aborted", ReadFault::kAborted)
      .Txn("x", "a", 1, 2, S::kAborted)
      .A(1, 5)
      .Txn("r", "b", 3, 4)
      .L(1, {5});
  add("list_aborted_near", ReadFault::kNone)
      .Txn("x", "a", 1, 2, S::kAborted)
      .A(1, 5)
      .Txn("r", "b", 3, 4)
      .L(1, {});
  add("list_future", ReadFault::kFuture).Txn("r", "b", 1, 2).L(1, {7}).A(1, 7);
  add("list_future_near", ReadFault::kNone).Txn("r", "b", 1, 2).A(1, 7).L(1, {7});
  add("list_not_own_write", ReadFault::kNotOwnWrite)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .Txn("r", "b", 3, 4)
      .A(1, 2)
      .L(1, {1});
  add("list_not_last_write", ReadFault::kNotLastWrite)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .Txn("r", "b", 3, 4)
      .A(1, 2)
      .L(1, {1, 2})
      .A(1, 3)
      .L(1, {1, 2});
  add("list_not_own_write_near", ReadFault::kNone)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .Txn("r", "b", 3, 4)
      .A(1, 2)
      .L(1, {1, 2});
  add("list_not_last_write_near", ReadFault::kNone)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .Txn("r", "b", 3, 4)
      .A(1, 2)
      .L(1, {1, 2})
      .A(1, 3)
      .L(1, {1, 2, 3});
  add("list_intermediate", ReadFault::kIntermediate)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .A(1, 2)
      .Txn("r", "b", 3, 4)
      .L(1, {1});
  add("list_intermediate_near", ReadFault::kNone)
      .Txn("w", "a", 1, 2)
      .A(1, 1)
      .A(1, 2)
      .Txn("r", "b", 3, 4)
      .L(1, {1, 2});
  return cases;
}

class ReadFaultAgreementTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReadFaultAgreementTest, EveryCheckerNamesTheReadAlike) {
  const Case& c = GetParam();
  const history::History h = c.history.Build();
  const std::vector<std::vector<Finding>> results = {Chronos(h, IsolationLevel::kSnapshotIsolation),
                                                     Chronos(h, IsolationLevel::kSerializable),
                                                     Adya(h), Plume(h), Polygraph(h)};
  const char* names[] = {"chronos si", "chronos ser", "adya", "plume", "polygraph"};
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const std::vector<Finding>& found = results[i];
    if (c.fault == ReadFault::kNone) {
      EXPECT_TRUE(found.empty()) << found.front().checker << " found "
                                 << verdict::AnomalyName(found.front().anomaly);
      continue;
    }
    ASSERT_EQ(found.size(), 1u) << "findings";
    EXPECT_EQ(found[0].fault, c.fault)
        << verdict::AnomalyName(found[0].anomaly) << " named "
        << verdict::ReadFaultName(found[0].fault) << ", not " << verdict::ReadFaultName(c.fault);
    EXPECT_EQ(found[0].reader, "r");
    EXPECT_EQ(found[0].key, 1);
  }
}

// Each checker's own name for the read beside the shared one, so that a report says both.
TEST(ReadFaultAgreement, CheckersKeepTheirOwnAnomalyNames) {
  for (const Case& c : Cases()) {
    if (c.fault != ReadFault::kAborted) continue;
    const history::History h = c.history.Build();
    EXPECT_EQ(Chronos(h, IsolationLevel::kSnapshotIsolation).at(0).anomaly, Anomaly::kExt);
    EXPECT_EQ(Adya(h).at(0).anomaly, Anomaly::kG1a);
    EXPECT_EQ(Plume(h).at(0).anomaly, Anomaly::kTapB);
    EXPECT_EQ(Polygraph(h).at(0).anomaly, Anomaly::kG1a);
  }
}

// The explanation of a read that misses the transaction's own append names that append, not an
// element of another transaction.
TEST(ReadFaultAgreement, MissedOwnAppendIsNamed) {
  TestHistory t;
  t.Txn("w", "a", 1, 2).A(1, 1).Txn("r", "b", 3, 4).A(1, 2).L(1, {1});
  const history::History h = t.Build();
  ChronosResult r = RunChronos(h, {});
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].anomaly, Anomaly::kInt);
  EXPECT_THAT(r.violations[0].explanation,
              ::testing::HasSubstr("misses its own append of 2 at operation 1"));
  adya::AdyaResult a = adya::CheckAdya(h);
  ASSERT_EQ(a.violations.size(), 1u);
  EXPECT_THAT(a.violations[0].explanation,
              ::testing::HasSubstr("misses its own append of 2 at operation 1"));
}

INSTANTIATE_TEST_SUITE_P(Cases, ReadFaultAgreementTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
}  // namespace isowatch::checkers
