// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace isowatch::history {

// Interns byte strings: equal contents get equal indices, distinct contents distinct ones (decided
// by comparing bytes, never by a hash alone). Storage is stable: views returned stay valid across
// moves, until the next Retain. Thread-compatible.
//
// A pool that lives as long as a stream forgets, with Retain, the strings nothing refers to any
// more: their indices are handed out again by Intern (the most recently forgotten first), and
// their bytes are reclaimed.
//
// Strings that spell small non-negative integers in canonical decimal ("0", "17", not "017") are
// looked up in a direct-mapped table rather than hashed while their values stay dense (such as
// transaction ids numbered from 0 or 1); other strings go to a hash table.
class StringPool {
 public:
  StringPool() = default;
  StringPool(StringPool&&) = default;
  StringPool& operator=(StringPool&&) = default;
  StringPool(const StringPool&) = delete;
  StringPool& operator=(const StringPool&) = delete;

  // Returns the index of `s`, and whether it was added by this call.
  std::pair<uint32_t, bool> Intern(std::string_view s);
  // Holds `s` at the next index, which it returns, without looking it up or indexing it, for a
  // caller that knows `s` is not held (such as an id it numbers itself). Strings held so are
  // indexed by the next Intern, Retain or Restore; until then Find looks for them one by one.
  // REQUIRES: `s` is not held.
  uint32_t Add(std::string_view s);
  // Returns the index of `s`, or -1 if it is not held (never interned, or forgotten). O(1), but
  // for the strings held by Add since the last Intern, which it compares one by one.
  int64_t Find(std::string_view s) const;
  // REQUIRES: index < size(). A forgotten index reads as the empty string.
  std::string_view Get(uint32_t index) const { return views_[index]; }
  // Indices handed out: [0, size()), forgotten ones included.
  size_t size() const { return views_.size(); }
  // Strings held: size() less the forgotten indices not handed out again.
  size_t live() const { return views_.size() - free_.size(); }
  // Whether `index` was forgotten and not handed out again. REQUIRES: index < size().
  bool forgotten(uint32_t index) const { return views_[index].data() == &kHole; }
  // The forgotten indices, in the order Intern hands them out again (last first).
  std::span<const uint32_t> forgotten_indices() const { return free_; }
  // Makes room for `n` strings in all, and lets the direct-mapped table cover decimals up to
  // about 4n from the start (else, while few strings are held, the decimals of a reader that
  // meets them out of order go to the hash table, to be moved as the table grows over them).
  void Reserve(size_t n) {
    views_.reserve(n);
    reserved_ = std::max(reserved_, n);
  }
  // Bytes held, for accounting.
  size_t MemoryUsage() const;

  // Forgets every string whose index `keep` does not mark (bit i % 64 of keep[i / 64]; indices
  // past its end are not marked) and moves the kept ones to new storage, so that every view Get
  // returned before is invalid. The kept strings keep their indices. Returns how many were
  // forgotten by this call. O(size() + bytes kept).
  size_t Retain(std::span<const uint64_t> keep);

  // Makes an empty pool hold `strings[i]` at index i, but for the indices of `forgotten`, which
  // are forgotten (their strings are ignored) and handed out again in the order Intern would
  // (forgotten_indices()). False, leaving the pool empty, if a string held repeats another, or
  // a forgotten index is out of range or repeats. REQUIRES: size() == 0.
  bool Restore(std::span<const std::string_view> strings, std::span<const uint32_t> forgotten);

 private:
  static constexpr size_t kBlockSize = 1 << 20;
  // Where a forgotten index's view points (with size 0), unlike any stored string.
  static constexpr char kHole = 0;

  std::string_view Store(std::string_view s);
  // Interns `s`, known not to be held, at `index` (views_.size() to append).
  void Place(std::string_view s, int64_t decimal, uint32_t index);
  // Indexes `stored`, held at `index`, through dense_ or index_.
  void Index(std::string_view stored, int64_t decimal, uint32_t index);
  // Indexes the strings held by Add, views_[indexed_, size()).
  void IndexAdded();
  // The value of `s` if it is a canonical decimal below 10^18, else -1.
  static int64_t SmallDecimal(std::string_view s);
  // Extends dense_ to cover `value` if that keeps it dense enough; false if it does not.
  bool GrowDense(int64_t value);

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_bytes_ = 0;  // allocated in blocks_
  size_t block_used_ = kBlockSize;
  size_t block_capacity_ = 0;
  std::vector<uint32_t> free_;  // forgotten indices, handed out again from the back
  std::vector<std::string_view> views_;
  absl::flat_hash_map<std::string_view, uint32_t> index_;
  // dense_[v]: 1 + the index of the decimal spelling of v, or 0. Covers [0, dense_.size()); the
  // strings it covers are never in index_.
  std::vector<uint32_t> dense_;
  // Strings in index_ that SmallDecimal accepts (they must move when dense_ grows over them).
  size_t hashed_decimals_ = 0;
  size_t reserved_ = 0;  // Reserve's largest `n`
  size_t indexed_ = 0;   // views_ from here on were held by Add and are not indexed
};

}  // namespace isowatch::history
