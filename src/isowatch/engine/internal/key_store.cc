// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/key_store.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"

#include "isowatch/common/check.h"

namespace isowatch::engine::internal {

using history::Timestamp;
using history::Value;

KeyStore::KeyStore(EngineContext& ctx, const Finality& finality, SpillAccess& spill)
    : ctx_(ctx),
      finality_(finality),
      spill_(spill),
      evicting_(spill.present() && ctx.options().memory_budget > 0),
      table_(/*sparse=*/evicting_),
      key_stamp_(ctx.h().key_count(), 0) {
  table_.Grow(ctx.h().key_count());
}

void KeyStore::Grow() {
  table_.Grow(ctx_.h().key_count(), forgot_keys_);
  key_stamp_.resize(ctx_.h().key_count(), 0);
}

KeyState& KeyStore::NewState(KeyId key) {
  const KeyTable::Slot slot = table_.slot(key.value());
  const bool evicted = slot == KeyTable::Slot::kEvicted;
  // An evicted key back soon after it left (AdaptIdleAdvances).
  if (evicted && table_.EvictedAge(key.value(), finality_.advances()) <= kIdleAdvances) {
    ++quick_returns_;
  }
  KeyState& ks = table_.Create(key.value());
  if (evicted) [[unlikely]] {
    Restore(key, ks, /*maybe=*/false);
  } else if (slot == KeyTable::Slot::kMaybeSpilled) [[unlikely]] {
    Restore(key, ks, /*maybe=*/true);
  }
  return ks;
}

void KeyStore::Restore(KeyId key, KeyState& ks, bool maybe) {
  std::optional<SpilledKey> record;
  const bool answered = spill_.FindKey(key, &record);
  EngineStats& stats = ctx_.stats();
  if (maybe && answered && !record) {
    ++stats.new_key_lookups;  // a key never evicted: nothing to bring back
    return;
  }
  ++stats.restored_keys;
  if (maybe && record) ++stats.forgotten_returns;
  ks.trimmed = true;
  if (record) {
    ks.spilled_base = record->base;
    ks.base_in_spill = true;
    base_values_[key.value()] = record->base_value;
    ks.trim_point = record->trim_point;
    ks.dropped_upto = record->dropped_upto;
    ks.max_duration = record->max_duration;
    ++leafless_keys_;
  } else {
    // The base lay at or below the final point: treat everything up to it as dropped.
    ks.trim_point = finality_.final_point();
    ks.dropped_upto = OrderKey::Last(finality_.final_point());
    ks.max_duration = ctx_.longest();
  }
  ks.last_active = static_cast<uint32_t>(finality_.advances());
  QueueIdle(key, ks);
}

void KeyStore::ReleaseIdleKeys(absl::FunctionRef<bool()> may_evict) {
  const uint64_t advances = finality_.advances();
  const uint64_t wait = evicting_ ? idle_advances_ : kIdleAdvances;
  // The evicted keys' records go to the spill in one write with the advance: at most
  // kMaxEvictionsPerAdvance of them, and the rest wait for the next advances, so that a burst
  // (the budget first exceeded with a hundred thousand idle keys queued) does not hold the
  // engine thread for the best part of a second.
  EngineStats& stats = ctx_.stats();
  const uint64_t evicted_before = stats.evicted_keys;
  while (!idle_keys_.empty() && idle_keys_.front().first + wait <= advances &&
         stats.evicted_keys - evicted_before < kMaxEvictionsPerAdvance) {
    const KeyId key(idle_keys_.front().second);
    idle_keys_.pop_front();
    KeyState* state = Find(key);
    // A stale entry: the key's state was let go since (ForgetKeys releases fresh ones).
    if (state == nullptr) continue;
    KeyState& ks = *state;
    if (evicting_) {
      ks.idle_queued = false;
      if (static_cast<uint32_t>(advances) - ks.last_active < wait) {
        QueueIdle(key, ks);
        continue;
      }
    }
    if (!ks.readers.empty()) continue;  // queued again when its reads are final
    if (evicting_ && Fresh(ks)) {
      // Only read, never written: nothing a fresh state would not hold. (Without a budget the
      // state stays: making it again at the next read costs more than it frees.)
      table_.Release(key.value(), /*evicted=*/false);
      continue;
    }
    ks.readers.clear();
    // A version not final yet (the wait can be shorter than the delivery's disorder): the key is
    // tried again after another wait, or it would stay in memory until touched again.
    if (evicting_ && spill_.usable() && may_evict() && !Evict(key, ks)) QueueIdle(key, ks);
  }
  if (evicting_) {
    AdaptIdleAdvances();
    // The states of keys once in memory together, and since evicted, give their memory back
    // (no reference to a state is held here).
    if (advances % kIdleAdvances == 0) table_.Compact();
  }
}

void KeyStore::AdaptIdleAdvances() {
  if (finality_.advances() % kIdleAdvances != 0) return;
  const uint64_t evicted = ctx_.stats().evicted_keys - evicted_mark_;
  const uint64_t returned = quick_returns_ - returns_mark_;
  evicted_mark_ = ctx_.stats().evicted_keys;
  returns_mark_ = quick_returns_;
  if (evicted == 0 && returned == 0) return;
  // A soon return costs a lookup in the spill and freed memory only for a while. The horizon of
  // "soon" is fixed: one that grew with the wait would count ever later returns as soon ones,
  // and the wait would grow without end.
  if (returned * 2 > evicted) {
    idle_advances_ = std::min(idle_advances_ * 2, kMaxIdleAdvances);
  } else if (returned * 4 < evicted) {
    idle_advances_ = std::max(idle_advances_ / 2, kMinIdleAdvances);
  }
}

bool KeyStore::Evict(KeyId key, KeyState& ks) {
  if (ks.in_gc || ctx_.h().key(key).is_list) return true;
  EngineStats& stats = ctx_.stats();
  if (ks.versions.empty() && ks.base_in_spill) {
    --leafless_keys_;
    ++stats.evicted_keys;
    base_values_.erase(key.value());
    table_.Release(key.value(), /*evicted=*/true, finality_.advances());
    return true;
  }
  if (ks.versions.size() != 1) return true;
  const OrderKey at = ks.versions.front_key();
  if (at.ts > finality_.final_point()) return false;
  if (ks.base_in_spill) {
    if (!(ks.spilled_base < at) || !ReplaceSpilledBase(key, ks, at.ts)) return true;
  }
  // It expires once a newer version replaces it (ReplaceSpilledBase).
  spill_.Put(key, /*is_list=*/false, at, ks.versions.begin().value(), Timestamp::Max());
  spill_.PutKey(key, SpilledKey{.base = at,
                                .base_value = ks.versions.begin().value().value,
                                .trim_point = std::max(ks.trim_point, at.ts),
                                .dropped_upto = ks.dropped_upto,
                                .max_duration = ks.max_duration});
  ++stats.evicted_keys;
  stats.retained_versions -= ks.versions.size();
  table_.Release(key.value(), /*evicted=*/true, finality_.advances());
  return true;
}

bool KeyStore::ReplaceSpilledBase(KeyId key, KeyState& ks, const Timestamp& next) {
  if (!spill_.Reexpire(key, ks.spilled_base, next)) return false;
  ks.base_in_spill = false;
  base_values_.erase(key.value());
  return true;
}

void KeyStore::MarkBytes(std::vector<uint64_t>& marks) const {
  table_.ForEachState([&](const KeyState& ks) {
    for (auto it = ks.versions.begin(); it != ks.versions.end(); ++it) {
      history::MarkBytes(it.value().value, marks);
    }
    for (auto it = ks.readers.begin(); it != ks.readers.end(); ++it) {
      history::MarkBytes(it.value().observed, marks);
    }
    for (const Value v : ks.base_list) history::MarkBytes(v, marks);
  });
  for (const auto& [key, v] : base_values_) history::MarkBytes(v, marks);
}

void KeyStore::MarkKeys(std::vector<uint64_t>& marks) const {
  marks.resize((table_.size() + 63) / 64, 0);
  for (uint32_t k = 0; k < table_.size(); ++k) {
    const KeyState* ks = table_.Find(k);
    if (ks != nullptr && !Fresh(*ks)) marks[k / 64] |= uint64_t{1} << (k % 64);
  }
}

void KeyStore::ForgetKeys(std::span<const KeyId> keys) {
  if (!evicting_) return;
  for (const KeyId key : keys) {
    if (key.value() >= table_.size()) continue;
    if (const KeyState* ks = table_.Find(key.value()); ks != nullptr) {
      // A fresh state holds nothing: it goes. Any other the caller should have kept (MarkKeys).
      if (!Fresh(*ks)) continue;
      table_.Release(key.value(), /*evicted=*/false);
    }
    table_.MarkMaybeSpilled(key.value());
    ++ctx_.stats().forgotten_keys;
  }
  forgot_keys_ = forgot_keys_ || !keys.empty();
}

void KeyStore::RestoreBase(KeyId key, KeyState& ks, const OrderKey& base, Value v) {
  ks.base_in_spill = true;
  ks.spilled_base = base;
  base_values_[key.value()] = v;
  ++leafless_keys_;
}

bool KeyStore::RestoreEvicted(uint32_t k) {
  if (evicting_) {
    if (table_.slot(k) != KeyTable::Slot::kNone) return false;  // listed twice, or with a state
    // Evicted long ago, as far as AdaptIdleAdvances is concerned.
    table_.MarkEvicted(k, finality_.advances() - (uint64_t{1} << 30));
    return true;
  }
  // Without a budget every state stays in memory.
  if (KeyState& ks = *table_.Find(k); Fresh(ks) && !ks.base_in_spill) {
    Restore(KeyId(k), ks, /*maybe=*/false);
  }
  return false;
}

void KeyStore::RestoreMaybeSpilled(uint32_t k) {
  if (table_.slot(k) == KeyTable::Slot::kNone) table_.MarkMaybeSpilled(k);
}

uint64_t KeyStore::MemoryBytes() const {
  // One small chain leaf per state with a chain.
  constexpr uint64_t kSmallLeaf = 32 + 4 * (sizeof(OrderKey) + sizeof(VersionInfo));
  return table_.MemoryBytes() + key_stamp_.capacity() * sizeof(uint32_t) +
         (table_.resident() - leafless_keys_) * kSmallLeaf +
         idle_keys_.size() * sizeof(std::pair<uint64_t, uint32_t>) +
         base_values_.capacity() * (sizeof(std::pair<uint32_t, Value>) + 1);
}

void KeyStore::CheckInvariants() const {
  ISOWATCH_CHECK(table_.size() == key_stamp_.size(), "a key without a stamp");
  absl::flat_hash_set<uint32_t> idle;
  for (const auto& [advance, key] : idle_keys_) {
    ISOWATCH_CHECK(advance <= finality_.advances(), "an idle entry from a future advance");
    idle.insert(key);
  }
  for (size_t i = 1; i < idle_keys_.size(); ++i) {
    ISOWATCH_CHECK(idle_keys_[i - 1].first <= idle_keys_[i].first, "idle queue out of order");
  }
  uint64_t leafless = 0;
  uint64_t bases = 0;
  uint64_t resident = 0;
  for (uint32_t k = 0; k < table_.size(); ++k) {
    const KeyState* ks = table_.Find(k);
    if (ks == nullptr) continue;
    ++resident;
    const bool has_base = base_values_.contains(k);
    ISOWATCH_CHECK(has_base == ks->base_in_spill, "a base value without a spilled base");
    if (ks->base_in_spill) {
      ++bases;
      if (ks->versions.empty()) ++leafless;
      ISOWATCH_CHECK(ks->trimmed && ks->spilled_base.ts <= ks->trim_point,
                     "a spilled base above the trim point");
    }
    ISOWATCH_CHECK(!evicting_ || !ks->idle_queued || idle.contains(k),
                   "a key queued as idle is not in the idle queue");
  }
  ISOWATCH_CHECK(resident == table_.resident(), "resident key count out of step");
  ISOWATCH_CHECK(bases == base_values_.size(), "a base value of a key not in memory");
  ISOWATCH_CHECK(leafless == leafless_keys_, "leafless key count out of step");
  ISOWATCH_CHECK(evicting_
                     ? idle_advances_ >= kMinIdleAdvances && idle_advances_ <= kMaxIdleAdvances
                     : idle_advances_ == kIdleAdvances,
                 "idle wait out of range");
}

}  // namespace isowatch::engine::internal
