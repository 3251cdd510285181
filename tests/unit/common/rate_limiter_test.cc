// SPDX-License-Identifier: Apache-2.0
// RateLimiter: a burst per window, and the count of what was held back handed to the next event
// let through.
#include "isowatch/common/rate_limiter.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace isowatch {
namespace {

TEST(RateLimiterTest, LetsABurstThroughPerWindowAndCountsTheRest) {
  RateLimiter limiter(/*interval_ms=*/1000, /*burst=*/2);
  uint64_t held = 99;
  EXPECT_TRUE(limiter.Allow(0, &held));
  EXPECT_EQ(held, 0u);
  EXPECT_TRUE(limiter.Allow(10, &held));
  EXPECT_EQ(held, 0u);
  held = 99;
  EXPECT_FALSE(limiter.Allow(20, &held));
  EXPECT_FALSE(limiter.Allow(999, &held));
  EXPECT_EQ(held, 99u);  // untouched when held back
  // The next window: the first event let through says how many were held back.
  EXPECT_TRUE(limiter.Allow(1000, &held));
  EXPECT_EQ(held, 2u);
  EXPECT_TRUE(limiter.Allow(1001, &held));
  EXPECT_EQ(held, 0u);
  EXPECT_FALSE(limiter.Allow(1002, &held));
  EXPECT_TRUE(limiter.Allow(5000, &held));
  EXPECT_EQ(held, 1u);
}

TEST(RateLimiterTest, AClockThatGoesBackStartsAWindow) {
  RateLimiter limiter(1000, 1);
  uint64_t held = 0;
  EXPECT_TRUE(limiter.Allow(5000, &held));
  EXPECT_FALSE(limiter.Allow(5001, &held));
  EXPECT_TRUE(limiter.Allow(100, &held));
  EXPECT_EQ(held, 1u);
}

}  // namespace
}  // namespace isowatch
