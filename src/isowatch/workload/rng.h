// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <limits>
#include <random>

namespace isowatch::workload {

// The simulator's source of randomness: a seeded 64-bit Mersenne Twister (whose output sequence
// the C++ standard fixes) and mappings to ranges written out here rather than taken from
// <random>'s distributions, whose results differ between standard libraries. So a seed gives the
// same history with any compiler. Thread-compatible.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t Next() { return engine_(); }

  // Uniform in [0, n). REQUIRES: n > 0.
  uint64_t Uniform(uint64_t n) {
    // Reject the top partial block so that every residue is equally likely.
    const uint64_t limit =
        std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
    uint64_t x = Next();
    while (x >= limit) x = Next();
    return x % n;
  }

  // Uniform in [0, 1), 53 random bits.
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // True with probability p.
  bool Bernoulli(double p) { return UniformDouble() < p; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace isowatch::workload
