// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "isowatch/engine/internal/key_state.h"

namespace isowatch::engine::internal {

// The engine's per-key state, by key id: a 4-byte slot per key, and a KeyState only for the keys
// that need one in memory. A slot says that the key has no state (never touched, or released
// while its state was that of a fresh key), that its state was evicted to the spill and when
// (the advance of the final point, modulo 2^31), that the spill may hold its state (the id names
// a key the history interned after it forgot keys: the key may be one of them), or where its
// KeyState is.
//
// KeyStates live in one array, indexed by the slot, so that finding a resident key's state is
// one load more than indexing an array by key: released states are reused first, and the array
// grows (moving every state) only when none is free. A reference to a state therefore stays
// valid until the next Create. Thread-compatible.
//
// A dense table (for an engine that never lets a state go) has no slots: every key has its
// state, at its own index, from Grow on, and Find is a plain index (the slot's load costs the
// engine a few per cent when nothing is ever released).
class KeyTable {
 public:
  enum class Slot : uint8_t { kNone, kEvicted, kMaybeSpilled, kResident };

  explicit KeyTable(bool sparse) : sparse_(sparse) {}
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  size_t size() const { return sparse_ ? slots_.size() : states_.size(); }
  // Makes room for keys [size(), n): with no state (or, if `maybe_spilled`, one the spill may
  // hold), or in a dense table with a fresh one. REQUIRES: n >= size().
  void Grow(size_t n, bool maybe_spilled = false) {
    if (sparse_) {
      slots_.resize(n, maybe_spilled ? kMaybeSlot : kNoneSlot);
    } else {
      states_.resize(n);
      resident_ = n;
    }
  }

  Slot slot(uint32_t key) const {
    if (!sparse_) return Slot::kResident;
    const uint32_t s = slots_[key];
    if ((s & kEvictedBit) != 0) return Slot::kEvicted;
    if (s == kMaybeSlot) return Slot::kMaybeSpilled;
    return s >= kFirstState ? Slot::kResident : Slot::kNone;
  }
  // The key's KeyState, or nullptr if it has none in memory.
  KeyState* Find(uint32_t key) {
    if (!sparse_) return &states_[key];
    const uint32_t s = slots_[key];
    return IsState(s) ? &states_[s] : nullptr;
  }
  const KeyState* Find(uint32_t key) const {
    if (!sparse_) return &states_[key];
    const uint32_t s = slots_[key];
    return IsState(s) ? &states_[s] : nullptr;
  }
  // How many advances ago evicted `key` was evicted, given the advance `now` (modulo 2^31).
  // REQUIRES: slot(key) == kEvicted.
  uint32_t EvictedAge(uint32_t key, uint64_t now) const {
    return (static_cast<uint32_t>(now) - slots_[key]) & kAdvanceMask;
  }

  // A fresh KeyState for `key`. REQUIRES: a sparse table, Find(key) == nullptr. Invalidates
  // references to other states when no released one is free.
  KeyState& Create(uint32_t key) {
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      if (states_.empty()) states_.resize(kFirstState);
      i = static_cast<uint32_t>(states_.size());
      states_.emplace_back();
    }
    slots_[key] = i;
    ++resident_;
    return states_[i];
  }

  // Frees `key`'s KeyState (whatever it held) and marks the key evicted at advance `advance`
  // (`evicted`) or without state. REQUIRES: a sparse table, Find(key) != nullptr; no reference
  // to its state is used afterwards.
  void Release(uint32_t key, bool evicted, uint64_t advance = 0) {
    const uint32_t i = slots_[key];
    states_[i] = KeyState{};
    free_.push_back(i);
    slots_[key] = evicted ? EvictedSlot(advance) : kNoneSlot;
    --resident_;
  }

  // Marks `key`, which has no state, evicted at advance `advance` (a restored engine's).
  // REQUIRES: a sparse table, Find(key) == nullptr.
  void MarkEvicted(uint32_t key, uint64_t advance) { slots_[key] = EvictedSlot(advance); }

  // Marks `key`, which has no state, as one whose state the spill may hold: its id now names
  // another key, or will. REQUIRES: a sparse table, Find(key) == nullptr.
  void MarkMaybeSpilled(uint32_t key) { slots_[key] = kMaybeSlot; }

  // Packs the states in memory at the front of a new array, sized for them with room to grow by
  // half, when at most a quarter of the array holds one and the array takes at least as much
  // memory as the slots: what the keys once in memory together took goes back. O(keys + array).
  // Invalidates every reference to a state. Returns whether it packed.
  bool Compact() {
    if (!sparse_ || resident_ * 4 >= states_.size() ||
        states_.size() * sizeof(KeyState) < slots_.size() * sizeof(uint32_t)) {
      return false;
    }
    std::vector<KeyState> packed;
    packed.reserve(kFirstState + resident_ + resident_ / 2);
    packed.resize(kFirstState);
    for (uint32_t& s : slots_) {
      if (!IsState(s)) continue;
      packed.push_back(std::move(states_[s]));
      s = static_cast<uint32_t>(packed.size() - 1);
    }
    states_ = std::move(packed);
    free_.clear();
    free_.shrink_to_fit();
    return true;
  }

  // Calls f(const KeyState&) for every state in memory (and for free ones, which hold nothing).
  template <typename F>
  void ForEachState(F&& f) const {
    for (size_t i = sparse_ ? kFirstState : 0; i < states_.size(); ++i) f(states_[i]);
  }

  // Keys with a KeyState in memory.
  size_t resident() const { return resident_; }
  // Bytes held: the slots, the states (free ones, spare capacity and the two never used
  // included) and the free list, not what the states point to.
  size_t MemoryBytes() const {
    return slots_.capacity() * sizeof(uint32_t) + states_.capacity() * sizeof(KeyState) +
           free_.capacity() * sizeof(uint32_t);
  }

 private:
  static constexpr uint32_t kNoneSlot = 0;
  static constexpr uint32_t kMaybeSlot = 1;
  // An evicted key's slot: this bit and the advance it was evicted at, modulo 2^31.
  static constexpr uint32_t kEvictedBit = uint32_t{1} << 31;
  static constexpr uint32_t kAdvanceMask = kEvictedBit - 1;
  // A resident key's slot is its state's index in states_, below kEvictedBit; the first two are
  // never handed out (they are kNoneSlot and kMaybeSlot).
  static constexpr uint32_t kFirstState = 2;

  static uint32_t EvictedSlot(uint64_t advance) {
    return kEvictedBit | (static_cast<uint32_t>(advance) & kAdvanceMask);
  }
  // One comparison: slots below kFirstState and evicted ones both fall outside.
  static bool IsState(uint32_t s) { return s - kFirstState < kEvictedBit - kFirstState; }

  const bool sparse_;
  std::vector<uint32_t> slots_;
  std::vector<KeyState> states_;
  std::vector<uint32_t> free_;
  size_t resident_ = 0;
};

}  // namespace isowatch::engine::internal
