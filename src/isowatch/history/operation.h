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

// One operation of a transaction, 16 bytes. Owned by its History.
//
// Invariants:
//  1. kListRead: list_offset()/list_size() say where History keeps the elements (its key's list
//     or a pool; History::list_elements); value() is unused.
//  2. Other kinds: value() holds the value; list_size() == 0.
//  3. unknown() only on reads: the result was never observed; value()/the list are then empty.
//
// A history holds millions of operations, so an Op packs its small fields into one word: the
// kind, the value's kind, unknown() and the low bits of a list read's size share `bits_`. A list
// read's offset (History's offsets use bits 0-55 for the position and bits 60-61 for marks)
// shares `payload_` with the size's top bits.
class Op {
 public:
  Op() = default;

  static Op Read(KeyId key, Value observed) { return Op(OpKind::kRead, key, observed); }
  static Op Write(KeyId key, Value v) { return Op(OpKind::kWrite, key, v); }
  static Op Append(KeyId key, Value element) { return Op(OpKind::kAppend, key, element); }
  // REQUIRES: `offset` is a position below 2^56, with at most bits 60 and 61 set above it.
  static Op ListRead(KeyId key, uint64_t offset, uint32_t size) {
    Op op(OpKind::kListRead, key, Value::Absent());
    op.payload_ = PackListRead(offset, size);
    op.bits_ |= (size & kSizeLowMask) << kSizeShift;
    return op;
  }
  static Op UnknownRead(KeyId key, OpKind kind) {
    Op op(kind, key, Value::Absent());
    op.bits_ |= kUnknownBit;
    return op;
  }

  OpKind kind() const { return static_cast<OpKind>(bits_ & kKindMask); }
  KeyId key() const { return KeyId(key_); }
  bool unknown() const { return (bits_ & kUnknownBit) != 0; }
  bool is_read() const { return kind() == OpKind::kRead || kind() == OpKind::kListRead; }
  bool is_write() const { return kind() == OpKind::kWrite || kind() == OpKind::kAppend; }
  // REQUIRES: kind() != kListRead.
  Value value() const {
    return Value::FromRaw(static_cast<ValueKind>((bits_ >> kValueKindShift) & kValueKindMask),
                          payload_);
  }
  // REQUIRES: kind() == kListRead.
  uint64_t list_offset() const {
    const auto p = static_cast<uint64_t>(payload_);
    return (p & kPositionMask) | ((p >> kPositionBits) & kMarkMask) << kMarkShift;
  }
  uint32_t list_size() const {
    if (kind() != OpKind::kListRead) return 0;  // the payload is a value's
    const auto p = static_cast<uint64_t>(payload_);
    return (bits_ >> kSizeShift) | static_cast<uint32_t>(p >> kSizeHighShift) << (32 - kSizeShift);
  }

  // This list read with its elements at `offset` in the pool instead (they were moved).
  // REQUIRES: kind() == kListRead, and `offset` as for ListRead.
  Op WithListOffset(uint64_t offset) const {
    Op op = *this;
    op.payload_ = PackListRead(offset, list_size());
    return op;
  }

  // Turns a register read of an absent value into a read of the empty list (used when a key turns
  // out to be a list key).
  void ConvertAbsentReadToEmptyListRead() {
    bits_ = static_cast<uint32_t>(OpKind::kListRead) | (bits_ & kUnknownBit);
    payload_ = 0;
  }

 private:
  // bits_: kind (bits 0-1), value kind (2-3), unknown (4), a list read's size's low 27 bits (5-31).
  static constexpr uint32_t kKindMask = 3;
  static constexpr int kValueKindShift = 2;
  static constexpr uint32_t kValueKindMask = 3;
  static constexpr uint32_t kUnknownBit = 1 << 4;
  static constexpr int kSizeShift = 5;
  static constexpr uint32_t kSizeLowMask = (uint32_t{1} << (32 - kSizeShift)) - 1;
  // A list read's payload_: the offset's position (bits 0-55), its marks (bits 60-61 of the
  // offset, kept at 56-57), and the size's top 5 bits (59-63).
  static constexpr int kPositionBits = 56;
  static constexpr uint64_t kPositionMask = (uint64_t{1} << kPositionBits) - 1;
  static constexpr int kMarkShift = 60;
  static constexpr uint64_t kMarkMask = 3;
  static constexpr int kSizeHighShift = 64 - kSizeShift;

  static int64_t PackListRead(uint64_t offset, uint32_t size) {
    const uint64_t p = (offset & kPositionMask) |
                       ((offset >> kMarkShift) & kMarkMask) << kPositionBits |
                       static_cast<uint64_t>(size >> (32 - kSizeShift)) << kSizeHighShift;
    return static_cast<int64_t>(p);
  }

  Op(OpKind kind, KeyId key, Value v)
      : payload_(v.payload()),
        key_(key.value()),
        bits_(static_cast<uint32_t>(kind) | static_cast<uint32_t>(v.kind()) << kValueKindShift) {}

  int64_t payload_ = 0;
  uint32_t key_ = KeyId::kInvalidValue;
  uint32_t bits_ = 0;
};

static_assert(sizeof(Op) == 16);

}  // namespace isowatch::history
