// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/memory_id_registry.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace isowatch::ingest {

std::string MemoryIdRegistry::Key(std::string_view stream, std::string_view txn_id) {
  return fmt::format("{}:{}{}", stream.size(), stream, txn_id);
}

IdRegistry::Outcome MemoryIdRegistry::Check(std::string_view stream, std::string_view txn_id,
                                            uint64_t fingerprint) {
  const std::string key = Key(stream, txn_id);
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(key);
  if (it == ids_.end()) return Outcome::kNew;
  return it->second == fingerprint ? Outcome::kDuplicate : Outcome::kConflict;
}

void MemoryIdRegistry::Record(std::string_view stream, std::string_view txn_id,
                              uint64_t fingerprint) {
  std::string key = Key(stream, txn_id);
  absl::MutexLock lock(&mu_);
  ids_.try_emplace(std::move(key), fingerprint);
}

size_t MemoryIdRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return ids_.size();
}

}  // namespace isowatch::ingest
