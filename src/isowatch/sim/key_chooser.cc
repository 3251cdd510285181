// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/key_chooser.h"

#include <algorithm>
#include <cmath>

namespace isowatch::sim {

KeyChooser::KeyChooser(Distribution dist, uint64_t n, double theta) : dist_(dist), n_(n) {
  switch (dist_) {
    case Distribution::kUniform:
      break;
    case Distribution::kHotspot:
      hot_ = std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(n_) * kHotFraction));
      break;
    case Distribution::kZipfian: {
      cdf_.resize(n_);
      double sum = 0;
      for (uint64_t i = 0; i < n_; ++i) {
        sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
        cdf_[i] = sum;
      }
      for (double& c : cdf_) c /= sum;
      cdf_.back() = 1.0;
      break;
    }
  }
}

uint64_t KeyChooser::Next(Rng& rng) const {
  switch (dist_) {
    case Distribution::kUniform:
      return rng.Uniform(n_);
    case Distribution::kHotspot:
      if (hot_ >= n_ || rng.Bernoulli(kHotProbability)) return rng.Uniform(hot_);
      return hot_ + rng.Uniform(n_ - hot_);
    case Distribution::kZipfian: {
      double u = rng.UniformDouble();
      auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
      if (it == cdf_.end()) --it;
      return static_cast<uint64_t>(it - cdf_.begin());
    }
  }
  return 0;
}

}  // namespace isowatch::sim
