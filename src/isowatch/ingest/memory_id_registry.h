// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/ingest/id_registry.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::ingest {

// An IdRegistry held in memory. Thread-safe.
//
// Unbounded (`per_stream` 0), every id recorded stays until the object is destroyed: memory grows
// with the number of distinct ids. Bounded, each stream keeps its ids in two generations of at
// most `per_stream` ids: Record adds to the current one, and when the current one is full the
// previous one is dropped and the current one becomes the previous. Check looks in both. So, per
// stream:
//   - an id is remembered while at most `per_stream` new ids have been recorded after it (the
//     newest `per_stream` ids are always remembered);
//   - an id is forgotten once 2 * `per_stream` new ids have been recorded after it, and is then
//     new again (Check answers kNew);
//   - between `per_stream` + 1 and 2 * `per_stream` ids are held once that many were recorded.
// Only Record calls that add an id count ("new ids"); recording an id already remembered changes
// nothing. The state depends only on the sequence of Record calls of each stream, so replaying the
// same calls (a daemon rebuilding the registry from its log) gives the same generations.
//
// OwnerOf finds the stream that holds an id through an index of 64-bit hashes of the ids (one
// entry per id remembered, about 20 bytes), each with the first stream that recorded it; a hit is
// confirmed in that stream's generations, so a collision of hashes never names a wrong stream (it
// can only hide an owner: the id then counts as new on the other stream).
class MemoryIdRegistry final : public IdRegistry {
 public:
  // `per_stream`: the bound described above; 0 remembers every id.
  explicit MemoryIdRegistry(size_t per_stream = 0) : per_stream_(per_stream) {}

  Outcome Check(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) override;
  void Record(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) override;
  std::optional<std::string> OwnerOf(std::string_view stream, std::string_view txn_id) override;

  // Ids remembered, over all streams.
  size_t size() const;

  // Writes every id remembered, with its stream, generation and fingerprint, to `out`
  // (checkpoints: docs/operations.md).
  void Save(v1::IdRegistryCheckpoint* out) const;
  // Replaces what is remembered with what `checkpoint` holds. InvalidArgument (and nothing
  // changed) if its arrays do not match.
  absl::Status Restore(const v1::IdRegistryCheckpoint& checkpoint);
  // The bound per stream; 0: none.
  size_t per_stream() const { return per_stream_; }

 private:
  // Ids, each with its fingerprint. An id that is the text of an int64 as TxnIdString writes one
  // (id_int, or an equal id_str) is kept as the integer: smaller, and no string.
  struct Ids {
    absl::flat_hash_map<int64_t, uint64_t> ints;
    absl::flat_hash_map<std::string, uint64_t> strings;

    size_t size() const { return ints.size() + strings.size(); }
  };
  // A stream's ids: `current` takes new ids; `previous` is the generation before it (always
  // empty when unbounded).
  struct Generations {
    uint32_t index = 0;  // into names_
    Ids current;
    Ids previous;
  };
  // An id as looked up: the integer when `text` is one (see Ids), else the text.
  struct Key {
    std::string_view text;
    bool is_int = false;
    int64_t number = 0;
  };
  static Key MakeKey(std::string_view txn_id);
  // The fingerprint recorded for `key` in `ids`, or null.
  static const uint64_t* Find(const Ids& ids, const Key& key);
  static const uint64_t* Find(const Generations& g, const Key& key);
  // The hash of owners_.
  static uint64_t OwnerHash(const Key& key);
  static uint64_t OwnerHash(int64_t number);
  static uint64_t OwnerHash(std::string_view text);
  // The stream's generations, created (with the next index) if needed.
  Generations& StreamOf(std::string_view stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `index`'s entries of owners_ for the ids of `ids`.
  void Disown(const Ids& ids, uint32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Own(uint64_t hash, uint32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    owners_.try_emplace(hash, index);
  }

  const size_t per_stream_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Generations> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);  // by Generations::index
  // OwnerHash of each id remembered -> the index of the first stream that recorded it.
  absl::flat_hash_map<uint64_t, uint32_t> owners_ ABSL_GUARDED_BY(mu_);
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace isowatch::ingest
