// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/collector.h"

#include <algorithm>

#include "isowatch/common/check.h"

namespace isowatch::engine::internal {

using history::Timestamp;

void Collector::Collect(absl::FunctionRef<uint64_t()> memory_bytes) {
  const EngineOptions& options = ctx_.options();
  // A transaction still to come commits after the final point and starts, if it is no longer
  // than the longest seen so far (or the configured retention), after the normal point.
  const Timestamp normal = finality_.BelowFinal(std::max(options.retention, ctx_.longest()));
  if (spill_.present() && options.spill_retention > 0) {
    // Lets the spill drop what only checks of snapshots more than spill_retention below the
    // final point could need, and never what the normal collection point keeps.
    spill_.Prune(std::min(normal, finality_.BelowFinal(options.spill_retention)));
  }
  Timestamp g = normal;
  if (spill_.usable() && options.memory_budget > 0 && memory_bytes() > options.memory_budget) {
    // Over budget: keep in memory only what reads above the final point can need (for a register
    // the newest version at or below it); what the normal collection point would have kept goes
    // to the spill.
    g = finality_.final_point();
    ++ctx_.stats().budget_collections;
  }
  if (g == Timestamp::Min()) return;
  due_.clear();
  // A key in the queue keeps its state (neither eviction nor a fresh state lets it go).
  queue_.TakeUpTo(g, [this](uint64_t k) {
    const KeyId key(static_cast<uint32_t>(k));
    KeyState* ks = keys_.Find(key);
    if (!ISOWATCH_BUG(ks != nullptr, "a key due for collection has no state")) return;
    ks->in_gc = false;
    due_.push_back(key);
  });
  KeyTable& table = keys_.table();
  for (size_t i = 0; i < due_.size(); ++i) {
    if (i + 2 < due_.size()) table.Find(due_[i + 2].value())->PrefetchState();
    if (i + 1 < due_.size()) table.Find(due_[i + 1].value())->versions.PrefetchEnds();
    const KeyId key = due_[i];
    KeyState& ks = *table.Find(key.value());
    Trim(key, ks, g, normal);
    ScheduleTrim(key, ks);
    keys_.QueueIfEvictable(key, ks);
  }
}

void Collector::Trim(KeyId key, KeyState& ks, const Timestamp& g, const Timestamp& normal) {
  // The first version above g: usually among the first few.
  auto last = ks.versions.begin();
  const auto end = ks.versions.end();
  for (int i = 0; i < 8 && last != end && last.key().ts <= g; ++i) ++last;
  if (last != end && last.key().ts <= g) last = ks.versions.upper_bound(OrderKey::Last(g));
  if (last == ks.versions.begin()) return;
  const bool is_list = ctx_.h().key(key).is_list;
  auto keep = last;
  if (!is_list) --keep;
  if (keep == ks.versions.begin()) return;
  if (spill_.usable()) {
    for (auto it = ks.versions.begin(); it != keep; ++it) {
      if (!ctx_.options().spill_collected && it.key().ts <= normal) {
        auto next = it;
        ++next;
        // A register's newest version at or below `normal` is still needed above it.
        const bool needed = !is_list && (next == end || next.key().ts > normal);
        if (!needed) {
          ks.dropped_upto = std::max(ks.dropped_upto, it.key());
          continue;
        }
      }
      Timestamp expires = it.key().ts;
      if (!is_list) {
        auto next = it;
        ++next;  // exists: `keep` comes after `it`
        expires = next.key().ts;
      }
      spill_.Put(key, is_list, it.key(), it.value(), expires);
    }
  }
  if (is_list) {
    const size_t before = ks.base_list.size();
    if (!ks.trimmed) {
      auto init = ctx_.h().InitialList(key);
      ks.base_list.assign(init.begin(), init.end());
    }
    for (auto it = ks.versions.begin(); it != keep; ++it) {
      ctx_.AppendsOf(TxnId(it.key().txn()), key, &ks.base_list);
    }
    base_list_values_ += ks.base_list.size() - before;
  }

  ctx_.stats().retained_versions -= ks.versions.erase_prefix(keep);
  ks.trimmed = true;
  ks.trim_point = std::max(ks.trim_point, g);
  // A version newer than the spilled base is now the newest at or below g: reads after it never
  // see the base again, and those before it are late ones, checked from the spill.
  if (ks.base_in_spill && ks.spilled_base < ks.versions.front_key() && !spill_.broken()) {
    keys_.ReplaceSpilledBase(key, ks, ks.versions.front_key().ts);
  }
}

void Collector::CheckInvariants() const {
  uint64_t queued = 0;
  uint64_t base_values = 0;
  for (uint32_t k = 0; k < keys_.size(); ++k) {
    const KeyState* ks = keys_.table().Find(k);
    if (ks == nullptr) continue;
    queued += ks->in_gc ? 1 : 0;
    base_values += ks->base_list.size();
    const bool is_list = ctx_.h().key(KeyId(k)).is_list;
    ISOWATCH_CHECK(ks->in_gc || ks->versions.size() < (is_list ? 1U : 2U),
                   "a key with versions to collect is not in the collection queue");
    if (!ks->trimmed) {
      ISOWATCH_CHECK(ks->base_list.empty() && ks->trim_point == Timestamp::Min() &&
                         ks->dropped_upto == kBeforeAll,
                     "a key that was never trimmed has dropped something");
    } else {
      ISOWATCH_CHECK(ks->dropped_upto.ts <= ks->trim_point, "a version dropped above trim_point");
    }
  }
  ISOWATCH_CHECK(queued == queue_.size(), "the collection queue and in_gc disagree");
  ISOWATCH_CHECK(base_values == base_list_values_, "base_list_values out of step");
}

}  // namespace isowatch::engine::internal
