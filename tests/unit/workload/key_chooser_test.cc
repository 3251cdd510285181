// SPDX-License-Identifier: Apache-2.0
#include "isowatch/workload/key_chooser.h"

#include <cstdint>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/workload/rng.h"

namespace isowatch::workload {
namespace {

// Share of draws that fall on the hottest 10% of keys.
double HotShare(Distribution dist) {
  KeyChooser chooser(dist, 1000, 0.99);
  Rng rng(3);
  int hot = 0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    uint64_t k = chooser.Next(rng);
    EXPECT_LT(k, 1000u);
    hot += k < 100;
  }
  return static_cast<double>(hot) / kDraws;
}

TEST(KeyChooserTest, SkewedDistributionsFavourHotKeys) {
  double uniform = HotShare(Distribution::kUniform);
  double zipf = HotShare(Distribution::kZipfian);
  double hotspot = HotShare(Distribution::kHotspot);
  EXPECT_NEAR(uniform, 0.10, 0.01);
  EXPECT_NEAR(hotspot, 0.40, 0.02);  // half of the hot 20% take 80%
  EXPECT_GT(zipf, 0.6);              // sum_{i<=100} i^-0.99 / sum_{i<=1000} i^-0.99 ~ 0.68
  KeyChooser chooser(Distribution::kZipfian, 1000, 0.99);
  Rng rng(4);
  std::vector<int> count(1000);
  for (int i = 0; i < 100000; ++i) ++count[chooser.Next(rng)];
  EXPECT_GT(count[0], 10 * count[99]);
  EXPECT_GT(count[0], count[1]);
}

TEST(KeyChooserTest, TinyKeySpaces) {
  Rng rng(1);
  for (Distribution d : {Distribution::kUniform, Distribution::kZipfian, Distribution::kHotspot}) {
    KeyChooser one(d, 1, 0.99);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(one.Next(rng), 0u);
    KeyChooser three(d, 3, 0.99);
    std::set<uint64_t> seen;
    for (int i = 0; i < 1000; ++i) seen.insert(three.Next(rng));
    EXPECT_EQ(seen.size(), 3u);
  }
}

}  // namespace
}  // namespace isowatch::workload
