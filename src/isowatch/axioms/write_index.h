// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::axioms {

// Who wrote the value an external read returned, judged against the reader's snapshot point.
struct ExtFinding {
  verdict::ExtKind kind = verdict::ExtKind::kNever;
  TxnId writer;  // invalid for kNever and for the initial value
};

// Index (key, value) -> writer over every write and append of a history, any status, used to
// explain why an external read is wrong. Built on the first call to Classify, so histories
// without violations never pay for it; a history that has grown since (a live history) has its
// new transactions indexed on the next call. Thread-compatible.
class WriteIndex {
 public:
  explicit WriteIndex(const history::History& h) : h_(h) {}

  // Classifies the observation `value` of `key` by `reader` (docs/checkers/chronos.md).
  ExtFinding Classify(TxnId reader, KeyId key, history::Value value, verdict::IsolationLevel level);

  // A live history is about to forget `txn`: drops its writes from the index. A value whose
  // writer is forgotten is then classified kUnknown.
  void Forget(TxnId txn);

 private:
  struct Entry {
    uint64_t txn = 0;
    uint8_t rank = 0;  // preference when a value was written more than once; higher wins
    bool final = true;
  };

  void Build();
  // Whether committed `w` precedes `reader`'s snapshot point.
  bool Precedes(TxnId w, TxnId reader, verdict::IsolationLevel level) const;

  const history::History& h_;
  uint64_t indexed_ = 0;                    // transactions [0, indexed_) are in index_
  std::vector<uint32_t> last_write_stamp_;  // per key, for Build
  uint32_t stamp_ = 0;
  absl::flat_hash_map<std::pair<KeyId, history::Value>, Entry> index_;
};

}  // namespace isowatch::axioms
