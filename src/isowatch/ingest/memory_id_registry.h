// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/ingest/id_registry.h"

namespace isowatch::ingest {

// An IdRegistry held in memory: every id recorded stays until the object is destroyed (memory
// grows with the number of distinct ids). For tests, the fuzzer and runs without a store.
// Thread-safe.
class MemoryIdRegistry final : public IdRegistry {
 public:
  Outcome Check(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) override;
  void Record(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) override;

  // Ids recorded, over all streams.
  size_t size() const;

 private:
  // Per stream, each id with its fingerprint. An id that is the text of an int64 as TxnIdString
  // writes one (id_int, or an equal id_str) is kept as the integer: smaller, and no string.
  struct Ids {
    absl::flat_hash_map<int64_t, uint64_t> ints;
    absl::flat_hash_map<std::string, uint64_t> strings;
  };
  // The fingerprint recorded for `txn_id` in `ids`, or null.
  static const uint64_t* Find(const Ids& ids, std::string_view txn_id);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Ids> streams_ ABSL_GUARDED_BY(mu_);
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace isowatch::ingest
