// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "isowatch/engine/internal/key_state.h"

namespace isowatch::engine::internal {

// The engine's per-key state, by key id: a 4-byte slot per key, and a KeyState only for the keys
// that need one in memory. A slot says that the key has no state (never touched, or released
// while its state was that of a fresh key), that its state was evicted to the spill, or where
// its KeyState is.
//
// KeyStates live in chunks of kChunk that are never moved or freed, so references stay valid
// while the table grows; released ones are reused first. Thread-compatible.
class KeyTable {
 public:
  enum class Slot : uint8_t { kNone, kEvicted, kResident };

  KeyTable() = default;
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  size_t size() const { return slots_.size(); }
  // Makes room for keys [size(), n), with no state. REQUIRES: n >= size().
  void Grow(size_t n) { slots_.resize(n, kNoneSlot); }

  Slot slot(uint32_t key) const {
    const uint32_t s = slots_[key];
    return s >= kFirstState ? Slot::kResident : static_cast<Slot>(s);
  }
  // The key's KeyState, or nullptr if it has none in memory.
  KeyState* Find(uint32_t key) {
    const uint32_t s = slots_[key];
    return s >= kFirstState ? &At(s - kFirstState) : nullptr;
  }
  const KeyState* Find(uint32_t key) const {
    const uint32_t s = slots_[key];
    return s >= kFirstState ? &At(s - kFirstState) : nullptr;
  }

  // A fresh KeyState for `key`. REQUIRES: Find(key) == nullptr.
  KeyState& Create(uint32_t key) {
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      if (used_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<KeyState[]>(kChunk));
      i = used_++;
    }
    slots_[key] = i + kFirstState;
    ++resident_;
    return At(i);
  }

  // Frees `key`'s KeyState (whatever it held) and marks the key evicted (`evicted`) or without
  // state. REQUIRES: Find(key) != nullptr; no reference to its state is used afterwards.
  void Release(uint32_t key, bool evicted) {
    const uint32_t i = slots_[key] - kFirstState;
    At(i) = KeyState{};
    free_.push_back(i);
    slots_[key] = evicted ? kEvictedSlot : kNoneSlot;
    --resident_;
  }

  // Keys with a KeyState in memory.
  size_t resident() const { return resident_; }
  // Bytes held: the slots, the chunks (free states included) and the free list, not what the
  // states point to.
  size_t MemoryBytes() const {
    return slots_.capacity() * sizeof(uint32_t) + chunks_.size() * kChunk * sizeof(KeyState) +
           chunks_.capacity() * sizeof(void*) + free_.capacity() * sizeof(uint32_t);
  }

 private:
  static constexpr size_t kChunk = 1024;  // KeyStates per chunk (192 KiB)
  static constexpr uint32_t kNoneSlot = static_cast<uint32_t>(Slot::kNone);
  static constexpr uint32_t kEvictedSlot = static_cast<uint32_t>(Slot::kEvicted);
  static constexpr uint32_t kFirstState = 2;  // slot of state i: i + kFirstState

  KeyState& At(uint32_t i) const { return chunks_[i / kChunk][i % kChunk]; }

  std::vector<uint32_t> slots_;
  std::vector<std::unique_ptr<KeyState[]>> chunks_;
  std::vector<uint32_t> free_;
  uint32_t used_ = 0;  // states handed out from the chunks, released ones included
  size_t resident_ = 0;
};

}  // namespace isowatch::engine::internal
