// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "isowatch/common/strong_id.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::engine::internal {

// A position in the replay order Chronos uses (docs/checkers/chronos.md): timestamp, then phase
// (0 = commit, 1 = a transaction whose start equals its commit, 2 = start), then transaction
// index. Under SER every position is a commit (phase 0). Version v is visible to a read at point
// p iff v.key < p.
//
// Phase and transaction are one 64-bit number in the same order, `tie`: the phase in the top two
// bits, the transaction in the other 62 (PackTaggedTxn).
struct OrderKey {
  static constexpr uint64_t kMaxTxn = kTxnIdLimit - 1;

  history::Timestamp ts;
  uint64_t tie = 0;

  OrderKey() = default;
  constexpr OrderKey(history::Timestamp t, uint32_t ph, uint64_t tx)
      : ts(t), tie(PackTaggedTxn(ph, tx)) {}
  // The last position at `t`, after every transaction of every phase.
  static constexpr OrderKey Last(history::Timestamp t) {
    OrderKey k;
    k.ts = t;
    k.tie = ~uint64_t{0};
    return k;
  }

  constexpr uint32_t phase() const { return TagOfPacked(tie); }
  constexpr uint64_t txn() const { return TxnOfPacked(tie); }

  [[gnu::always_inline]] friend constexpr bool operator<(const OrderKey& a, const OrderKey& b) {
    if (a.ts.physical != b.ts.physical) return a.ts.physical < b.ts.physical;
    if (a.ts.logical != b.ts.logical) return a.ts.logical < b.ts.logical;
    return a.tie < b.tie;
  }
  friend constexpr bool operator>(const OrderKey& a, const OrderKey& b) { return b < a; }
  [[gnu::always_inline]] friend constexpr bool operator<=(const OrderKey& a, const OrderKey& b) {
    return !(b < a);
  }
  friend constexpr bool operator>=(const OrderKey& a, const OrderKey& b) { return !(a < b); }
  friend constexpr bool operator==(const OrderKey& a, const OrderKey& b) {
    return a.ts == b.ts && a.tie == b.tie;
  }
};
static_assert(sizeof(OrderKey) == 24);

// The phases of an OrderKey.
inline constexpr uint32_t kCommitPhase = 0;
inline constexpr uint32_t kPointPhase = 1;
inline constexpr uint32_t kStartPhase = 2;

// Before the key of every version.
inline constexpr OrderKey kBeforeAll{history::Timestamp::Min(), 0, 0};

// The smallest key after `k`.
constexpr OrderKey After(const OrderKey& k) {
  OrderKey after = k;
  ++after.tie;
  return after;
}

// The greatest key before `k` (for scans that must include k itself).
constexpr OrderKey Before(const OrderKey& k) {
  if (k.tie == 0) return OrderKey::Last(history::Timestamp{k.ts.physical, k.ts.logical - 1});
  OrderKey before = k;
  --before.tie;  // from (phase, 0) to (phase - 1, the greatest transaction)
  return before;
}

}  // namespace isowatch::engine::internal
