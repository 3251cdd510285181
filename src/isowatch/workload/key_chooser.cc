// SPDX-License-Identifier: Apache-2.0
#include "isowatch/workload/key_chooser.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace isowatch::workload {

KeyChooser::KeyChooser(Distribution dist, uint64_t n, double theta) : dist_(dist), n_(n) {
  switch (dist_) {
    case Distribution::kUniform:
      break;
    case Distribution::kHotspot:
      hot_ = std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(n_) * kHotFraction));
      break;
    case Distribution::kZipfian: {
      // Vose's alias method over the weights 1 / (i + 1)^theta.
      std::vector<double> scaled(n_);
      double sum = 0;
      for (uint64_t i = 0; i < n_; ++i) {
        scaled[i] = 1.0 / std::pow(static_cast<double>(i + 1), theta);
        sum += scaled[i];
      }
      std::vector<uint32_t> small;
      std::vector<uint32_t> large;
      for (uint64_t i = 0; i < n_; ++i) {
        scaled[i] *= static_cast<double>(n_) / sum;  // mean 1
        (scaled[i] < 1.0 ? small : large).push_back(static_cast<uint32_t>(i));
      }
      std::vector<double> keep(n_, 1.0);
      std::vector<uint32_t> alias(n_);
      for (uint64_t i = 0; i < n_; ++i) alias[i] = static_cast<uint32_t>(i);
      while (!small.empty() && !large.empty()) {
        const uint32_t s = small.back();
        small.pop_back();
        const uint32_t l = large.back();
        keep[s] = scaled[s];
        alias[s] = l;
        scaled[l] -= 1.0 - scaled[s];
        if (scaled[l] < 1.0) {
          large.pop_back();
          small.push_back(l);
        }
      }
      // Whatever is left has weight 1 up to rounding: it keeps its column.
      table_.resize(n_);
      for (uint64_t i = 0; i < n_; ++i) {
        const double scaled_keep = std::ldexp(keep[i], 32);
        table_[i].keep =
            scaled_keep >= 4294967295.0 ? UINT32_MAX : static_cast<uint32_t>(scaled_keep);
        table_[i].alias = alias[i];
      }
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
      const uint64_t i = rng.Uniform(n_);
      const Column& c = table_[i];
      // keep == UINT32_MAX stands for probability 1.
      return c.keep == UINT32_MAX || (rng.Next() >> 32) < c.keep ? i : c.alias;
    }
  }
  return 0;
}

}  // namespace isowatch::workload
