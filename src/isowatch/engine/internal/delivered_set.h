// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "isowatch/common/strong_id.h"

namespace isowatch::engine::internal {

// Which transactions have been delivered (duplicates are counted and ignored): a bit per
// transaction index from base() on. Indexes below base() were released by the history, so
// delivered.
//
// Invariants:
//  1. Every index below base() is delivered; end() = base() + the bits held.
//  2. base() only grows, and only up to the history's first held transaction (Grow).
//
// Thread-compatible.
class DeliveredSet {
 public:
  // Flags from `base` on (a history restored from a checkpoint may start billions in), `end`
  // excluded, none delivered.
  DeliveredSet(uint64_t base, uint64_t end) : bits_(end - base, false), base_(base) {}

  uint64_t base() const { return base_; }
  uint64_t end() const { return base_ + bits_.size(); }

  bool Contains(uint64_t txn) const { return txn < base_ || (txn < end() && bits_[txn - base_]); }
  // Marks `txn` delivered; false if it was already. REQUIRES: txn < end().
  bool Insert(uint64_t txn) {
    if (txn < base_ || bits_[txn - base_]) return false;
    bits_[txn - base_] = true;
    return true;
  }

  // Makes room up to `end` (the history's size), and drops the flags below `released` (the
  // history's first held transaction, every one below it delivered) once they are the larger
  // part. REQUIRES: end >= this->end().
  void Grow(uint64_t released, uint64_t end) {
    if (released > base_ && 2 * (released - base_) >= bits_.size()) {
      bits_.erase(bits_.begin(), bits_.begin() + static_cast<ptrdiff_t>(released - base_));
      base_ = released;
    }
    bits_.resize(end - base_, false);
  }

  // Restores a checkpoint's: every transaction of [base, end) delivered, until Remove.
  void Reset(uint64_t base, uint64_t end) {
    base_ = base;
    bits_.assign(end - base, true);
  }
  // REQUIRES: base() <= txn < end().
  void Remove(uint64_t txn) { bits_[txn - base_] = false; }

  // Calls f(txn) for every transaction of [base(), end()) not delivered.
  template <typename F>
  void ForEachMissing(F&& f) const {
    for (size_t i = 0; i < bits_.size(); ++i) {
      if (!bits_[i]) f(base_ + i);
    }
  }

  size_t MemoryBytes() const { return bits_.capacity() / 8; }

 private:
  std::vector<bool> bits_;
  uint64_t base_;
};

}  // namespace isowatch::engine::internal
