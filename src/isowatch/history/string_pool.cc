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

std::pair<uint32_t, bool> StringPool::Intern(std::string_view s) {
  if (auto it = index_.find(s); it != index_.end()) return {it->second, false};
  std::string_view stored = Store(s);
  auto index = static_cast<uint32_t>(views_.size());
  views_.push_back(stored);
  index_.emplace(stored, index);
  return {index, true};
}

int64_t StringPool::Find(std::string_view s) const {
  auto it = index_.find(s);
  return it == index_.end() ? -1 : static_cast<int64_t>(it->second);
}

size_t StringPool::MemoryUsage() const {
  return blocks_.size() * kBlockSize + views_.capacity() * sizeof(std::string_view) +
         index_.capacity() * (sizeof(std::string_view) + sizeof(uint32_t) + 1);
}

}  // namespace isowatch::history
