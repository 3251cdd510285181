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

// A transaction's index in its History (input order).
using TxnId = StrongId<struct TxnIdTag>;
// A session's index in its History (first-appearance order).
using SessionId = StrongId<struct SessionIdTag>;
// An interned key.
using KeyId = StrongId<struct KeyIdTag>;

}  // namespace isowatch
