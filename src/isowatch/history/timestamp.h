// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace isowatch::history {

// A point on the database's commit timeline, normalised at ingest. A 64-bit timestamp (TiDB TSO,
// YugabyteDB hybrid time, PostgreSQL LSN) is {physical, 0}; a hybrid clock is {physical, logical}.
// Ordered lexicographically. Visibility follows Chronos: a write committed at t is visible to a
// transaction that starts at t.
struct Timestamp {
  int64_t physical = 0;
  int64_t logical = 0;

  // Written out rather than defaulted: GCC keeps a defaulted operator<=> out of line, and the
  // engine compares timestamps on every step of its chains.
  [[gnu::always_inline]] friend constexpr bool operator==(const Timestamp& a, const Timestamp& b) {
    return a.physical == b.physical && a.logical == b.logical;
  }
  [[gnu::always_inline]] friend constexpr bool operator<(const Timestamp& a, const Timestamp& b) {
    return a.physical < b.physical || (a.physical == b.physical && a.logical < b.logical);
  }
  [[gnu::always_inline]] friend constexpr bool operator>(const Timestamp& a, const Timestamp& b) {
    return b < a;
  }
  [[gnu::always_inline]] friend constexpr bool operator<=(const Timestamp& a, const Timestamp& b) {
    return !(b < a);
  }
  [[gnu::always_inline]] friend constexpr bool operator>=(const Timestamp& a, const Timestamp& b) {
    return !(a < b);
  }
  [[gnu::always_inline]] friend constexpr std::strong_ordering operator<=>(const Timestamp& a,
                                                                           const Timestamp& b) {
    if (a.physical != b.physical) return a.physical <=> b.physical;
    return a.logical <=> b.logical;
  }

  static constexpr Timestamp Min() {
    return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min()};
  }
  static constexpr Timestamp Max() {
    return {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()};
  }

  // "p" for a plain 64-bit timestamp, "(p,l)" for a hybrid one.
  std::string ToString() const;

  template <typename H>
  friend H AbslHashValue(H h, const Timestamp& ts) {
    return H::combine(std::move(h), ts.physical, ts.logical);
  }
};

}  // namespace isowatch::history
