// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace isowatch::history {

// Interns byte strings: equal contents get equal indices, distinct contents distinct ones (decided
// by comparing bytes, never by a hash alone). Storage is stable: views returned stay valid for the
// pool's lifetime, across moves. Thread-compatible.
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
  // Returns the index of `s`, or -1 if it was never interned.
  int64_t Find(std::string_view s) const;
  // REQUIRES: index < size().
  std::string_view Get(uint32_t index) const { return views_[index]; }
  size_t size() const { return views_.size(); }
  // Makes room for `n` strings in all.
  void Reserve(size_t n) { views_.reserve(n); }
  // Bytes held, for accounting.
  size_t MemoryUsage() const;

 private:
  static constexpr size_t kBlockSize = 1 << 20;

  std::string_view Store(std::string_view s);
  // The value of `s` if it is a canonical decimal below 10^18, else -1.
  static int64_t SmallDecimal(std::string_view s);
  // Extends dense_ to cover `value` if that keeps it dense enough; false if it does not.
  bool GrowDense(int64_t value);

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = kBlockSize;
  size_t block_capacity_ = 0;
  std::vector<std::string_view> views_;
  absl::flat_hash_map<std::string_view, uint32_t> index_;
  // dense_[v]: 1 + the index of the decimal spelling of v, or 0. Covers [0, dense_.size()); the
  // strings it covers are never in index_.
  std::vector<uint32_t> dense_;
  // Strings in index_ that SmallDecimal accepts (they must move when dense_ grows over them).
  size_t hashed_decimals_ = 0;
};

}  // namespace isowatch::history
