// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <compare>
#include <cstdint>
#include <utility>
#include <vector>

namespace isowatch::history {

enum class ValueKind : uint8_t {
  kAbsent = 0,  // no value: a read of a missing key, or the null initial value
  kInt = 1,     // a 64-bit integer, held inline
  kBytes = 2,   // opaque bytes, interned in the History's byte pool; payload is the pool index
};

// A scalar value (register value or list element). Equality is exact: integers compare by value,
// byte strings by their interned index, which the History's pool makes one-to-one with contents.
// Thread-compatible value type.
class Value {
 public:
  constexpr Value() = default;

  static constexpr Value Absent() { return Value(); }
  static constexpr Value Int(int64_t v) { return Value(ValueKind::kInt, v); }
  static constexpr Value BytesRef(uint32_t pool_index) {
    return Value(ValueKind::kBytes, static_cast<int64_t>(pool_index));
  }
  static constexpr Value FromRaw(ValueKind kind, int64_t payload) { return Value(kind, payload); }

  constexpr ValueKind kind() const { return kind_; }
  constexpr bool absent() const { return kind_ == ValueKind::kAbsent; }
  constexpr bool is_int() const { return kind_ == ValueKind::kInt; }
  constexpr bool is_bytes() const { return kind_ == ValueKind::kBytes; }
  // REQUIRES: is_int().
  constexpr int64_t as_int() const { return payload_; }
  // REQUIRES: is_bytes().
  constexpr uint32_t bytes_index() const { return static_cast<uint32_t>(payload_); }
  constexpr int64_t payload() const { return payload_; }

  constexpr bool operator==(const Value&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, const Value& v) {
    return H::combine(std::move(h), static_cast<uint8_t>(v.kind_), v.payload_);
  }

 private:
  constexpr Value(ValueKind kind, int64_t payload) : payload_(payload), kind_(kind) {}

  int64_t payload_ = 0;
  ValueKind kind_ = ValueKind::kAbsent;
};

// Adds `v`'s byte-pool index, if it is a byte string, to `marks`, a set of indices as
// HistoryBuilder::CollectBytes takes it (bit i % 64 of word i / 64), growing it as needed.
inline void MarkBytes(Value v, std::vector<uint64_t>& marks) {
  if (!v.is_bytes()) return;
  const uint32_t i = v.bytes_index();
  if (i / 64 >= marks.size()) marks.resize(i / 64 + 1, 0);
  marks[i / 64] |= uint64_t{1} << (i % 64);
}

}  // namespace isowatch::history
