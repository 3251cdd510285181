// SPDX-License-Identifier: Apache-2.0
#include "isowatch/workload/session_plan.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace isowatch::workload {

std::vector<PlannedOp> PlanTxn(Rng& rng, const KeyChooser& keys, uint32_t ops, double read_ratio) {
  std::vector<PlannedOp> plan(std::max<uint32_t>(ops, 1));
  for (PlannedOp& op : plan) {
    op.read = rng.Bernoulli(read_ratio);
    op.key = keys.Next(rng);
  }
  return plan;
}

Pacer::Pacer(uint32_t sessions, double rate_tps)
    : interval_(rate_tps > 0 ? absl::Seconds(sessions / rate_tps) : absl::ZeroDuration()),
      next_(absl::Now()) {}

void Pacer::Wait() {
  if (interval_ <= absl::ZeroDuration()) return;
  next_ += interval_;
  const absl::Time now = absl::Now();
  if (next_ > now) {
    absl::SleepFor(next_ - now);
  } else {
    next_ = now;
  }
}

}  // namespace isowatch::workload
