// SPDX-License-Identifier: Apache-2.0
#include "isowatch/workload/session_plan.h"

#include <cstdint>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <gtest/gtest.h>

#include "isowatch/workload/key_chooser.h"
#include "isowatch/workload/rng.h"

namespace isowatch::workload {
namespace {

TEST(SessionPlanTest, PlansTheOperationsAsked) {
  const KeyChooser keys(Distribution::kUniform, 10, 0.99);
  Rng rng(7);
  EXPECT_EQ(PlanTxn(rng, keys, 5, 0.5).size(), 5u);
  EXPECT_EQ(PlanTxn(rng, keys, 0, 0.5).size(), 1u);  // at least one
  for (const PlannedOp& op : PlanTxn(rng, keys, 50, 0.0)) {
    EXPECT_FALSE(op.read);
    EXPECT_LT(op.key, 10u);
  }
  for (const PlannedOp& op : PlanTxn(rng, keys, 50, 1.0)) EXPECT_TRUE(op.read);
  int reads = 0;
  for (const PlannedOp& op : PlanTxn(rng, keys, 10000, 0.3)) reads += op.read ? 1 : 0;
  EXPECT_NEAR(reads, 3000, 300);
}

TEST(SessionPlanTest, SameSeedSamePlan) {
  const KeyChooser keys(Distribution::kZipfian, 1000, 0.99);
  Rng a(11);
  Rng b(11);
  for (int i = 0; i < 20; ++i) {
    const std::vector<PlannedOp> x = PlanTxn(a, keys, 4, 0.5);
    const std::vector<PlannedOp> y = PlanTxn(b, keys, 4, 0.5);
    ASSERT_EQ(x.size(), y.size());
    for (size_t j = 0; j < x.size(); ++j) {
      EXPECT_EQ(x[j].read, y[j].read);
      EXPECT_EQ(x[j].key, y[j].key);
    }
  }
}

// Each of 4 sessions sharing 1000 transactions per second starts one every 4 ms: ten starts
// take at least 40 ms (a lower bound only, which a busy machine cannot break).
TEST(SessionPlanTest, PacesASessionsShareOfTheRate) {
  Pacer pacer(4, 1000);
  const absl::Time start = absl::Now();
  for (int i = 0; i < 10; ++i) pacer.Wait();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(40));
}

}  // namespace
}  // namespace isowatch::workload
