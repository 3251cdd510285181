// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "isowatch/common/strong_id.h"
#include "isowatch/history/value.h"

namespace isowatch::history {

enum class OpKind : uint8_t {
  kRead = 0,      // read of a register; value() is what was observed (absent = no value)
  kWrite = 1,     // write of a register; value() is what was written
  kAppend = 2,    // append of one element to a list; value() is the element
  kListRead = 3,  // read of a whole list; the elements are History::ListElements(op)
};

const char* OpKindName(OpKind kind);

// One operation of a transaction, 24 bytes. Owned by its History.
//
// Invariants:
//  1. kListRead: list_offset()/list_size() say where History keeps the elements (its key's list
//     or a pool; History::list_elements); value() is unused.
//  2. Other kinds: value() holds the value; list_size() == 0.
//  3. unknown() only on reads: the result was never observed; value()/the list are then empty.
class Op {
 public:
  Op() = default;

  static Op Read(KeyId key, Value observed) { return Op(OpKind::kRead, key, observed); }
  static Op Write(KeyId key, Value v) { return Op(OpKind::kWrite, key, v); }
  static Op Append(KeyId key, Value element) { return Op(OpKind::kAppend, key, element); }
  static Op ListRead(KeyId key, uint64_t offset, uint32_t size) {
    Op op(OpKind::kListRead, key, Value::Absent());
    op.payload_ = static_cast<int64_t>(offset);
    op.aux_ = size;
    return op;
  }
  static Op UnknownRead(KeyId key, OpKind kind) {
    Op op(kind, key, Value::Absent());
    op.unknown_ = true;
    return op;
  }

  OpKind kind() const { return kind_; }
  KeyId key() const { return KeyId(key_); }
  bool unknown() const { return unknown_; }
  bool is_read() const { return kind_ == OpKind::kRead || kind_ == OpKind::kListRead; }
  bool is_write() const { return kind_ == OpKind::kWrite || kind_ == OpKind::kAppend; }
  // REQUIRES: kind() != kListRead.
  Value value() const { return Value::FromRaw(value_kind_, payload_); }
  // REQUIRES: kind() == kListRead.
  uint64_t list_offset() const { return static_cast<uint64_t>(payload_); }
  uint32_t list_size() const { return aux_; }

  // This list read with its elements at `offset` in the pool instead (they were moved).
  // REQUIRES: kind() == kListRead.
  Op WithListOffset(uint64_t offset) const {
    Op op = *this;
    op.payload_ = static_cast<int64_t>(offset);
    return op;
  }

  // Turns a register read of an absent value into a read of the empty list (used when a key turns
  // out to be a list key).
  void ConvertAbsentReadToEmptyListRead() {
    kind_ = OpKind::kListRead;
    payload_ = 0;
    aux_ = 0;
    value_kind_ = ValueKind::kAbsent;
  }

 private:
  Op(OpKind kind, KeyId key, Value v)
      : payload_(v.payload()), key_(key.value()), kind_(kind), value_kind_(v.kind()) {}

  int64_t payload_ = 0;
  uint32_t key_ = KeyId::kInvalidValue;
  uint32_t aux_ = 0;
  OpKind kind_ = OpKind::kRead;
  ValueKind value_kind_ = ValueKind::kAbsent;
  bool unknown_ = false;
};

static_assert(sizeof(Op) == 24);

}  // namespace isowatch::history
