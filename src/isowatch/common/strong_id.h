// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <utility>

namespace isowatch {

// A dense index of one kind (transactions, sessions, keys) that does not mix with the others.
// Thread-compatible value type.
template <typename Tag, typename Rep = uint32_t>
class StrongId {
 public:
  using rep_type = Rep;
  static constexpr Rep kInvalidValue = std::numeric_limits<Rep>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}

  static constexpr StrongId Invalid() { return StrongId(); }

  constexpr Rep value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalidValue; }

  constexpr auto operator<=>(const StrongId&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, StrongId id) {
    return H::combine(std::move(h), id.value_);
  }

 private:
  Rep value_ = kInvalidValue;
};

// A transaction's index in its History (input order). 64 bits: a live history numbers every
// transaction it is ever given, and a daemon that runs for months at 100K transactions a second
// passes 2^32 in half a day.
using TxnId = StrongId<struct TxnIdTag, uint64_t>;
// Every valid TxnId is below this, so that an id packs with a 2-bit tag into 64 bits.
inline constexpr int kTxnIdBits = 62;
inline constexpr uint64_t kTxnIdLimit = uint64_t{1} << kTxnIdBits;

// A transaction id (below kTxnIdLimit) and a tag of 0 to 3 in one 64-bit number that orders by
// tag, then id: the replay positions of Chronos and of the online engine (phase, transaction).
constexpr uint64_t PackTaggedTxn(uint32_t tag, uint64_t txn) {
  return (uint64_t{tag} << kTxnIdBits) | txn;
}
constexpr uint32_t TagOfPacked(uint64_t packed) {
  return static_cast<uint32_t>(packed >> kTxnIdBits);
}
constexpr uint64_t TxnOfPacked(uint64_t packed) { return packed & (kTxnIdLimit - 1); }

// A session's index in its History (first-appearance order).
using SessionId = StrongId<struct SessionIdTag>;
// An interned key.
using KeyId = StrongId<struct KeyIdTag>;

}  // namespace isowatch
