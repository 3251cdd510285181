// SPDX-License-Identifier: Apache-2.0
// The polygraph checker on the anomaly examples of the Viper notes: each violating history and
// its valid near miss, at serializability and snapshot isolation, with pruning and without (the
// verdict must not change), and the anomaly each rejection is named as.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"
#include "tests/unit/checkers/polygraph/polygraph_testing.h"

namespace isowatch::checkers::polygraph {
namespace {

using isowatch::testing::TestHistory;
using testing::Show;
using testing::Violates;
using verdict::Anomaly;
using verdict::IsolationLevel;

constexpr IsolationLevel kSer = IsolationLevel::kSerializable;
constexpr IsolationLevel kSi = IsolationLevel::kSnapshotIsolation;

struct Case {
  const char* name;
  // Transactions, one a string: "T1: r(x,0) w(x,1)"; "T1!" marks an aborted one. Keys are
  // letters, values integers; the initial value of every key is 0.
  std::vector<std::string> txns;
  bool ser_valid;
  bool si_valid;
  // The anomaly the first finding at each level is, when it is invalid there.
  std::optional<Anomaly> ser_anomaly = std::nullopt;
  std::optional<Anomaly> si_anomaly = std::nullopt;
  // A phrase the first finding's explanation holds at each level, when it is invalid there.
  const char* ser_phrase = "";
  const char* si_phrase = "";
};

history::History Build(const Case& c) {
  TestHistory t;
  t.DefaultInitial(0);
  for (const std::string& line : c.txns) {
    const size_t colon = line.find(':');
    std::string id = line.substr(0, colon);
    const bool aborted = id.back() == '!';
    if (aborted) id.pop_back();
    t.Untimed(id, "s" + id,
              aborted ? history::TxnStatus::kAborted : history::TxnStatus::kCommitted);
    for (size_t i = colon + 1; i < line.size(); ++i) {
      if (line[i] != 'r' && line[i] != 'w') continue;
      const char op = line[i];
      const int64_t key = line[i + 2] - 'a';
      const int64_t value = std::stoll(line.substr(i + 4));
      if (op == 'r') {
        t.R(key, value);
      } else {
        t.W(key, value);
      }
      i = line.find(')', i);
    }
  }
  return t.Build();
}

const verdict::Violation* FirstAt(const PolygraphResult& r, IsolationLevel level) {
  for (const verdict::Violation& v : r.violations) {
    if (v.level == level || std::find(v.levels.begin(), v.levels.end(), level) != v.levels.end()) {
      return &v;
    }
  }
  return nullptr;
}

class PolygraphAnomalyTest : public ::testing::TestWithParam<Case> {};

TEST_P(PolygraphAnomalyTest, VerdictsAndNames) {
  const Case& c = GetParam();
  const history::History h = Build(c);
  for (bool prune : {true, false}) {
    for (IsolationLevel level : {kSer, kSi}) {
      const PolygraphResult r = CheckPolygraph(h, {.levels = {level}, .prune = prune});
      ASSERT_TRUE(r.complete) << r.undecided;
      const bool valid = level == kSer ? c.ser_valid : c.si_valid;
      EXPECT_EQ(Violates(r, level), !valid)
          << c.name << " at " << verdict::IsolationLevelName(level) << (prune ? "" : " unpruned")
          << ":\n"
          << Show(r);
      const verdict::Violation* first = FirstAt(r, level);
      if (valid || first == nullptr) continue;
      const std::optional<Anomaly> anomaly = level == kSer ? c.ser_anomaly : c.si_anomaly;
      if (anomaly.has_value()) {
        EXPECT_EQ(verdict::AnomalyName(first->anomaly), verdict::AnomalyName(*anomaly))
            << c.name << ": " << first->explanation;
      }
      const std::string phrase = level == kSer ? c.ser_phrase : c.si_phrase;
      EXPECT_NE(first->explanation.find(phrase), std::string::npos)
          << c.name << ": '" << phrase << "' not in: " << first->explanation;
      EXPECT_FALSE(first->txns.empty()) << c.name;
    }
  }
}

// The table of the notes (§4), with serializability added.
INSTANTIATE_TEST_SUITE_P(
    Notes, PolygraphAnomalyTest,
    ::testing::Values(
        Case{"lost update",
             {"T1: r(a,0) w(a,1)", "T2: r(a,0) w(a,2)"},
             false,
             false,
             Anomaly::kGSingle,
             Anomaly::kGSIb,
             "lost update",
             "lost update"},
        Case{"write skew",
             {"T1: r(a,0) r(b,0) w(a,1)", "T2: r(a,0) r(b,0) w(b,1)"},
             false,
             true,
             Anomaly::kG2Item,
             std::nullopt,
             "write skew"},
        Case{"long fork",
             {"T1: w(a,1) w(b,1)", "T2: r(a,1) w(a,2)", "T3: r(b,1) w(b,2)", "T4: r(a,2) r(b,1)",
              "T5: r(a,1) r(b,2)"},
             false,
             false,
             Anomaly::kG2Item,
             Anomaly::kG2Item,
             "",
             "long fork"},
        Case{"read skew",
             {"T1: w(a,1) w(b,1)", "T2: r(a,1) r(b,0)"},
             false,
             false,
             Anomaly::kGSingle,
             Anomaly::kGSIb,
             "read skew",
             "read skew"},
        Case{"aborted read",
             {"T1!: w(a,1)", "T2: r(a,1)"},
             false,
             false,
             Anomaly::kG1a,
             Anomaly::kG1a},
        Case{"G1c",
             {"T1: w(a,1) r(b,1)", "T2: w(b,1) r(a,1)"},
             false,
             false,
             Anomaly::kG1c,
             Anomaly::kG1c,
             "G1c",
             "G1c"},
        Case{"read own future write",
             {"T1: r(a,1) w(a,1)"},
             false,
             false,
             Anomaly::kInt,
             Anomaly::kInt,
             "only later",
             "only later"},
        Case{"intermediate read",
             {"T1: w(a,1) w(a,2)", "T2: r(a,1)"},
             false,
             false,
             Anomaly::kG1b,
             Anomaly::kG1b},
        Case{"non-repeatable read",
             {"T1: w(a,1)", "T2: r(a,0) r(a,1)"},
             false,
             false,
             Anomaly::kInt,
             Anomaly::kInt},
        Case{"read own write", {"T1: w(a,1) r(a,1)"}, true, true},
        Case{"miss own write", {"T1: w(a,1) r(a,0)"}, false, false, Anomaly::kInt, Anomaly::kInt},
        Case{"Fig. 2", {"T1: w(a,1)", "T2: w(a,2)", "T3: r(a,1)"}, true, true},
        Case{"read-only anomaly",
             {"T2: r(a,0) r(b,0) w(b,1)", "T1: w(a,2)", "T3: r(a,2) r(b,0)"},
             false,
             true},
        Case{"fractured read over blind writers",
             {"T1: w(a,1) w(b,1)", "T2: w(a,2) w(b,2)", "T3: r(a,1) r(b,2)"},
             false,
             false},
        Case{"causality violation",
             {"T1: w(a,1)", "T2: r(a,1) w(b,1)", "T3: r(b,1) r(a,0)"},
             false,
             false},
        Case{"garbage read", {"T1: r(a,7)"}, false, false, Anomaly::kThinAir, Anomaly::kThinAir},
        Case{"stale but legal",
             {"T1: w(a,1)", "T2: r(a,1) w(a,2)", "T3: r(a,2)", "T4: r(a,1)"},
             true,
             true},
        Case{
            "ww choice free", {"T1: w(a,1) w(b,1)", "T2: w(a,2)", "T3: r(a,2) r(b,0)"}, true, true},
        Case{"ww forced by a read-modify-write",
             {"T1: w(a,1) w(b,1)", "T2: r(a,1) w(a,2)", "T3: r(a,2) r(b,0)"},
             false,
             false},
        Case{"disjoint read-modify-writes", {"T1: r(a,0) w(a,1)", "T2: r(b,0) w(b,1)"}, true, true},
        // Near misses of the rejections above.
        Case{"lost update, serial", {"T1: r(a,0) w(a,1)", "T2: r(a,1) w(a,2)"}, true, true},
        Case{"write skew, one saw the other",
             {"T1: r(a,0) r(b,0) w(a,1)", "T2: r(a,1) r(b,0) w(b,1)"},
             true,
             true},
        Case{"long fork, one side agrees",
             {"T1: w(a,1) w(b,1)", "T2: r(a,1) w(a,2)", "T3: r(b,1) w(b,2)", "T4: r(a,2) r(b,1)",
              "T5: r(a,2) r(b,2)"},
             true,
             true},
        Case{"read skew, consistent", {"T1: w(a,1) w(b,1)", "T2: r(a,1) r(b,1)"}, true, true},
        Case{"causality kept",
             {"T1: w(a,1)", "T2: r(a,1) w(b,1)", "T3: r(b,1) r(a,1)"},
             true,
             true}),
    [](const ::testing::TestParamInfo<Case>& param) {
      std::string name;
      for (char ch : std::string(param.param.name)) {
        name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      }
      return name;
    });

// The anomaly each cycle of the notes' examples is, as a field of the finding (not only words
// of its explanation), at each level where it is one; a finding inside one read is no cycle.
TEST(PolygraphCycleKindTest, NotesExamplesAreNamed) {
  using verdict::CycleKind;
  struct Named {
    std::vector<std::string> txns;
    CycleKind ser;
    CycleKind si;
  };
  const Named named[] = {
      {{"T1: r(a,0) w(a,1)", "T2: r(a,0) w(a,2)"}, CycleKind::kLostUpdate, CycleKind::kLostUpdate},
      {{"T1: r(a,0) r(b,0) w(a,1)", "T2: r(a,0) r(b,0) w(b,1)"},
       CycleKind::kWriteSkew,
       CycleKind::kNone},
      {{"T1: w(a,1) w(b,1)", "T2: r(a,1) w(a,2)", "T3: r(b,1) w(b,2)", "T4: r(a,2) r(b,1)",
        "T5: r(a,1) r(b,2)"},
       CycleKind::kAntiDependencyCycle,
       CycleKind::kLongFork},
      {{"T1: w(a,1) w(b,1)", "T2: r(a,1) r(b,0)"}, CycleKind::kReadSkew, CycleKind::kReadSkew},
      {{"T1: w(a,1) r(b,1)", "T2: w(b,1) r(a,1)"},
       CycleKind::kCircularFlow,
       CycleKind::kCircularFlow},
      {{"T1: w(a,1)", "T2: r(a,1) w(b,1)", "T3: r(b,1) r(a,0)"},
       CycleKind::kReadSkew,
       CycleKind::kMissedEffect},
      {{"T1: w(a,1) w(a,2)", "T2: r(a,1)"}, CycleKind::kNone, CycleKind::kNone},
  };
  for (const Named& n : named) {
    const history::History h = Build(Case{"", n.txns, false, false});
    for (IsolationLevel level : {kSer, kSi}) {
      const PolygraphResult r = CheckPolygraph(h, {.levels = {level}});
      ASSERT_TRUE(r.complete) << r.undecided;
      const CycleKind want = level == kSer ? n.ser : n.si;
      const verdict::Violation* first = FirstAt(r, level);
      // Only the write skew is valid, and only at snapshot isolation.
      const bool valid = level == kSi && n.ser == CycleKind::kWriteSkew;
      ASSERT_EQ(first == nullptr, valid)
          << n.txns.front() << " at " << verdict::IsolationLevelName(level) << ":\n"
          << Show(r);
      if (valid) continue;
      EXPECT_STREQ(verdict::CycleKindName(first->cycle_kind), verdict::CycleKindName(want))
          << verdict::IsolationLevelName(level) << ": " << first->explanation;
    }
  }
}

// The variant table of the notes, with real time as the clients' intervals [invoke, complete]:
// each history's verdict under Adya, generalized, strong session and strong SI.
struct VariantCase {
  const char* name;
  history::History h;
  bool valid[4];  // adya, generalized, strong-session, strong
};

TEST(PolygraphVariantTest, RealTimeAndSessionsNarrowSnapshotIsolation) {
  std::vector<VariantCase> cases;
  {
    TestHistory t;  // a session does not see its own earlier commit
    t.DefaultInitial(0);
    t.Untimed("T1", "s1").RealTime(0, 1).W(0, 1);
    t.Untimed("T2", "s1").RealTime(2, 3).R(0, 0);
    cases.push_back({"session inversion", t.Build(), {true, true, false, false}});
  }
  {
    TestHistory t;  // a stale snapshot across sessions
    t.DefaultInitial(0);
    t.Untimed("T1", "s1").RealTime(0, 10).W(0, 1);
    t.Untimed("T2", "s2").RealTime(20, 25).R(0, 0);
    cases.push_back({"stale snapshot", t.Build(), {true, true, true, false}});
  }
  {
    TestHistory t;  // a read from a transaction invoked after the reader completed
    t.DefaultInitial(0);
    t.Untimed("T1", "s1").RealTime(10, 20).W(0, 1);
    t.Untimed("T2", "s2").RealTime(0, 5).R(0, 1);
    cases.push_back({"read from the future", t.Build(), {true, false, false, false}});
  }
  {
    TestHistory t;  // the near miss: overlapping, so the read may be legal
    t.DefaultInitial(0);
    t.Untimed("T1", "s1").RealTime(0, 10).W(0, 1);
    t.Untimed("T2", "s2").RealTime(5, 15).R(0, 1);
    cases.push_back({"overlapping read", t.Build(), {true, true, true, true}});
  }
  const SiVariant variants[] = {SiVariant::kAdya, SiVariant::kGeneralized,
                                SiVariant::kStrongSession, SiVariant::kStrong};
  for (const VariantCase& c : cases) {
    for (int i = 0; i < 4; ++i) {
      const PolygraphResult r = CheckPolygraph(c.h, {.levels = {kSi}, .si_variant = variants[i]});
      ASSERT_TRUE(r.complete) << r.undecided;
      EXPECT_EQ(!Violates(r, kSi), c.valid[i])
          << c.name << " under " << SiVariantName(variants[i]) << ":\n"
          << Show(r);
    }
  }
}

// A clock drift δ takes a real-time order of δ or less for clock error: the stale snapshot and
// the read from the future stay violations while their gap exceeds δ, and pass from there on.
TEST(PolygraphVariantTest, ClockDriftForgivesSmallInversions) {
  struct DriftCase {
    const char* name;
    history::History h;
    SiVariant variant;
    int64_t largest_caught;  // the largest δ at which it is still a violation
  };
  std::vector<DriftCase> cases;
  {
    TestHistory t;  // T1 completes at 10; T2, invoked at 20, does not see it: gap 10
    t.DefaultInitial(0);
    t.Untimed("T1", "s1").RealTime(0, 10).W(0, 1);
    t.Untimed("T2", "s2").RealTime(20, 25).R(0, 0);
    cases.push_back({"stale snapshot", t.Build(), SiVariant::kStrong, 9});
  }
  {
    TestHistory t;  // T2 completes at 5 and reads T1's write; T1 was invoked at 10: gap 5
    t.DefaultInitial(0);
    t.Untimed("T1", "s1").RealTime(10, 20).W(0, 1);
    t.Untimed("T2", "s2").RealTime(0, 5).R(0, 1);
    cases.push_back({"read from the future", t.Build(), SiVariant::kGeneralized, 4});
  }
  for (const DriftCase& c : cases) {
    for (int64_t drift : {int64_t{0}, c.largest_caught, c.largest_caught + 1, int64_t{1000}}) {
      const PolygraphResult r =
          CheckPolygraph(c.h, {.levels = {kSi}, .si_variant = c.variant, .clock_drift = drift});
      ASSERT_TRUE(r.complete) << r.undecided;
      EXPECT_EQ(Violates(r, kSi), drift <= c.largest_caught)
          << c.name << " at drift " << drift << ":\n"
          << Show(r);
      const auto stat = std::find_if(r.stats.begin(), r.stats.end(),
                                     [](const auto& s) { return s.first == "clock_drift"; });
      ASSERT_NE(stat, r.stats.end());
      EXPECT_EQ(stat->second, static_cast<uint64_t>(drift));
    }
  }
}

TEST(PolygraphVariantTest, RealTimeVariantsNeedRealTime) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Untimed("T1", "s1").W(0, 1);
  const history::History h = t.Build();
  for (SiVariant v : {SiVariant::kGeneralized, SiVariant::kStrong}) {
    const PolygraphResult r = CheckPolygraph(h, {.levels = {kSi}, .si_variant = v});
    EXPECT_FALSE(r.complete);
    EXPECT_NE(r.undecided.find("real-time"), std::string::npos) << r.undecided;
  }
  // Serializability does not need it.
  EXPECT_TRUE(CheckPolygraph(h, {.levels = {kSer}, .si_variant = SiVariant::kStrong}).complete);
}

// List-append forms of the examples: the version order is read from the lists.
TEST(PolygraphListTest, ListExamplesAndNearMisses) {
  struct ListCase {
    const char* name;
    history::History h;
    bool ser_valid;
    bool si_valid;
    std::optional<Anomaly> anomaly;  // of the first finding at ser, when invalid
  };
  std::vector<ListCase> cases;
  {
    TestHistory t;
    t.Untimed("T1", "s1").L(0, {}).A(0, 1);
    t.Untimed("T2", "s2").L(0, {}).A(0, 2);
    t.Untimed("T3", "s3").L(0, {1, 2});
    cases.push_back({"lost update", t.Build(), false, false, Anomaly::kGSingle});
  }
  {
    TestHistory t;
    t.Untimed("T1", "s1").L(0, {}).A(0, 1);
    t.Untimed("T2", "s2").L(0, {1}).A(0, 2);
    t.Untimed("T3", "s3").L(0, {1, 2});
    cases.push_back({"lost update, serial", t.Build(), true, true, std::nullopt});
  }
  {
    TestHistory t;
    t.Untimed("T1", "s1").A(0, 1).L(1, {1});
    t.Untimed("T2", "s2").A(1, 1).L(0, {1});
    cases.push_back({"G1c", t.Build(), false, false, Anomaly::kG1c});
  }
  {
    TestHistory t;
    t.Untimed("T1", "s1").A(0, 1);
    t.Untimed("T2", "s2").A(0, 2);
    t.Untimed("T3", "s3").L(0, {1, 2});
    t.Untimed("T4", "s4").L(0, {2, 1});
    cases.push_back({"incompatible orders", t.Build(), false, false, Anomaly::kIncompatibleOrder});
  }
  {
    TestHistory t;
    t.Untimed("T1", "s1").L(0, {}).L(1, {}).A(0, 1);
    t.Untimed("T2", "s2").L(0, {}).L(1, {}).A(1, 1);
    cases.push_back({"write skew", t.Build(), false, true, Anomaly::kG2Item});
  }
  {
    TestHistory t;
    t.Untimed("T1", "s1").A(0, 1);
    t.Untimed("T2", "s2").A(0, 2);
    t.Untimed("T3", "s3").L(0, {});
    cases.push_back({"unobserved appends", t.Build(), true, true, std::nullopt});
  }
  {
    TestHistory t;
    t.Untimed("T1", "s1").A(0, 1).A(0, 2);
    t.Untimed("T2", "s2").L(0, {1});
    cases.push_back({"intermediate version", t.Build(), false, false, Anomaly::kG1b});
  }
  {
    TestHistory t;
    t.Untimed("T1", "s1").A(0, 1).A(1, 1);
    t.Untimed("T2", "s2").L(0, {1}).L(1, {});
    cases.push_back({"read skew", t.Build(), false, false, Anomaly::kGSingle});
  }
  for (const ListCase& c : cases) {
    for (bool prune : {true, false}) {
      const PolygraphResult r = CheckPolygraph(c.h, {.prune = prune});
      ASSERT_TRUE(r.complete) << c.name << ": " << r.undecided;
      EXPECT_EQ(!Violates(r, kSer), c.ser_valid) << c.name << ":\n" << Show(r);
      EXPECT_EQ(!Violates(r, kSi), c.si_valid) << c.name << ":\n" << Show(r);
      const verdict::Violation* first = FirstAt(r, kSer);
      if (c.anomaly.has_value() && first != nullptr) {
        EXPECT_EQ(verdict::AnomalyName(first->anomaly), verdict::AnomalyName(*c.anomaly))
            << c.name << ": " << first->explanation;
      }
    }
  }
}

TEST(PolygraphTest, DuplicateWritesLeaveTheHistoryUndecided) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Untimed("T1", "s1").W(0, 1);
  t.Untimed("T2", "s2").W(0, 1);
  t.Untimed("T3", "s3").R(0, 1);
  const PolygraphResult r = CheckPolygraph(t.Build());
  EXPECT_FALSE(r.complete);
  EXPECT_NE(r.undecided.find("more than one transaction"), std::string::npos) << r.undecided;
  EXPECT_TRUE(r.violations.empty());
}

