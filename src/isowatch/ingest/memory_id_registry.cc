// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/memory_id_registry.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <xxhash.h>

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

MemoryIdRegistry::Key MemoryIdRegistry::MakeKey(std::string_view txn_id) {
  Key key{.text = txn_id};
  key.is_int = CanonicalInt(txn_id, &key.number);
  return key;
}

const uint64_t* MemoryIdRegistry::Find(const Ids& ids, const Key& key) {
  if (key.is_int) {
    auto it = ids.ints.find(key.number);
    return it == ids.ints.end() ? nullptr : &it->second;
  }
  auto it = ids.strings.find(ToAbsl(key.text));
  return it == ids.strings.end() ? nullptr : &it->second;
}

const uint64_t* MemoryIdRegistry::Find(const Generations& g, const Key& key) {
  const uint64_t* recorded = Find(g.current, key);
  if (recorded == nullptr && g.previous.size() > 0) recorded = Find(g.previous, key);
  return recorded;
}

uint64_t MemoryIdRegistry::OwnerHash(int64_t number) {
  // Seed 1, so that the integer 7 and the text "7" (kept as the integer anyway) never meet.
  return XXH3_64bits_withSeed(&number, sizeof(number), 1);
}

uint64_t MemoryIdRegistry::OwnerHash(std::string_view text) {
  return XXH3_64bits(text.data(), text.size());
}

uint64_t MemoryIdRegistry::OwnerHash(const Key& key) {
  return key.is_int ? OwnerHash(key.number) : OwnerHash(key.text);
}

MemoryIdRegistry::Generations& MemoryIdRegistry::StreamOf(std::string_view stream) {
  auto it = streams_.find(ToAbsl(stream));
  if (it == streams_.end()) {
    it = streams_.try_emplace(std::string(stream)).first;
    it->second.index = static_cast<uint32_t>(names_.size());
    names_.emplace_back(stream);
  }
  return it->second;
}

void MemoryIdRegistry::Disown(const Ids& ids, uint32_t index) {
  auto drop = [&](uint64_t hash) {
    auto it = owners_.find(hash);
    if (it != owners_.end() && it->second == index) owners_.erase(it);
  };
  for (const auto& [id, fingerprint] : ids.ints) drop(OwnerHash(id));
  for (const auto& [id, fingerprint] : ids.strings) drop(OwnerHash(std::string_view(id)));
}

IdRegistry::Outcome MemoryIdRegistry::Check(std::string_view stream, std::string_view txn_id,
                                            uint64_t fingerprint) {
  const Key key = MakeKey(txn_id);
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(ToAbsl(stream));
  if (it == streams_.end()) return Outcome::kNew;
  const uint64_t* recorded = Find(it->second, key);
  if (recorded == nullptr) return Outcome::kNew;
  return *recorded == fingerprint ? Outcome::kDuplicate : Outcome::kConflict;
}

void MemoryIdRegistry::Record(std::string_view stream, std::string_view txn_id,
                              uint64_t fingerprint) {
  const Key key = MakeKey(txn_id);
  absl::MutexLock lock(&mu_);
  Generations& g = StreamOf(stream);
  // An id already remembered stays where it is (unbounded, `previous` is always empty).
  if (g.previous.size() > 0 && Find(g.previous, key) != nullptr) return;
  if (per_stream_ > 0 && g.current.size() >= per_stream_) {
    if (Find(g.current, key) != nullptr) return;
    size_ -= g.previous.size();
    Disown(g.previous, g.index);
    g.previous = std::move(g.current);
    g.current = Ids();
  }
  const bool inserted =
      key.is_int ? g.current.ints.try_emplace(key.number, fingerprint).second
                 : g.current.strings.try_emplace(std::string(txn_id), fingerprint).second;
  if (!inserted) return;
  ++size_;
  Own(OwnerHash(key), g.index);
}

std::optional<std::string> MemoryIdRegistry::OwnerOf(std::string_view stream,
                                                     std::string_view txn_id) {
  const Key key = MakeKey(txn_id);
  absl::MutexLock lock(&mu_);
  auto owner = owners_.find(OwnerHash(key));
  if (owner == owners_.end()) return std::nullopt;
  const std::string& name = names_[owner->second];
  if (name == stream) return std::nullopt;
  auto it = streams_.find(name);
  if (it == streams_.end() || Find(it->second, key) == nullptr) return std::nullopt;
  return name;
}

namespace {

template <typename Ids>
void SaveIds(const Ids& ids, v1::IdGeneration* out) {
  for (const auto& [id, fingerprint] : ids.ints) {
    out->add_ints(id);
    out->add_int_fingerprints(fingerprint);
  }
  for (const auto& [id, fingerprint] : ids.strings) {
    out->add_strings(id);
    out->add_string_fingerprints(fingerprint);
  }
}

}  // namespace

void MemoryIdRegistry::Save(v1::IdRegistryCheckpoint* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, g] : streams_) {
    v1::IdStream* s = out->add_streams();
    s->set_name(name);
    SaveIds(g.current, s->mutable_current());
    SaveIds(g.previous, s->mutable_previous());
  }
}

absl::Status MemoryIdRegistry::Restore(const v1::IdRegistryCheckpoint& checkpoint) {
  absl::flat_hash_map<std::string, Generations> streams;
  size_t size = 0;
  auto load = [&size](const v1::IdGeneration& in, Ids& ids) {
    if (in.ints_size() != in.int_fingerprints_size() ||
        in.strings_size() != in.string_fingerprints_size()) {
      return false;
    }
    for (int i = 0; i < in.ints_size(); ++i) {
      size += ids.ints.try_emplace(in.ints(i), in.int_fingerprints(i)).second ? 1 : 0;
    }
    for (int i = 0; i < in.strings_size(); ++i) {
      size += ids.strings.try_emplace(in.strings(i), in.string_fingerprints(i)).second ? 1 : 0;
    }
    return true;
  };
  for (const v1::IdStream& s : checkpoint.streams()) {
    Generations& g = streams[s.name()];
    if (!load(s.current(), g.current) || !load(s.previous(), g.previous)) {
      return absl::InvalidArgumentError(
          "id registry checkpoint: ids and fingerprints do not match in number");
    }
  }
  absl::MutexLock lock(&mu_);
  streams_ = std::move(streams);
  size_ = size;
  // Indices and owners afresh, in name order so that a restore is deterministic.
  names_.clear();
  owners_.clear();
  for (const v1::IdStream& s : checkpoint.streams()) names_.push_back(s.name());
  std::sort(names_.begin(), names_.end());
  names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
  for (size_t i = 0; i < names_.size(); ++i) {
    Generations& g = streams_.find(names_[i])->second;
    g.index = static_cast<uint32_t>(i);
    for (const Ids* ids : {&g.previous, &g.current}) {
      for (const auto& [id, fingerprint] : ids->ints) Own(OwnerHash(id), g.index);
      for (const auto& [id, fingerprint] : ids->strings) {
        Own(OwnerHash(std::string_view(id)), g.index);
      }
    }
  }
  return absl::OkStatus();
}

size_t MemoryIdRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

}  // namespace isowatch::ingest
