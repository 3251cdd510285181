// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/finality.h"
#include "isowatch/engine/internal/key_state.h"
#include "isowatch/engine/internal/key_table.h"
#include "isowatch/engine/internal/spill_access.h"
#include "isowatch/history/history.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. The table has a slot for every key id below size(). Without eviction (no memory budget or
//     no spill) it is dense: every key has a state, for good.
//  2. A key has a value in base_values_ iff its state is in memory with base_in_spill; then
//     KeyState invariant 5 holds. leafless_keys_ counts the states in memory with base_in_spill
//     and no version.
//  3. With eviction, a state with idle_queued has an entry in the idle queue. Entries are in
//     order of the advance they were queued at; an entry may be stale (its key's state was let
//     go, or is another key's under a reused id): it is skipped, or does what it would do for
//     that key anyway.
//  4. Only with eviction is a key evicted or "maybe spilled"; an evicted key's state (in the
//     spill) holds no pending read and no version but its spilled base.
//  5. idle_advances() lies in [1, 65536] with eviction, and is 64 without.

// The engine's per-key states and where they live (docs/engine.md, "Data structures", "Spill",
// "Forgetting keys"): in memory in a KeyTable, evicted to the spill when cold (a register with
// one final version, idle long enough, under a memory budget), or forgotten by the history. Makes
// a state at a key's first read or write, brings an evicted or forgotten key's back from the
// spill, frees idle keys' pending-read leaves, evicts, and adapts how long a key must stay idle.
// Also deduplicates keys within one pass over a transaction's operations.
//
// Engine-thread only. Owns the states (their chains and list bases included) and the idle
// queue; reads the final point and writes through the spill access.
class KeyStore {
 public:
  KeyStore(EngineContext& ctx, const Finality& finality, SpillAccess& spill);
  KeyStore(const KeyStore&) = delete;
  KeyStore& operator=(const KeyStore&) = delete;

  // A spill and a memory budget: cold keys may move their last version and their state to the
  // spill, so the table is sparse.
  bool evicting() const { return evicting_; }
  size_t size() const { return table_.size(); }
  // Makes room for the keys the history added, and their stamps. New ones are "maybe spilled"
  // once the history forgot keys.
  void Grow();

  KeyTable& table() { return table_; }
  const KeyTable& table() const { return table_; }

  // The key's state if memory holds one (prefetching and scans of queues must not restore an
  // evicted key's).
  const KeyState* Find(KeyId key) const {
    return key.value() < table_.size() ? table_.Find(key.value()) : nullptr;
  }
  KeyState* Find(KeyId key) {
    return key.value() < table_.size() ? table_.Find(key.value()) : nullptr;
  }

  // The state of `key`, made when it has none, restored from the spill when it was evicted or
  // may have been (forgotten). Invalidates references to other states when it makes one.
  [[gnu::always_inline]] KeyState& State(KeyId key) {
    if (KeyState* ks = table_.Find(key.value())) [[likely]] {
      return *ks;
    }
    return NewState(key);
  }

  // Calls fn(key, value) once for each key transaction `id` writes, with its final value there
  // (registers; lists: the last append, unused).
  template <typename Fn>
  [[gnu::always_inline]] void ForEachWrite(TxnId id, Fn fn) {
    NextStamp();
    auto ops = ctx_.h().ops(id);
    for (size_t i = ops.size(); i-- > 0;) {
      const history::Op& op = ops[i];
      if (!op.is_write()) continue;
      const uint32_t k = op.key().value();
      if (key_stamp_[k] == stamp_) continue;
      key_stamp_[k] = stamp_;
      fn(op.key(), op.value());
    }
  }
  // Calls fn(op) once for each key transaction `t` writes, at its first write, in program order.
  template <typename Fn>
  void ForEachWrittenKey(const history::Transaction& t, Fn fn) {
    NextStamp();
    for (const history::Op& op : ctx_.h().ops(t)) {
      if (!op.is_write()) continue;
      const uint32_t k = op.key().value();
      if (key_stamp_[k] == stamp_) continue;
      key_stamp_[k] = stamp_;
      fn(op);
    }
  }

  // `ks` was read or written now (eviction's idle time starts again).
  void Touch(KeyState& ks) const {
    if (evicting_) ks.last_active = static_cast<uint32_t>(finality_.advances());
  }
  // A version is about to go into `ks`'s chain.
  void WillInsertVersion(const KeyState& ks) {
    if (ks.versions.empty() && ks.base_in_spill) --leafless_keys_;
  }
  // With eviction: queues `key` as idle when it is left with one version and no pending read (a
  // candidate for Evict).
  void QueueIfEvictable(KeyId key, KeyState& ks) {
    if (evicting_ && ks.versions.size() == 1 && ks.readers.empty()) QueueIdle(key, ks);
  }
  // Queues `key` to be tried when it has been idle long enough (ReleaseIdleKeys): its pending
  // reads all became final, or it is left with one version. Once at a time under a budget.
  void QueueIdle(KeyId key, KeyState& ks) {
    if (evicting_) {
      if (ks.idle_queued) return;
      ks.idle_queued = true;
    }
    idle_keys_.emplace_back(finality_.advances(), key.value());
  }
  // At an advance of the final point: frees the pending-read leaf of the keys whose reads all
  // became final kIdleAdvances advances ago (or, under a budget, idle_advances()) and that have
  // had none since: cold keys give back their leaf, while a key read again soon (a hot one)
  // keeps it rather than allocating one at each read. With eviction, a state that holds nothing
  // leaves memory, and while `may_evict()` (the engine is over its budget and eviction is
  // allowed) a register left with a single final version moves it and its state to the spill
  // (Evict). Evicts at most kMaxEvictionsPerAdvance keys; the rest wait for the next advances.
  void ReleaseIdleKeys(absl::FunctionRef<bool()> may_evict);