// Past the constraint-edge cap the history is undecided (UNKNOWN), never valid; under it the
// same history is judged. Five blind writers of one key and a reader of each: every pair of the
// five chains is a constraint of 1 + 1 edges per order, 2 * 5 * 4 = 40 edges in all.
TEST(PolygraphTest, ConstraintEdgeCapGivesUnknown) {
  std::vector<std::string> txns;
  for (int i = 1; i <= 5; ++i) txns.push_back(fmt::format("W{}: w(a,{})", i, i));
  for (int i = 1; i <= 5; ++i) txns.push_back(fmt::format("R{}: r(a,{})", i, i));
  const history::History h = Build(Case{"", txns, true, true});
  const PolygraphResult judged = CheckPolygraph(h, {.max_constraint_edges = 41});
  EXPECT_TRUE(judged.complete) << judged.undecided;
  EXPECT_TRUE(judged.violations.empty()) << Show(judged);
  const PolygraphResult capped = CheckPolygraph(h, {.max_constraint_edges = 40});
  EXPECT_FALSE(capped.complete);
  EXPECT_TRUE(capped.violations.empty());
  EXPECT_NE(capped.undecided.find("more than 40 constraint edges"), std::string::npos)
      << capped.undecided;
}

// Counted: committed transactions and unknown ones a read saw, from first_counted on.
TEST(PolygraphTest, CountsTheTransactionsItJudges) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Untimed("U1", "a", history::TxnStatus::kUnknown).W(0, 1);
  t.Untimed("U2", "b", history::TxnStatus::kUnknown).W(0, 2);
  t.Untimed("R", "c").R(0, 1);
  t.Untimed("A", "d", history::TxnStatus::kAborted).W(0, 3);
  const history::History h = t.Build();
  EXPECT_EQ(CheckPolygraph(h).counted, 2u);
  EXPECT_EQ(CheckPolygraph(h, {.first_counted = 1}).counted, 1u);
}

TEST(PolygraphTest, ExpiredLimitsGiveUnknown) {
  TestHistory t;
  t.DefaultInitial(0);
  t.Untimed("T1", "s1").W(0, 1).W(1, 1);
  t.Untimed("T2", "s2").W(0, 2).W(1, 2);
  t.Untimed("T3", "s3").R(0, 1).R(1, 2);
  const CheckLimits expired(CheckLimits::Clock::now());
  const PolygraphResult r = CheckPolygraph(t.Build(), {.limits = &expired});
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(r.undecided.empty());
  EXPECT_TRUE(r.violations.empty());
}

}  // namespace
}  // namespace isowatch::checkers::polygraph
