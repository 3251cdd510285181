// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"

#include "isowatch/axioms/explain.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/collector.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/ext_reads.h"
#include "isowatch/engine/internal/key_state.h"
#include "isowatch/engine/internal/key_store.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/engine/internal/snapshot_judge.h"
#include "isowatch/engine/internal/spill_access.h"
#include "isowatch/history/history.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. Every version in a chain was written by a transaction the history holds and that takes
//     part in the checks, under its VersionKey; stats' retained_versions counts them.
//  2. (SI) A key's max_duration is at least commit - start of every version with a start ever
//     inserted into its chain.
//  3. A NoConflict pair is reported once, when its second member arrives, as [first in commit
//     order, other].

// The per-key chains of committed versions, and the NoConflict axiom (docs/engine.md, "What an
// arrival re-checks", cases 2 and 3): inserts each arrival's versions, reports the writers they
// overlap (from memory, or from the spill for collected ones), and has the pending reads the new
// version can change re-judged (ExtReads). Writers with a PostgreSQL snapshot are judged by
// SnapshotJudge.
//
// Engine-thread only. Owns nothing: the chains live in the key states (KeyStore).
class VersionChains {
 public:
  VersionChains(EngineContext& ctx, SpillAccess& spill, KeyStore& keys, ExtReads& reads,
                SnapshotJudge& snapshots, Collector& collector)
      : ctx_(ctx),
        spill_(spill),
        keys_(keys),
        reads_(reads),
        snapshots_(snapshots),
        collector_(collector) {}
  VersionChains(const VersionChains&) = delete;
  VersionChains& operator=(const VersionChains&) = delete;

  // Inserts the version `id` (`t`) wrote to `key` with final value `value` (registers), after
  // checking NoConflict against the writers it overlaps.
  void Insert(TxnId id, const history::Transaction& t, KeyId key, history::Value value) {
    KeyState& ks = keys_.State(key);
    const OrderKey vkey = EngineContext::VersionKey(id, t);
    if (ctx_.si() && !t.has_start) [[unlikely]] {
      snapshots_.WriterOverlaps(id, t, key, ks, vkey);
    } else if (ctx_.si()) {
      // Overlapping writers U: U.commit > t.start and U.start < t.commit. A writer that started
      // before t.commit commits before t.commit + max_duration, which bounds the scan. A writer
      // with a snapshot (no start) overlaps if it committed first (t did not see it); one that
      // committed after t judges the pair by its snapshot (SnapshotJudge).
      const int64_t duration = t.commit.physical - t.start.physical;
      const int64_t horizon = t.commit.physical + std::max(ks.max_duration, duration);
      if (ks.trimmed && t.start < ks.trim_point) CollectedOverlaps(id, t, key, ks, vkey, horizon);
      // Usually every version of the key committed before t started: nothing to scan.
      auto it = ks.versions.end();
      if (!ks.versions.empty() && ks.versions.back_key().ts > t.start) {
        it = ks.versions.upper_bound(OrderKey::Last(t.start));
      }
      for (; it != ks.versions.end() && it.key().ts.physical <= horizon; ++it) {
        if (it.key().ts <= t.start || it.key().txn() == id.value()) continue;
        const history::Transaction& other = ctx_.h().txn(TxnId(it.key().txn()));
        const bool u_first = it.key() < vkey;
        if (other.has_start ? other.start < t.commit : u_first) {
          const TxnId u(it.key().txn());
          ctx_.Emit(axioms::ExplainNoConflict(ctx_.h(), u_first ? u : id, u_first ? id : u, key));
        }
      }
      ks.max_duration = std::max(ks.max_duration, duration);
    }
    keys_.WillInsertVersion(ks);
    auto pos = ks.versions.insert(vkey, VersionInfo{value});
    ++ctx_.stats().retained_versions;
    collector_.ScheduleTrim(key, ks);
    keys_.Touch(ks);
    keys_.QueueIfEvictable(key, ks);
    reads_.Recheck(key, ks, vkey, pos, value);
  }

  // RestoreCheckpoint: puts back in the chains the versions `id` wrote that were there at the
  // checkpoint (those at or after their key's `front`), without any check.
  void Reinsert(TxnId id, const absl::flat_hash_map<uint32_t, OrderKey>& fronts);

  uint64_t MemoryBytes() const;
  void CheckInvariants() const;

 private:
  // Some writers overlapping `t` may have been collected: they are in the spill, or, without
  // one, the check is a horizon miss.
  [[gnu::noinline, gnu::cold]] void CollectedOverlaps(TxnId id, const history::Transaction& t,
                                                      KeyId key, const KeyState& ks,
                                                      const OrderKey& vkey, int64_t horizon);
  // Reports the writers of `key` in the spill whose intervals overlap writer `t`'s (SI
  // NoConflict). False if the spill could not be read, or may miss some.
  bool SpilledOverlaps(TxnId id, const history::Transaction& t, KeyId key, const KeyState& ks,
                       const OrderKey& vkey, int64_t horizon);

  EngineContext& ctx_;
  SpillAccess& spill_;
  KeyStore& keys_;
  ExtReads& reads_;
  SnapshotJudge& snapshots_;
  Collector& collector_;
};

}  // namespace isowatch::engine::internal