  // The spilled base of `key` is no longer the newest version at or below the final point: a
  // version committed at `next` follows it. Writes it again with that expiry (so that pruning
  // can drop it) and clears base_in_spill. False, with base_in_spill left set, if the spill
  // failed.
  bool ReplaceSpilledBase(KeyId key, KeyState& ks, const history::Timestamp& next);
  // The value of the spilled base of `key`, brought back with its state; nullptr if none.
  const history::Value* BaseValue(KeyId key) const {
    const auto it = base_values_.find(key.value());
    return it == base_values_.end() ? nullptr : &it->second;
  }

  // Whether `ks` holds nothing a state made afresh would not: no version, pending read, trim or
  // queue entry (but the idle one). Such a state can leave memory without a trace.
  static bool Fresh(const KeyState& ks) {
    return ks.versions.empty() && ks.readers.empty() && !ks.trimmed && !ks.in_gc &&
           ks.max_duration == 0 && ks.base_list.empty();
  }

  // Engine::MarkBytes, for what the states hold: their chains, pending reads, list bases and
  // evicted keys' bases brought back.
  void MarkBytes(std::vector<uint64_t>& marks) const;
  // Engine::MarkKeys and Engine::ForgetKeys.
  void MarkKeys(std::vector<uint64_t>& marks) const;
  void ForgetKeys(std::span<const KeyId> keys);
  // The history forgot keys: any key it interns from now on may be one of them.
  bool forgot_keys() const { return forgot_keys_; }

  // RestoreCheckpoint: `key`'s spilled base, at `base` with value `v`.
  void RestoreBase(KeyId key, KeyState& ks, const OrderKey& base, history::Value v);
  // RestoreCheckpoint: `k`, listed evicted. Marks it evicted long ago with eviction; without,
  // brings its state back from the spill. Returns whether it counts as evicted.
  bool RestoreEvicted(uint32_t k);
  void RestoreMaybeSpilled(uint32_t k);
  void set_forgot_keys(bool forgot) { forgot_keys_ = forgot; }

  // How many advances of the final point a key must stay idle before it is evicted.
  uint64_t idle_advances() const { return idle_advances_; }
  // Bytes of the table, stamps, one small leaf per state with a chain, the idle queue and the
  // evicted keys' base values (docs/engine.md, "Memory").
  uint64_t MemoryBytes() const;

  void CheckInvariants() const;

  static constexpr uint64_t kIdleAdvances = 64;

 private:
  static constexpr uint64_t kMaxEvictionsPerAdvance = 16384;
  static constexpr uint64_t kMaxIdleAdvances = uint64_t{1} << 16;
  static constexpr uint64_t kMinIdleAdvances = 1;

  [[gnu::noinline]] KeyState& NewState(KeyId key);
  // Brings back the state of evicted `key` from its record in the spill (Evict): no version in
  // memory, the base in the spill. If the spill cannot answer, a state under which every check
  // that needs what the key held up to the final point is a horizon miss. Queues the key as
  // idle, so that it leaves memory again if it stays so. With `maybe` (a key the spill may hold,
  // KeyTable::Slot::kMaybeSpilled), a key the spill has no record of keeps its fresh state.
  [[gnu::noinline, gnu::cold]] void Restore(KeyId key, KeyState& ks, bool maybe);
  // Moves the single version of register `key`, final and with no read pending, to the spill,
  // then the key's state itself (SpilledKey): its writer is then no longer needed in memory
  // either (Engine::Release). Reads see the version from the spill until a newer one replaces
  // it; the state comes back at the key's next read or write (State). A key restored and not
  // written since leaves again as it is: its record in the spill still holds. `ks` is not to be
  // used afterwards if the key was evicted. Returns false when the key could go but for its
  // version, which is not final yet (it must then be tried again later), true otherwise.
  bool Evict(KeyId key, KeyState& ks);
  // Every kIdleAdvances advances: doubles the idle wait when more than half the keys evicted
  // meanwhile came back soon (within kIdleAdvances advances of their eviction), halves it when
  // fewer than a quarter did (docs/engine.md, "Spill", cold keys).
  void AdaptIdleAdvances();
  // A fresh value of stamp_; all stamps are cleared when it wraps around.
  void NextStamp() {
    if (++stamp_ == 0) {
      std::fill(key_stamp_.begin(), key_stamp_.end(), 0);
      stamp_ = 1;
    }
  }

  EngineContext& ctx_;
  const Finality& finality_;
  SpillAccess& spill_;
  const bool evicting_;
  KeyTable table_;
  // The history forgot keys (ForgetKeys): a key it interns from now on may be one of them, whose
  // state the spill holds.
  bool forgot_keys_ = false;
  std::vector<uint32_t> key_stamp_;  // per key: deduplication within one pass
  uint32_t stamp_ = 0;
  // Keys whose pending reads all became final or that were left with one version, with the
  // advance then (ReleaseIdleKeys).
  std::deque<std::pair<uint64_t, uint32_t>> idle_keys_;
  uint64_t leafless_keys_ = 0;  // keys in memory with base_in_spill and no version there
  // The value of each key in memory with base_in_spill: its spilled base's, from its record.
  absl::flat_hash_map<uint32_t, history::Value> base_values_;
  // Eviction's idle time, in advances (AdaptIdleAdvances), and what it counts.
  uint64_t idle_advances_ = kIdleAdvances;
  uint64_t quick_returns_ = 0;  // evicted keys back within kIdleAdvances of their eviction
  uint64_t evicted_mark_ = 0;
  uint64_t returns_mark_ = 0;
};

}  // namespace isowatch::engine::internal
