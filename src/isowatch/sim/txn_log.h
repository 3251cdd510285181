// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isowatch/history/operation.h"
#include "isowatch/history/transaction.h"
#include "isowatch/history/value.h"

namespace isowatch::sim {

// What the simulator remembers about a transaction from its begin on.
struct TxnRecord {
  int64_t start = 0;   // start timestamp as recorded in the history
  int64_t commit = 0;  // commit timestamp; meaningful once status is kCommitted
  uint64_t id = 0;     // numeric id in the history; 0 while running or if never recorded
  uint32_t session = 0;
  uint32_t write_keys = 0;  // distinct keys written, once committed
  // kUnknown while the transaction runs.
  history::TxnStatus status = history::TxnStatus::kUnknown;
};

// Who produced a written value (register value or list element).
struct ValueOrigin {
  uint32_t txn = 0;
  bool final = false;  // registers: the writer's last write to the key; lists: always true
};

// One operation of a running transaction, as it will be recorded.
struct TxnOp {
  history::OpKind kind = history::OpKind::kRead;
  uint64_t key = 0;
  history::Value value;      // kRead, kWrite, kAppend
  uint32_t list_offset = 0;  // kListRead: elements in the transaction's list pool
  uint32_t list_size = 0;
};

// Every transaction that has begun (indexed by handle = begin order) and the origin of every
// value written. Values are the integers 1, 2, 3, ... in the order they are written, so a value
// identifies its write across the whole run.
// Thread-compatible.
class TxnLog {
 public:
  // Registers a transaction of `session` and returns its handle.
  uint32_t Begin(uint32_t session) {
    records_.push_back(TxnRecord{.session = session});
    return static_cast<uint32_t>(records_.size() - 1);
  }
  size_t size() const { return records_.size(); }
  TxnRecord& at(uint32_t handle) { return records_[handle]; }
  const TxnRecord& at(uint32_t handle) const { return records_[handle]; }

  // A fresh value written by `writer`, not yet final.
  int64_t NewValue(uint32_t writer) {
    origins_.push_back(ValueOrigin{.txn = writer, .final = false});
    return static_cast<int64_t>(origins_.size());
  }
  void MarkFinal(int64_t value) { origins_[static_cast<size_t>(value - 1)].final = true; }
  // The origin of `v`, or nullptr if no transaction wrote it.
  const ValueOrigin* Origin(history::Value v) const {
    if (!v.is_int() || v.as_int() < 1 || static_cast<uint64_t>(v.as_int()) > origins_.size()) {
      return nullptr;
    }
    return &origins_[static_cast<size_t>(v.as_int() - 1)];
  }

  // The transaction's id as written in the history.
  std::string Name(uint32_t handle) const { return std::to_string(records_[handle].id); }

 private:
  std::vector<TxnRecord> records_;
  std::vector<ValueOrigin> origins_;
};

}  // namespace isowatch::sim
