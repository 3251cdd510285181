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
  // Bytes held, for accounting.
  size_t MemoryUsage() const;

 private:
  static constexpr size_t kBlockSize = 1 << 20;

  std::string_view Store(std::string_view s);

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = kBlockSize;
  size_t block_capacity_ = 0;
  std::vector<std::string_view> views_;
  absl::flat_hash_map<std::string_view, uint32_t> index_;
};

}  // namespace isowatch::history
