// SPDX-License-Identifier: Apache-2.0
// The 14 transactional anomalous patterns, each as a violating history and a valid near miss,
// at read committed, read atomic and causal consistency, as registers and as list appends
// (docs/checkers/plume.md, "The patterns"). Every case is also judged by the axiomatic oracle.
#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/plume/plume.h"
#include "isowatch/checkers/registry.h"
#include "isowatch/verdict/violation.h"
#include "isowatch/windows/window_cutter.h"

#include "tests/unit/checkers/plume/plume_testing.h"

namespace isowatch::checkers::plume {
namespace {

using testing::BuildKv;
using testing::BuildList;
using testing::Labels;
using testing::Oracle;
using testing::ParseOps;
using verdict::IsolationLevel;

struct TapCase {
  const char* name;
  const char* text;
  // The TAPs reported at rc, ra and tcc (letters, sorted); empty: valid at that level.
  const char* rc;
  const char* ra;
  const char* tcc;
  // As list appends, where the lists' order differs from what registers leave open: the TAPs at
  // rc, ra and tcc (nullptr: as for registers).
  const char* list_rc = nullptr;
  const char* list_ra = nullptr;
  const char* list_tcc = nullptr;
};

// Violating histories (the notes' §2.5 instantiations) and their near misses.
const TapCase kCases[] = {
    {"a", "r(1,5,1,1)", "a", "a", "a"},
    {"a_near", "w(1,5,2,2) r(1,5,1,1)", "", "", ""},
    {"b", "w(1,1,1,-1) r(1,1,2,2)", "b", "b", "b"},
    {"b_near", "w(1,1,1,-1) r(1,0,2,2)", "", "", ""},
    {"c", "r(1,1,1,1) w(1,1,1,1)", "c", "c", "c"},
    {"c_own_then_future", "w(1,1,1,1) r(1,2,1,1) w(1,2,1,1)", "c", "c", "c"},
    {"c_near", "w(1,1,1,1) r(1,1,1,1)", "", "", ""},
    {"d", "w(1,1,1,1) w(1,2,2,2) r(1,1,2,2)", "d", "d", "d"},
    {"d_near", "w(1,1,1,1) w(1,2,2,2) r(1,2,2,2)", "", "", ""},
    {"e", "w(1,1,1,1) w(1,2,1,1) r(1,1,1,1)", "e", "e", "e"},
    {"e_near", "w(1,1,1,1) r(1,1,1,1) w(1,2,1,1) r(1,2,1,1)", "", "", ""},
    {"f", "w(1,1,1,1) w(1,2,1,1) r(1,1,2,2)", "f", "f", "f"},
    {"f_near", "w(1,1,1,1) w(1,2,1,1) r(1,2,2,2)", "", "", ""},
    {"g", "r(1,2,1,1) w(2,1,1,1) r(2,1,2,2) w(1,2,2,2)", "g", "g", "g"},
    {"g3", "r(1,3,1,1) w(2,1,1,1) r(2,1,2,2) w(3,2,2,2) r(3,2,3,3) w(1,3,3,3)", "g", "g", "g"},
    {"g_near", "r(1,0,1,1) w(2,1,1,1) r(2,1,2,2) w(1,2,2,2)", "", "", ""},
    {"h", "w(1,1,1,1) w(1,2,1,2) w(2,1,1,2) r(2,1,2,3) r(1,1,2,3)", "h", "h", "h"},
    {"h_near", "w(1,1,1,1) w(1,2,1,2) w(2,1,1,2) r(2,1,2,3) r(1,2,2,3)", "", "", ""},
    {"h_initial", "w(1,5,1,1) w(2,5,1,1) r(2,5,2,2) r(1,0,2,2)", "h", "h", "h"},
    {"h_initial_near", "w(1,5,1,1) w(2,5,1,1) r(2,5,2,2) r(1,5,2,2)", "", "", ""},
    {"i",
     "w(1,1,1,1) w(3,1,1,1) w(4,1,1,1) w(1,2,2,2) w(2,2,2,2) w(3,2,2,2) r(2,2,3,3) r(1,1,3,3) "
     "r(4,1,4,4) r(3,2,4,4)",
     "i", "i", "i"},
    // T2's writes come first in the text, so that as lists T2's appends precede T1's, as the
    // commit order must have it.
    {"i_near",
     "w(1,2,2,2) w(2,2,2,2) w(3,2,2,2) w(1,1,1,1) w(3,1,1,1) w(4,1,1,1) r(2,2,3,3) r(1,1,3,3) "
     "r(4,1,4,4) r(3,1,4,4)",
     "", "", ""},
    {"j", "w(1,1,1,1) w(1,2,2,2) r(1,1,3,3) r(1,2,3,3)", "", "j", "jn"},
    {"j_near", "w(1,1,1,1) w(1,2,2,2) r(1,1,3,3) r(1,1,3,3)", "", "", ""},
    {"k", "w(1,1,1,1) w(1,2,1,2) w(2,2,1,2) r(1,1,2,3) r(2,2,2,3)", "", "k", "k"},
    {"k_near", "w(1,1,1,1) w(1,2,1,2) w(2,2,1,2) r(1,2,2,3) r(2,2,2,3)", "", "", ""},
    {"k_session", "w(1,1,1,1) r(1,1,2,2) w(1,2,2,2) r(1,1,2,3)", "", "k", "k"},
    {"k_session_near", "w(1,1,1,1) r(1,1,2,2) w(1,2,2,2) r(1,2,2,3)", "", "", ""},
    {"k_initial", "w(1,5,1,1) w(2,5,1,1) r(1,0,2,2) r(2,5,2,2)", "", "k", "k"},
    {"k_initial_near", "w(1,5,1,1) w(2,5,1,1) r(1,5,2,2) r(2,5,2,2)", "", "", ""},
    {"l", "w(1,1,1,1) w(3,1,1,1) r(3,2,1,4) w(1,2,2,2) w(2,2,2,2) w(3,2,2,2) r(1,1,3,3) r(2,2,3,3)",
     "", "l", "l"},
    {"l_near",
     "w(1,1,1,1) w(3,1,1,1) r(3,2,1,4) w(1,2,2,2) w(2,2,2,2) w(3,2,2,2) r(1,2,3,3) r(2,2,3,3)", "",
     "", ""},
    {"m", "w(1,1,1,1) w(1,2,1,2) w(2,2,1,2) r(2,2,2,4) r(1,1,2,3)", "", "", "m"},
    {"m_near", "w(1,1,1,1) w(1,2,1,2) w(2,2,1,2) r(2,2,2,4) r(1,2,2,3)", "", "", ""},
    {"m_initial", "w(1,5,1,1) w(2,5,1,1) r(2,5,2,2) r(1,0,2,3)", "", "", "m"},
    {"m_initial_near", "w(1,5,1,1) w(2,5,1,1) r(2,5,2,2) r(1,5,2,3)", "", "", ""},
    {"n",
     "w(1,1,1,1) w(2,1,1,1) w(4,1,1,1) w(1,2,2,2) w(2,2,2,2) w(3,2,2,2) r(3,2,3,3) r(1,1,3,4) "
     "r(4,1,4,5) r(2,2,4,6)",
     "", "", "n"},
    {"n_near",
     "w(1,2,2,2) w(2,2,2,2) w(3,2,2,2) w(1,1,1,1) w(2,1,1,1) w(4,1,1,1) r(3,2,3,3) r(1,1,3,4) "
     "r(4,1,4,5) r(2,1,4,6)",
     "", "", ""},
    // Read atomic holds and causal consistency does not: read atomic's commit order must come
    // from its own axiom, not the causal one. As lists, whose reads put T1's appends before
    // T2's, read atomic fails too: T3 read x from T1 after T2 in its session.
    {"ra_holds_tcc_not",
     "w(1,1,1,1) w(2,1,1,1) w(3,1,1,1) w(1,2,3,2) w(2,2,3,2) r(1,1,3,3) r(3,1,2,4) r(2,2,2,5)", "",
     "", "ln", "", "l", "ln"},
    {"ok1", "w(1,1,1,1) w(2,1,1,1) r(1,1,2,2) r(2,1,2,2) w(1,2,2,2) r(1,2,1,3)", "", "", ""},
};

const IsolationLevel kLevels[] = {IsolationLevel::kReadCommitted, IsolationLevel::kReadAtomic,
                                  IsolationLevel::kCausal};

class PlumeTapTest : public ::testing::TestWithParam<TapCase> {};

TEST_P(PlumeTapTest, RegistersGiveTheExpectedPatternsAtEachLevel) {
  const TapCase& c = GetParam();
  const auto ops = ParseOps(c.text);
  const history::History h = BuildKv(ops);
  const PlumeResult r = CheckPlume(h);
  ASSERT_TRUE(r.complete) << r.undecided;
  EXPECT_EQ(Labels(r, IsolationLevel::kReadCommitted), c.rc) << c.text;
  EXPECT_EQ(Labels(r, IsolationLevel::kReadAtomic), c.ra) << c.text;
  EXPECT_EQ(Labels(r, IsolationLevel::kCausal), c.tcc) << c.text;
  const testing::OracleVerdict o = Oracle(ops, false);
  EXPECT_EQ(o.rc, std::string(c.rc).empty()) << "oracle at rc: " << c.text;
  EXPECT_EQ(o.ra, std::string(c.ra).empty()) << "oracle at ra: " << c.text;
  EXPECT_EQ(o.tcc, std::string(c.tcc).empty()) << "oracle at tcc: " << c.text;
}

TEST_P(PlumeTapTest, EachLevelAloneFindsWhatItForbids) {
  const TapCase& c = GetParam();
  const history::History h = BuildKv(ParseOps(c.text));
  const char* expected[] = {c.rc, c.ra, c.tcc};
  for (int i = 0; i < 3; ++i) {
    const PlumeResult r = CheckPlume(h, {.levels = {kLevels[i]}});
    EXPECT_EQ(Labels(r, kLevels[i]), expected[i]) << verdict::IsolationLevelName(kLevels[i]);
    for (const verdict::Violation& v : r.violations) {
      EXPECT_THAT(v.levels, ::testing::ElementsAre(kLevels[i]));
    }
  }
}

TEST_P(PlumeTapTest, ListsGiveTheSameVerdictsAndPatterns) {
  const TapCase& c = GetParam();
  const auto ops = ParseOps(c.text);
  const history::History h = BuildList(ops);
  const PlumeResult r = CheckPlume(h);
  ASSERT_TRUE(r.complete) << r.undecided;
  const char* expected[] = {c.list_rc != nullptr ? c.list_rc : c.rc,
                            c.list_ra != nullptr ? c.list_ra : c.ra,
                            c.list_tcc != nullptr ? c.list_tcc : c.tcc};
  const testing::OracleVerdict o = Oracle(ops, true);
  const bool oracle[] = {o.rc, o.ra, o.tcc};
  for (int i = 0; i < 3; ++i) {
    const std::string found = Labels(r, kLevels[i]);
    EXPECT_EQ(found.empty(), std::string(expected[i]).empty())
        << verdict::IsolationLevelName(kLevels[i]) << ": " << found;
    EXPECT_EQ(oracle[i], found.empty()) << verdict::IsolationLevelName(kLevels[i]);
    for (const char* p = expected[i]; *p != '\0'; ++p) {
      EXPECT_NE(found.find(*p), std::string::npos)
          << verdict::IsolationLevelName(kLevels[i]) << ": " << found;
    }
  }
}

// The same cases, one after the other, through windows as the daemon cuts them
// (windows::WindowCutter) and the plug-in with each window's scope. With windows of 16
// transactions and a lead-in of 16, every case (at most 8 transactions) meets whole in one
// window, and the windows together find what the whole history finds, less what the window rule
// leaves to the whole history (docs/checkers/plume.md, "Windows"). With windows of 4, a pattern
// spread over more transactions than a window holds goes unseen, but nothing is found that the
// whole history does not find.
TEST(PlumeTapWindowsTest, WindowsFindWhatTheWholeHistoryFinds) {
  std::vector<std::vector<testing::TextOp>> parts;
  int64_t part = 0;
  for (const TapCase& c : kCases) {
    ++part;
    std::vector<testing::TextOp> ops = ParseOps(c.text);
    for (testing::TextOp& op : ops) {
      op.key += part * 10;
      op.session += part * 10;
      if (op.txn >= 0) op.txn += part * 10;
    }
    parts.push_back(std::move(ops));
  }
  const history::History h = testing::BuildKvParts(parts);
  auto checker = CreateChecker("plume", {});
  ASSERT_TRUE(checker.ok()) << checker.status();
  // (pattern, reader, key) of each finding.
  using Finding = std::tuple<std::string, std::string, int64_t>;
  auto findings = [](const history::History& of, const CheckerResult& r, bool trusted_only) {
    std::set<Finding> out;
    for (const verdict::Violation& v : r.violations) {
      const bool from_initial = v.txns.size() == 2 && (v.anomaly == verdict::Anomaly::kTapH ||
                                                       v.anomaly == verdict::Anomaly::kTapK ||
                                                       v.anomaly == verdict::Anomaly::kTapM);
      if (trusted_only && (v.anomaly == verdict::Anomaly::kTapA || from_initial)) continue;
      out.emplace(verdict::AnomalyName(v.anomaly), std::string(of.txn_name(v.txns[0])),
                  v.key.valid() ? of.key(v.key).payload : -1);
    }
    return out;
  };
  const std::set<Finding> whole = findings(h, (*checker)->Check(h, nullptr, CheckLimits()), true);
  auto cut = [&](uint64_t size, size_t* windows, size_t* out_of_scope) {
    windows::WindowCutter cutter({.transactions = size, .overlap = static_cast<int64_t>(size)});
    std::vector<windows::Window> sealed;
    for (uint64_t i = 0; i < h.size(); ++i) {
      cutter.Add(h, TxnId(i));
      const history::Transaction& t = h.txn(TxnId(i));
      if (!t.has_commit) continue;
      for (windows::Window& w : cutter.Seal(h, t.commit)) sealed.push_back(std::move(w));
    }
    for (windows::Window& w : cutter.Flush(h)) sealed.push_back(std::move(w));
    std::set<Finding> found;
    for (const windows::Window& w : sealed) {
      EXPECT_TRUE(w.defect.empty()) << w.defect;
      ++*windows;
      const CheckerResult r = (*checker)->Check(w.history, &w.scope, CheckLimits());
      EXPECT_TRUE(r.complete) << r.undecided;
      *out_of_scope += r.findings_out_of_scope;
      for (const Finding& f : findings(w.history, r, false)) found.insert(f);
    }
    return found;
  };
  size_t windows = 0;
  size_t out_of_scope = 0;
  EXPECT_EQ(cut(16, &windows, &out_of_scope), whole);
  EXPECT_GT(windows, 4u);
  EXPECT_GT(out_of_scope, 0u);
  const std::set<Finding> small = cut(4, &windows, &out_of_scope);
  EXPECT_TRUE(std::includes(whole.begin(), whole.end(), small.begin(), small.end()));
  EXPECT_GT(small.size(), whole.size() / 2);
}

INSTANTIATE_TEST_SUITE_P(Cases, PlumeTapTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<TapCase>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
}  // namespace isowatch::checkers::plume
