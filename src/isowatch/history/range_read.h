// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <utility>

#include "isowatch/common/strong_id.h"
#include "isowatch/history/value.h"

namespace isowatch::history {

// One end of a key range: a key, or no bound at all.
struct KeyBound {
  bool unbounded = true;
  KeyId key;  // valid iff !unbounded

  static KeyBound Unbounded() { return KeyBound{}; }
  static KeyBound At(KeyId key) { return KeyBound{.unbounded = false, .key = key}; }
  bool operator==(const KeyBound&) const = default;
};

// A key and the value a range read returned for it.
struct KeyValue {
  KeyId key;
  Value value;
  bool operator==(const KeyValue&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, const KeyValue& kv) {
    return H::combine(std::move(h), kv.key, kv.value);
  }
};

// A read of every key in [low, high] (both ends inclusive, as ViperBench and Viper take them) and
// the records it returned: the live ones, and the tombstoned ones (records a delete marked dead,
// which the collector hides from the application but logs, docs/history-format.md "ViperBench").
// A key of the range that is in neither list was absent. Plain data owned by its History; the
// pairs live in the History's pool (History::range_live, History::range_dead).
//
// Range reads are kept beside a transaction's operations, not among them, so that code that walks
// History::ops (every op has one key and one value) never meets one.
//
// Invariants (established by HistoryBuilder):
//  1. `position` <= the transaction's ops_count: the range read came after that many of its
//     operations in program order. A transaction's range reads are in program order (positions
//     never decrease).
//  2. Every key in a bound or a pair is a register key of the history.
struct RangeRead {
  uint32_t position = 0;
  KeyBound low;
  KeyBound high;
  uint64_t pairs_begin = 0;  // index of the first live pair in the History's pool
  uint32_t live_count = 0;   // live pairs, then dead pairs, in the order the source gave them
  uint32_t dead_count = 0;
};

}  // namespace isowatch::history
