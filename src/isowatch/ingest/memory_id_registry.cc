// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/memory_id_registry.h"

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/string_view.h"

namespace isowatch::ingest {

namespace {

absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// True if `s` is an int64 in canonical decimal: what TxnIdString writes for id_int.
bool CanonicalInt(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  const std::string_view digits = s[0] == '-' ? s.substr(1) : s;
  if (digits.empty() || (digits[0] == '0' && (digits.size() > 1 || s[0] == '-'))) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

const uint64_t* MemoryIdRegistry::Find(const Ids& ids, std::string_view txn_id) {
  int64_t number = 0;
  if (CanonicalInt(txn_id, &number)) {
    auto it = ids.ints.find(number);
    return it == ids.ints.end() ? nullptr : &it->second;
  }
  auto it = ids.strings.find(ToAbsl(txn_id));
  return it == ids.strings.end() ? nullptr : &it->second;
}

IdRegistry::Outcome MemoryIdRegistry::Check(std::string_view stream, std::string_view txn_id,
                                            uint64_t fingerprint) {
  absl::MutexLock lock(&mu_);
  auto ids = streams_.find(ToAbsl(stream));
  if (ids == streams_.end()) return Outcome::kNew;
  const uint64_t* recorded = Find(ids->second, txn_id);
  if (recorded == nullptr) return Outcome::kNew;
  return *recorded == fingerprint ? Outcome::kDuplicate : Outcome::kConflict;
}

void MemoryIdRegistry::Record(std::string_view stream, std::string_view txn_id,
                              uint64_t fingerprint) {
  absl::MutexLock lock(&mu_);
  auto ids = streams_.find(ToAbsl(stream));
  if (ids == streams_.end()) ids = streams_.try_emplace(std::string(stream)).first;
  int64_t number = 0;
  const bool inserted =
      CanonicalInt(txn_id, &number)
          ? ids->second.ints.try_emplace(number, fingerprint).second
          : ids->second.strings.try_emplace(std::string(txn_id), fingerprint).second;
  if (inserted) ++size_;
}

size_t MemoryIdRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

}  // namespace isowatch::ingest
