// SPDX-License-Identifier: Apache-2.0
// The engine's internal containers against plain ones: TimeQueue against a list of entries under
// rising and falling bounds.
#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/engine/internal/time_queue.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::engine::internal {
namespace {

using history::Timestamp;

// TimeQueue: what each TakeUpTo returns is exactly the entries at or below the bound.
TEST(TimeQueueTest, TakesExactlyTheEntriesAtOrBelowTheBound) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    std::mt19937_64 rng(seed);
    TimeQueue q;
    std::vector<std::pair<Timestamp, uint32_t>> model;
    Timestamp bound = Timestamp::Min();
    uint32_t serial = 0;
    for (int round = 0; round < 3000; ++round) {
      const int pushes = static_cast<int>(rng() % 20);
      for (int i = 0; i < pushes; ++i) {
        // Mostly above the last bound, sometimes at or below it; logical parts and negative
        // physical parts included.
        const int64_t base = bound == Timestamp::Min() ? -1000 : bound.physical;
        const int64_t offset = static_cast<int64_t>(rng() % 3000) - (seed == 4 ? 1500 : 100);
        const Timestamp ts{base + offset, static_cast<int64_t>(rng() % 3) - 1};
        q.Push(ts, ++serial);
        model.emplace_back(ts, serial);
      }
      // Bounds mostly rise; seed 3 lets them fall too (as a collection point may).
      const int64_t step = static_cast<int64_t>(rng() % 400) - (seed == 3 ? 150 : 0);
      const int64_t base = bound == Timestamp::Min() ? -1000 : bound.physical;
      bound = Timestamp{base + step, static_cast<int64_t>(rng() % 3) - 1};
      std::vector<uint32_t> got;
      q.TakeUpTo(bound, [&](uint32_t key) { got.push_back(key); });
      std::vector<uint32_t> want;
      std::vector<std::pair<Timestamp, uint32_t>> rest;
      for (const auto& e : model) {
        if (e.first <= bound) {
          want.push_back(e.second);
        } else {
          rest.push_back(e);
        }
      }
      model = std::move(rest);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << "seed " << seed << " round " << round;
      ASSERT_EQ(q.size(), model.size());
    }
    std::vector<uint32_t> got;
    q.TakeUpTo(Timestamp::Max(), [&](uint32_t key) { got.push_back(key); });
    EXPECT_EQ(got.size(), model.size());
    EXPECT_TRUE(q.empty());
  }
}

}  // namespace
}  // namespace isowatch::engine::internal
