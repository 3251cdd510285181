// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/version_chains.h"

#include <span>
#include <string>
#include <utility>

#include "isowatch/common/check.h"
#include "isowatch/engine/version_spill.h"

namespace isowatch::engine::internal {

using history::Transaction;

void VersionChains::CollectedOverlaps(TxnId id, const Transaction& t, KeyId key, const KeyState& ks,
                                      const OrderKey& vkey, int64_t horizon) {
  if (!spill_.present() || !SpilledOverlaps(id, t, key, ks, vkey, horizon)) {
    ++ctx_.stats().horizon_misses;
  }
}

bool VersionChains::SpilledOverlaps(TxnId id, const Transaction& t, KeyId key, const KeyState& ks,
                                    const OrderKey& vkey, int64_t horizon) {
  if (spill_.broken()) return false;
  const history::History& h = ctx_.h();
  const SpillAccess::ReloadTimer timer(spill_);
  absl::Status s = spill_.ScanAfter(key, OrderKey::Last(t.start), [&](const SpilledVersion& u) {
    if (u.at.ts.physical > horizon) return false;
    if (u.at.txn() != id.value() && u.writer_start < t.commit) {
      const TxnId other(u.at.txn());
      const bool u_first = u.at < vkey;
      // The other writer may be one the history no longer holds: the spill has its name.
      std::pair<TxnId, std::string> released{other, u.writer_name};
      ctx_.Emit(axioms::ExplainNoConflict(h, u_first ? other : id, u_first ? id : other, key,
                                          h.has_txn(other)
                                              ? std::span<const std::pair<TxnId, std::string>>()
                                              : std::span(&released, 1)));
    }
    return true;
  });
  if (!s.ok()) return spill_.Failed(s);
  // Complete unless a writer committed after t's start was dropped rather than spilled, or
  // pruned from the spill (every version committed after a start above the prune point is kept:
  // it expires later still).
  return ks.dropped_upto.ts <= t.start && spill_.pruned_point() <= t.start;
}

void VersionChains::Reinsert(TxnId id, const absl::flat_hash_map<uint32_t, OrderKey>& fronts) {
  const Transaction& t = ctx_.h().txn(id);
  if (!ctx_.Participates(t)) return;
  const OrderKey vkey = EngineContext::VersionKey(id, t);
  keys_.ForEachWrite(id, [&](KeyId key, history::Value value) {
    const auto front = fronts.find(key.value());
    if (front == fronts.end() || vkey < front->second) return;
    KeyState* ks = keys_.Find(key);
    if (!ISOWATCH_BUG(ks != nullptr, "a restored key with versions has no state")) return;
    keys_.WillInsertVersion(*ks);
    ks->versions.insert(vkey, VersionInfo{value});
    ++ctx_.stats().retained_versions;
    collector_.ScheduleTrim(key, *ks);
  });
}

uint64_t VersionChains::MemoryBytes() const {
  // A version twice over: a leaf off the tree's edges is at least half full.
  constexpr uint64_t kVersionEntry = sizeof(OrderKey) + sizeof(VersionInfo);
  return ctx_.stats().retained_versions * 2 * kVersionEntry;
}

void VersionChains::CheckInvariants() const {
  const history::History& h = ctx_.h();
  uint64_t versions = 0;
  for (uint32_t k = 0; k < keys_.size(); ++k) {
    const KeyState* ks = keys_.table().Find(k);
    if (ks == nullptr) continue;
    for (auto it = ks->versions.begin(); it != ks->versions.end(); ++it) {
      ++versions;
      const TxnId writer(it.key().txn());
      ISOWATCH_CHECK(writer.value() < h.size() && h.has_txn(writer),
                     "a version's writer is not in the history");
      const Transaction& w = h.txn(writer);
      ISOWATCH_CHECK(ctx_.Participates(w), "a version of a transaction that takes no part");
      ISOWATCH_CHECK(EngineContext::VersionKey(writer, w) == it.key(),
                     "a version is not under its writer's version key");
      if (ctx_.si() && w.has_start) {
        ISOWATCH_CHECK(ks->max_duration >= w.commit.physical - w.start.physical,
                       "a key's max_duration is below one of its writers'");
      }
    }
  }
  ISOWATCH_CHECK(versions == ctx_.stats().retained_versions, "retained_versions out of step");
}

}  // namespace isowatch::engine::internal
