// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <vector>

namespace isowatch::engine::internal {

// A vector whose front is dropped as it goes, for windows that slide forward (a session's
// positions, the pending-read counts by transaction).
//
// Invariants:
//  1. The elements are v_[first_, v_.size()); v_[0, first_) are dropped ones not reclaimed yet.
//  2. After drop_front, first_ < 64 or first_ * 2 < v_.size(): the dropped part is reclaimed once
//     it is the larger part, so a drop costs O(1) amortised per element.
//
// Thread-compatible. Owns its elements.
template <typename T>
class FrontWindow {
 public:
  bool empty() const { return size() == 0; }
  size_t size() const { return v_.size() - first_; }
  size_t capacity() const { return v_.capacity(); }
  T& operator[](size_t i) { return v_[first_ + i]; }
  const T& operator[](size_t i) const { return v_[first_ + i]; }
  void resize(size_t n) { v_.resize(first_ + n); }
  void clear() {
    v_.clear();
    first_ = 0;
  }
  // Puts n copies of `value` before the first element.
  void insert_front(size_t n, const T& value) {
    v_.insert(v_.begin() + static_cast<ptrdiff_t>(first_), n, value);
  }
  // REQUIRES: n <= size().
  void drop_front(size_t n) {
    first_ += n;
    if (first_ >= 64 && first_ * 2 >= v_.size()) {
      v_.erase(v_.begin(), v_.begin() + static_cast<ptrdiff_t>(first_));
      first_ = 0;
    }
  }

 private:
  std::vector<T> v_;
  size_t first_ = 0;
};

}  // namespace isowatch::engine::internal
