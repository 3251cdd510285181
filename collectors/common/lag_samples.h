// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <vector>

namespace isowatch::collectors {

// Percentiles of a set of lags, in seconds (0 when there were none).
struct LagSummary {
  size_t count = 0;
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

// The lags of a collector's transactions, from their commit in the database to their being
// durable in isowatchd, in seconds. Keeps at most 2^24 samples (the later ones are not kept).
// Thread-compatible.
class LagSamples {
 public:
  void Add(double seconds) {
    if (samples_.size() < kMaxSamples) samples_.push_back(seconds);
  }
  // The median, 99th percentile and maximum of the samples kept.
  LagSummary Summarize() const;
  void Clear() { samples_.clear(); }
  bool empty() const { return samples_.empty(); }

 private:
  static constexpr size_t kMaxSamples = size_t{1} << 24;
  std::vector<double> samples_;
};

}  // namespace isowatch::collectors
