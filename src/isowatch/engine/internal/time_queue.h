// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "isowatch/history/timestamp.h"

namespace isowatch::engine::internal {

// A queue of (timestamp, key) entries, a key being any 64-bit number, from which every entry at or
// below a bound is taken at once: the engine's schedule of keys whose pending reads (finality) or
// old versions (collection) wait for a point to be passed.
//
// Entries above the highest bound passed so far (`last`) live in a radix heap over the 128-bit
// timestamp: bucket b holds the entries whose highest bit differing from `last` is bit b - 1.
// Passing a new bound B > last takes every bucket below the one B itself falls in, splits B's
// bucket (each entry is either taken or moves to a lower bucket) and leaves the buckets above
// untouched. A push is O(1); an entry is moved at most once per bit of its distance from `last`
// at its push, and in practice once or twice, because a bound lands in its bucket only every
// so often. Entries pushed at or below `last` (possible only when bounds go down) wait in a
// binary min-heap instead; TakeUpTo takes from both, so it returns exactly the entries at or
// below the bound, for any sequence of bounds.
//
// The order in which one TakeUpTo hands out its entries is deterministic but not sorted.
// Thread-compatible.
class TimeQueue {
 public:
  TimeQueue() = default;

  [[gnu::always_inline]] void Push(const history::Timestamp& ts, uint64_t key) {
    const Wide x = Widen(ts);
    if (!(last_ < x)) {
      below_.push(Low{x, key});
      return;
    }
    const int b = BucketOf(x);
    buckets_[b].push_back(Entry{x, key});
    nonempty_[b >> 6] |= uint64_t{1} << (b & 63);
    ++size_;
  }

  // Removes every entry with timestamp <= bound and calls take(key) for each, then raises the
  // radix heap's base to `bound` if it is higher.
  template <typename Take>
  void TakeUpTo(const history::Timestamp& bound, Take&& take) {
    const Wide limit = Widen(bound);
    while (!below_.empty() && !(limit < below_.top().ts)) {
      const uint64_t key = below_.top().key;
      below_.pop();
      take(key);
    }
    if (!(last_ < limit)) return;
    const int d = BucketOf(limit);
    // Every entry of a bucket below d lies below the bound.
    for (int word = 0; word <= (d >> 6); ++word) {
      uint64_t bits = nonempty_[word];
      if (word == (d >> 6)) bits &= (uint64_t{1} << (d & 63)) - 1;
      while (bits != 0) {
        const int b = word * 64 + std::countr_zero(bits);
        bits &= bits - 1;
        std::vector<Entry>& bucket = buckets_[b];
        size_ -= bucket.size();
        for (const Entry& e : bucket) take(e.key);
        bucket.clear();
        nonempty_[word] &= ~(uint64_t{1} << (b & 63));
      }
    }
    // Bucket d: taken, or moved below relative to the new base.
    std::vector<Entry>& split = buckets_[d];
    if (!split.empty()) {
      nonempty_[d >> 6] &= ~(uint64_t{1} << (d & 63));
      last_ = limit;
      size_ -= split.size();
      for (const Entry& e : split) {
        if (!(limit < e.ts)) {
          take(e.key);
          continue;
        }
        const int b = BucketOf(e.ts);  // < d
        buckets_[b].push_back(e);
        nonempty_[b >> 6] |= uint64_t{1} << (b & 63);
        ++size_;
      }
      split.clear();
    }
    last_ = limit;
  }

  size_t size() const { return size_ + below_.size(); }
  bool empty() const { return size() == 0; }

 private:
  // A timestamp as an unsigned 128-bit number in the same order.
  struct Wide {
    uint64_t hi = 0;
    uint64_t lo = 0;
    bool operator<(const Wide& o) const { return hi < o.hi || (hi == o.hi && lo < o.lo); }
  };
  struct Entry {
    Wide ts;
    uint64_t key = 0;  // a KeyId or a TxnId: in the padding a 32-bit one would leave
  };
  struct Low {
    Wide ts;
    uint64_t key = 0;
    bool operator>(const Low& o) const { return o.ts < ts; }
  };

  static Wide Widen(const history::Timestamp& ts) {
    constexpr uint64_t kSign = uint64_t{1} << 63;
    return Wide{static_cast<uint64_t>(ts.physical) ^ kSign,
                static_cast<uint64_t>(ts.logical) ^ kSign};
  }

  // 1 + the highest bit in which x differs from last_ (x != last_): 1..128.
  int BucketOf(const Wide& x) const {
    const uint64_t hi = x.hi ^ last_.hi;
    if (hi != 0) return 128 - std::countl_zero(hi);
    return 64 - std::countl_zero(x.lo ^ last_.lo);
  }

  Wide last_;  // Timestamp::Min(): every real timestamp is above it
  std::array<std::vector<Entry>, 129> buckets_;
  std::array<uint64_t, 3> nonempty_{};  // bit b: buckets_[b] is not empty
  size_t size_ = 0;                     // entries in buckets_
  std::priority_queue<Low, std::vector<Low>, std::greater<Low>> below_;
};

}  // namespace isowatch::engine::internal
