// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/string_pool.h"

#include <algorithm>
#include <cstring>

namespace isowatch::history {

std::string_view StringPool::Store(std::string_view s) {
  if (s.empty()) return std::string_view();
  if (s.size() > block_capacity_ - std::min(block_used_, block_capacity_)) {
    size_t size = std::max(kBlockSize, s.size());
    blocks_.push_back(std::make_unique<char[]>(size));
    block_capacity_ = size;
    block_used_ = 0;
  }
  char* dst = blocks_.back().get() + block_used_;
  std::memcpy(dst, s.data(), s.size());
  block_used_ += s.size();
  return std::string_view(dst, s.size());
}

int64_t StringPool::SmallDecimal(std::string_view s) {
  if (s.empty() || s.size() > 18 || (s[0] == '0' && s.size() > 1)) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

bool StringPool::GrowDense(int64_t value) {
  // At most about four slots per string, so that the table never outweighs the strings' views.
  const size_t limit = 4 * (views_.size() + 1) + 1024;
  const auto needed = static_cast<uint64_t>(value) + 1;
  if (needed > limit) return false;
  const size_t old_size = dense_.size();
  const size_t new_size = std::min(std::max<size_t>(needed, 2 * old_size), limit);
  dense_.resize(new_size, 0);
  if (hashed_decimals_ > 0) {
    // Move the hashed strings that the table covers now.
    for (auto it = index_.begin(); it != index_.end();) {
      const int64_t v = SmallDecimal(it->first);
      if (v >= 0 && static_cast<uint64_t>(v) < new_size) {
        dense_[static_cast<size_t>(v)] = it->second + 1;
        --hashed_decimals_;
        index_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  return true;
}

std::pair<uint32_t, bool> StringPool::Intern(std::string_view s) {
  const int64_t decimal = SmallDecimal(s);
  if (decimal >= 0 && (static_cast<uint64_t>(decimal) < dense_.size() || GrowDense(decimal))) {
    uint32_t& slot = dense_[static_cast<size_t>(decimal)];
    if (slot != 0) return {slot - 1, false};
    auto index = static_cast<uint32_t>(views_.size());
    views_.push_back(Store(s));
    slot = index + 1;
    return {index, true};
  }
  if (auto it = index_.find(s); it != index_.end()) return {it->second, false};
  std::string_view stored = Store(s);
  auto index = static_cast<uint32_t>(views_.size());
  views_.push_back(stored);
  index_.emplace(stored, index);
  if (decimal >= 0) ++hashed_decimals_;
  return {index, true};
}

int64_t StringPool::Find(std::string_view s) const {
  const int64_t decimal = SmallDecimal(s);
  if (decimal >= 0 && static_cast<uint64_t>(decimal) < dense_.size()) {
    return static_cast<int64_t>(dense_[static_cast<size_t>(decimal)]) - 1;
  }
  auto it = index_.find(s);
  return it == index_.end() ? -1 : static_cast<int64_t>(it->second);
}

size_t StringPool::MemoryUsage() const {
  return blocks_.size() * kBlockSize + views_.capacity() * sizeof(std::string_view) +
         index_.capacity() * (sizeof(std::string_view) + sizeof(uint32_t) + 1) +
         dense_.capacity() * sizeof(uint32_t);
}

}  // namespace isowatch::history
