// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/string_pool.h"

#include <algorithm>
#include <cstring>

namespace isowatch::history {

std::string_view StringPool::Store(std::string_view s) {
  if (s.empty()) return std::string_view();
  if (s.size() > block_capacity_ - std::min(block_used_, block_capacity_)) {
    size_t size = std::max(kBlockSize, s.size());
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    block_bytes_ += size;
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
  // At most about four slots per string (held, or reserved for), so that the table never
  // outweighs the strings' views.
  const size_t limit = 4 * (std::max(views_.size(), reserved_) + 1) + 1024;
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

void StringPool::Place(std::string_view s, int64_t decimal, uint32_t index) {
  const std::string_view stored = Store(s);
  if (index == views_.size()) {
    views_.push_back(stored);
  } else {
    views_[index] = stored;
  }
  Index(stored, decimal, index);
}

void StringPool::Index(std::string_view stored, int64_t decimal, uint32_t index) {
  if (decimal >= 0 && (static_cast<uint64_t>(decimal) < dense_.size() || GrowDense(decimal))) {
    dense_[static_cast<size_t>(decimal)] = index + 1;
    return;
  }
  index_.emplace(stored, index);
  if (decimal >= 0) ++hashed_decimals_;
}

uint32_t StringPool::Add(std::string_view s) {
  const auto index = static_cast<uint32_t>(views_.size());
  views_.push_back(Store(s));
  return index;
}

void StringPool::IndexAdded() {
  index_.reserve(index_.size() + (views_.size() - indexed_));
  for (size_t i = indexed_; i < views_.size(); ++i) {
    Index(views_[i], SmallDecimal(views_[i]), static_cast<uint32_t>(i));
  }
  indexed_ = views_.size();
}

std::pair<uint32_t, bool> StringPool::Intern(std::string_view s) {
  if (indexed_ < views_.size()) IndexAdded();
  const int64_t decimal = SmallDecimal(s);
  if (decimal >= 0 && static_cast<uint64_t>(decimal) < dense_.size()) {
    if (const uint32_t slot = dense_[static_cast<size_t>(decimal)]; slot != 0) {
      return {slot - 1, false};
    }
  } else if (auto it = index_.find(s); it != index_.end()) {
    return {it->second, false};
  }
  uint32_t index = static_cast<uint32_t>(views_.size());
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  }
  Place(s, decimal, index);
  indexed_ = views_.size();
  return {index, true};
}

size_t StringPool::Retain(std::span<const uint64_t> keep) {
  auto kept = [&](size_t i) { return i / 64 < keep.size() && ((keep[i / 64] >> (i % 64)) & 1); };
  size_t bytes = 0;
  size_t strings = 0;
  for (size_t i = 0; i < views_.size(); ++i) {
    if (kept(i) && !forgotten(static_cast<uint32_t>(i))) {
      bytes += views_[i].size();
      ++strings;
    }
  }
  std::vector<std::unique_ptr<char[]>> old_blocks = std::move(blocks_);
  blocks_.clear();
  block_bytes_ = 0;
  block_used_ = kBlockSize;
  block_capacity_ = 0;
  if (bytes > 0) {
    // One block for everything kept, so that the next strings start a block of their own.
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(bytes));
    block_bytes_ = bytes;
    block_capacity_ = bytes;
    block_used_ = 0;
  }
  index_.clear();
  index_.reserve(strings);  // at most: small decimals go to dense_
  std::fill(dense_.begin(), dense_.end(), 0);
  hashed_decimals_ = 0;
  free_.clear();
  size_t dropped = 0;
  // Highest first, so that Intern hands the lowest forgotten index out first.
  for (size_t i = views_.size(); i-- > 0;) {
    const auto index = static_cast<uint32_t>(i);
    if (forgotten(index) || !kept(i)) {
      if (!forgotten(index)) ++dropped;
      // An empty view into kHole, not an empty string: its data pointer marks the hole.
      views_[i] = std::string_view(&kHole, 0);  // NOLINT(bugprone-string-constructor)
      free_.push_back(index);
      continue;
    }
    const std::string_view s = views_[i];
    Place(s, SmallDecimal(s), index);
  }
  indexed_ = views_.size();
  return dropped;
}

bool StringPool::Restore(std::span<const std::string_view> strings,
                         std::span<const uint32_t> forgotten) {
  std::vector<uint8_t> hole(strings.size(), 0);
  for (uint32_t i : forgotten) {
    if (i >= strings.size() || hole[i] != 0) return false;
    hole[i] = 1;
  }
  views_.reserve(strings.size());
  for (size_t i = 0; i < strings.size(); ++i) {
    if (hole[i] != 0) {
      views_.emplace_back(&kHole, 0);
      continue;
    }
    if (Find(strings[i]) >= 0) {
      *this = StringPool();
      return false;
    }
    Place(strings[i], SmallDecimal(strings[i]), static_cast<uint32_t>(i));
  }
  free_.assign(forgotten.begin(), forgotten.end());
  indexed_ = views_.size();
  return true;
}

int64_t StringPool::Find(std::string_view s) const {
  const int64_t decimal = SmallDecimal(s);
  int64_t found = -1;
  if (decimal >= 0 && static_cast<uint64_t>(decimal) < dense_.size()) {
    found = static_cast<int64_t>(dense_[static_cast<size_t>(decimal)]) - 1;
  } else if (auto it = index_.find(s); it != index_.end()) {
    found = static_cast<int64_t>(it->second);
  }
  for (size_t i = indexed_; found < 0 && i < views_.size(); ++i) {
    if (views_[i] == s) found = static_cast<int64_t>(i);
  }
  return found;
}

size_t StringPool::MemoryUsage() const {
  return block_bytes_ + views_.capacity() * sizeof(std::string_view) +
         free_.capacity() * sizeof(uint32_t) +
         index_.capacity() * (sizeof(std::string_view) + sizeof(uint32_t) + 1) +
         dense_.capacity() * sizeof(uint32_t);
}

}  // namespace isowatch::history
