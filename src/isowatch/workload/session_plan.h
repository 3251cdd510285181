// SPDX-License-Identifier: Apache-2.0
#pragma once

// What a client session of the collectors' workloads does next: the operations of its next
// transaction, and when that transaction may start.

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

#include "isowatch/workload/key_chooser.h"
#include "isowatch/workload/rng.h"

namespace isowatch::workload {

struct PlannedOp {
  bool read = false;  // else a write (or an append)
  uint64_t key = 0;
};

// `ops` operations (at least one), each a read with probability `read_ratio`, on keys `keys`
// draws.
std::vector<PlannedOp> PlanTxn(Rng& rng, const KeyChooser& keys, uint32_t ops, double read_ratio);

// Paces one of `sessions` sessions that share `rate_tps` transactions per second (0: as fast as
// they go). Thread-compatible: one per session.
class Pacer {
 public:
  Pacer(uint32_t sessions, double rate_tps);

  // Returns when the session's next transaction may start. A session that fell behind starts at
  // once and does not catch up in a burst.
  void Wait();

 private:
  absl::Duration interval_;
  absl::Time next_;
};

}  // namespace isowatch::workload
