// SPDX-License-Identifier: Apache-2.0
// The 14 transactional anomalous patterns, each as a violating history and a valid near miss,
// at read committed, read atomic and causal consistency, as registers and as list appends
// (docs/checkers/plume.md, "The patterns"). Every case is also judged by the axiomatic oracle.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/plume/plume.h"
#include "isowatch/verdict/violation.h"

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

INSTANTIATE_TEST_SUITE_P(Cases, PlumeTapTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<TapCase>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
}  // namespace isowatch::checkers::plume
