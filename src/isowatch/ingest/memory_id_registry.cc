// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/memory_id_registry.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/string_view.h"

namespace isowatch::ingest {

namespace {

absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

IdRegistry::Outcome MemoryIdRegistry::Check(std::string_view stream, std::string_view txn_id,
                                            uint64_t fingerprint) {
  absl::MutexLock lock(&mu_);
  auto ids = streams_.find(ToAbsl(stream));
  if (ids == streams_.end()) return Outcome::kNew;
  auto it = ids->second.find(ToAbsl(txn_id));
  if (it == ids->second.end()) return Outcome::kNew;
  return it->second == fingerprint ? Outcome::kDuplicate : Outcome::kConflict;
}

void MemoryIdRegistry::Record(std::string_view stream, std::string_view txn_id,
                              uint64_t fingerprint) {
  absl::MutexLock lock(&mu_);
  auto ids = streams_.find(ToAbsl(stream));
  if (ids == streams_.end()) ids = streams_.try_emplace(std::string(stream)).first;
  if (ids->second.try_emplace(std::string(txn_id), fingerprint).second) ++size_;
}

size_t MemoryIdRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

}  // namespace isowatch::ingest
