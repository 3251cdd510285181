// SPDX-License-Identifier: Apache-2.0
#include "collectors/common/lag_samples.h"

#include <algorithm>

namespace isowatch::collectors {

LagSummary LagSamples::Summarize() const {
  LagSummary s;
  s.count = samples_.size();
  if (samples_.empty()) return s;
  std::vector<double> sorted = samples_;
  std::sort(sorted.begin(), sorted.end());
  s.p50 = sorted[sorted.size() / 2];
  s.p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
  s.max = sorted.back();
  return s;
}

}  // namespace isowatch::collectors
