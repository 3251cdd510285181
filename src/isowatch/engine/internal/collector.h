// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/finality.h"
#include "isowatch/engine/internal/key_state.h"
#include "isowatch/engine/internal/key_store.h"
#include "isowatch/engine/internal/spill_access.h"
#include "isowatch/engine/internal/time_queue.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. A key's in_gc is set iff it has an entry in the collection queue, at most one: the queue
//     holds exactly the keys with in_gc. A key in the queue keeps its state in memory.
//  2. Every key whose chain holds a version a collection could drop (a register: two or more; a
//     list: one or more) is in the queue.
//  3. Unless trimmed, a key has dropped nothing: no list base, trim_point Min, dropped_upto
//     kBeforeAll. Once trimmed, dropped_upto lies at or below trim_point (KeyState invariant 2).
//  4. base_list_values() is the number of values in all list bases.

// Collection (docs/engine.md, "Collection", "Spill"): at each advance of the final point F,
// drops what no read at or after the collection point G = F - max(retention, longest
// transaction) can need: for a register every version older than the newest one at or below G,
// for a list those versions, folded into its base list. With a spill, writes to it what a check
// of an older snapshot could still need (everything collected with spill_collected), and over the
// memory budget cuts at F itself. Also sets the spill's prune point.
//
// Engine-thread only. Owns the collection queue; the chains and bases it trims live in the key
// states (KeyStore).
class Collector {
 public:
  Collector(EngineContext& ctx, const Finality& finality, SpillAccess& spill, KeyStore& keys)
      : ctx_(ctx), finality_(finality), spill_(spill), keys_(keys) {}
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Puts `key` in the collection queue if it holds a version a future collection could drop (for
  // a register, any but the oldest; for a list, any), under the commit timestamp from which on
  // there is something to drop. One entry per key: a version inserted below that point later
  // only delays its collection to the entry's turn.
  void ScheduleTrim(KeyId key, KeyState& ks) {
    if (ks.in_gc) return;
    const bool is_list = ctx_.h().key(key).is_list;
    if (ks.versions.size() < (is_list ? 1U : 2U)) return;
    auto it = ks.versions.begin();
    if (!is_list) ++it;
    queue_.Push(it.key().ts, key.value());
    ks.in_gc = true;
  }

  // At an advance of the final point: collects every key due, cutting at F instead when
  // `memory_bytes()` is over the memory budget.
  void Collect(absl::FunctionRef<uint64_t()> memory_bytes);

  // RestoreCheckpoint: a restored list base of `n` values.
  void RestoredBase(size_t n) { base_list_values_ += n; }
  uint64_t base_list_values() const { return base_list_values_; }
  uint64_t MemoryBytes() const { return base_list_values_ * sizeof(history::Value); }

  void CheckInvariants() const;

 private:
  // Collects the versions of `key` at or below `g` (keeping, for a register, the newest of
  // them). With a spill, the ones the normal collection point `normal` would have kept (for a
  // register also the newest at or below it) are written to it, and the others too if
  // spill_collected; the rest are dropped and recorded in dropped_upto.
  void Trim(KeyId key, KeyState& ks, const history::Timestamp& g, const history::Timestamp& normal);

  EngineContext& ctx_;
  const Finality& finality_;
  SpillAccess& spill_;
  KeyStore& keys_;
  TimeQueue queue_;  // keys with versions to collect (ScheduleTrim), at most one entry each
  std::vector<KeyId> due_;
  uint64_t base_list_values_ = 0;
};

}  // namespace isowatch::engine::internal
