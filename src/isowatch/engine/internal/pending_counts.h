// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>

#include "isowatch/common/check.h"
#include "isowatch/engine/internal/front_window.h"

namespace isowatch::engine::internal {

// How many pending reads each transaction has, over a window of transaction indexes from the
// lowest one with any: the window spans the transactions delivered while the oldest pending
// read waits for finality, not the history.
//
// Invariants:
//  1. counts_[i] is the number of pending reads of transaction base_ + i; counts_[0] > 0 unless
//     the window is empty.
//  2. transactions_ is the number of non-zero counts.
//
// Thread-compatible.
class PendingCounts {
 public:
  void Add(uint64_t txn) {
    if (counts_.empty()) {
      counts_.clear();
      base_ = txn;
    } else if (txn < base_) {  // rare: a transaction with a lower index than any pending
      counts_.insert_front(base_ - txn, 0);
      base_ = txn;
    }
    const size_t i = txn - base_;
    if (i >= counts_.size()) counts_.resize(i + 1);
    if (counts_[i]++ == 0) ++transactions_;
  }
  // REQUIRES: txn has a pending read.
  void Remove(uint64_t txn) {
    ISOWATCH_DCHECK(Has(txn), "a pending read is removed from a transaction without one");
    if (--counts_[txn - base_] == 0) --transactions_;
    size_t zeros = 0;
    while (zeros < counts_.size() && counts_[zeros] == 0) ++zeros;
    counts_.drop_front(zeros);
    base_ += zeros;
  }
  bool Has(uint64_t txn) const { return Count(txn) > 0; }
  uint32_t Count(uint64_t txn) const {
    return txn >= base_ && txn - base_ < counts_.size() ? counts_[txn - base_] : 0;
  }
  size_t transactions() const { return transactions_; }
  size_t window() const { return counts_.size(); }

  // Checks invariants 1 and 2 (O(window)).
  void CheckInvariants() const {
    ISOWATCH_CHECK(counts_.empty() || counts_[0] > 0, "the pending-count window starts at zero");
    size_t nonzero = 0;
    for (size_t i = 0; i < counts_.size(); ++i) nonzero += counts_[i] > 0 ? 1 : 0;
    ISOWATCH_CHECK(nonzero == transactions_, "pending-count transactions out of step");
  }

 private:
  FrontWindow<uint32_t> counts_;  // counts_[i]: transaction base_ + i
  uint64_t base_ = 0;
  size_t transactions_ = 0;
};

}  // namespace isowatch::engine::internal
