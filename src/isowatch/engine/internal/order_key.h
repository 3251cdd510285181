// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "isowatch/history/timestamp.h"

namespace isowatch::engine::internal {

// A position in the replay order Chronos uses (docs/checkers/chronos.md): timestamp, then phase
// (0 = commit, 1 = a transaction whose start equals its commit, 2 = start), then transaction
// index. Under SER every position is a commit (phase 0). Version v is visible to a read at point
// p iff v.key < p.
//
// `txn` comes before `phase` in memory so that (phase, txn) reads as one 64-bit number.
struct OrderKey {
  history::Timestamp ts;
  uint32_t txn = 0;
  uint32_t phase = 0;

  OrderKey() = default;
  constexpr OrderKey(history::Timestamp t, uint32_t ph, uint32_t tx) : ts(t), txn(tx), phase(ph) {}

  // (phase, txn) as one number in the same order.
  constexpr uint64_t tie() const { return (uint64_t{phase} << 32) | txn; }

  [[gnu::always_inline]] friend constexpr bool operator<(const OrderKey& a, const OrderKey& b) {
    if (a.ts.physical != b.ts.physical) return a.ts.physical < b.ts.physical;
    if (a.ts.logical != b.ts.logical) return a.ts.logical < b.ts.logical;
    return a.tie() < b.tie();
  }
  friend constexpr bool operator>(const OrderKey& a, const OrderKey& b) { return b < a; }
  [[gnu::always_inline]] friend constexpr bool operator<=(const OrderKey& a, const OrderKey& b) {
    return !(b < a);
  }
  friend constexpr bool operator>=(const OrderKey& a, const OrderKey& b) { return !(a < b); }
  friend constexpr bool operator==(const OrderKey& a, const OrderKey& b) {
    return a.ts == b.ts && a.tie() == b.tie();
  }
};
static_assert(sizeof(OrderKey) == 24);

}  // namespace isowatch::engine::internal
