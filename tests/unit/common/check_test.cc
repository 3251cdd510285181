// SPDX-License-Identifier: Apache-2.0
#include "isowatch/common/check.h"

#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

namespace isowatch::common {
namespace {

TEST(CheckTest, HoldingConditionsPassAndCountNothing) {
  const uint64_t before = InternalBugCount();
  int evaluated = 0;
  ISOWATCH_CHECK(++evaluated == 1, "evaluated once");
  EXPECT_EQ(evaluated, 1);
  EXPECT_TRUE(ISOWATCH_BUG(++evaluated == 2, "evaluated once"));
  EXPECT_EQ(evaluated, 2);
  ISOWATCH_DCHECK(evaluated == 2, "holds");
  EXPECT_EQ(InternalBugCount(), before);
}

TEST(CheckDeathTest, FailedCheckAbortsWithTheConditionAndMessage) {
  const int answer = 41;
  EXPECT_DEATH(ISOWATCH_CHECK(answer == 42, "the answer is fixed"),
               "check failed at .*check_test.cc:[0-9]+: answer == 42 \\(the answer is fixed\\)");
}

TEST(CheckDeathTest, DcheckFollowsTheBuild) {
  const int answer = 41;
  if constexpr (kDebugChecks) {
    EXPECT_DEATH(ISOWATCH_DCHECK(answer == 42, "debug only"), "answer == 42 \\(debug only\\)");
  } else {
    int evaluated = 0;
    ISOWATCH_DCHECK(++evaluated == 5, "not evaluated");
    EXPECT_EQ(evaluated, 0);
  }
}

TEST(CheckDeathTest, BugAbortsInDebugAndIsCountedInRelease) {
  const int answer = 41;
  if constexpr (kDebugChecks) {
    EXPECT_DEATH((void)ISOWATCH_BUG(answer == 42, "degradable"),
                 "internal bug at .*: answer == 42 \\(degradable\\)");
  } else {
    const uint64_t before = InternalBugCount();
    EXPECT_FALSE(ISOWATCH_BUG(answer == 42, "degradable"));
    EXPECT_EQ(InternalBugCount(), before + 1);
  }
}

// A program's logger takes the report in place of standard error (a daemon whose log is JSON
// lines keeps it so).
TEST(CheckDeathTest, BugGoesToTheReporterWhenOneIsSet) {
  auto report = [] {
    SetBugReporter([](const char* text) { std::fprintf(stderr, "REPORTED<%s>\n", text); });
    const int answer = 41;
    (void)ISOWATCH_BUG(answer == 42, "reported");
    SetBugReporter(nullptr);
    if constexpr (!kDebugChecks) std::abort();  // so that both builds can check the output
  };
  EXPECT_DEATH(report(), "REPORTED<internal bug at .*: answer == 42 \\(reported\\)");
}

}  // namespace
}  // namespace isowatch::common
