// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "isowatch/workload/rng.h"

namespace isowatch::workload {

// How a workload picks its keys (KeyChooser).
enum class Distribution { kUniform, kZipfian, kHotspot };

// Draws keys 0..n-1 from a distribution. Key 0 is the hottest:
//  - kUniform: every key equally likely;
//  - kZipfian: P(key i) proportional to 1 / (i + 1)^theta, sampled exactly with Vose's alias
//    method (O(n) memory and set-up, O(1) per draw);
//  - kHotspot: 80% of draws fall uniformly on the first 20% of the keys (at least one key), the
//    rest uniformly on the others.
// Immutable after construction; thread-compatible (the Rng is the caller's).
class KeyChooser {
 public:
  // REQUIRES: n >= 1; theta > 0 for kZipfian.
  KeyChooser(Distribution dist, uint64_t n, double theta);

  uint64_t Next(Rng& rng) const;

  uint64_t size() const { return n_; }
  // Keys 0..hot_keys()-1 form the hot set of kHotspot.
  uint64_t hot_keys() const { return hot_; }

 private:
  static constexpr double kHotFraction = 0.2;
  static constexpr double kHotProbability = 0.8;

  Distribution dist_;
  uint64_t n_;
  uint64_t hot_ = 0;
  // kZipfian, the alias table: draw a column i uniformly, then keep i with probability
  // keep / 2^32, else take alias. One 8-byte entry, so a draw touches one cache line.
  struct Column {
    uint32_t keep = 0;
    uint32_t alias = 0;
  };
  std::vector<Column> table_;
};

}  // namespace isowatch::workload
