// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/ext_reads.h"
#include "isowatch/engine/internal/finality.h"
#include "isowatch/engine/internal/key_state.h"
#include "isowatch/engine/internal/key_store.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/engine/internal/time_queue.h"
#include "isowatch/history/history.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. pending() is the number of entries in the queue: transactions checked by their snapshot,
//     delivered, whose commit was above the final point when they arrived, not judged yet. Each
//     is judged exactly once, when the final point passes its commit, in commit order.
//  2. pending() > 0 implies seen().

// Transactions checked by their PostgreSQL snapshot (docs/engine.md, "Snapshots"): judges each
// once, when the final point passes its commit (every writer it can see has arrived by then):
// EXT against the newest version of each key its snapshot sees, NoConflict against the writers
// committed before it that it does not see. Also judges, at the arrival of a writer with a
// snapshot, the writers with a start that committed after it and overlap it.
//
// Engine-thread only. Owns the queue of transactions waiting for the final point; reads the
// chains (KeyStore) and list snapshots (ExtReads).
class SnapshotJudge {
 public:
  SnapshotJudge(EngineContext& ctx, const Finality& finality, KeyStore& keys, ExtReads& reads)
      : ctx_(ctx), finality_(finality), keys_(keys), reads_(reads) {}
  SnapshotJudge(const SnapshotJudge&) = delete;
  SnapshotJudge& operator=(const SnapshotJudge&) = delete;

  // A transaction checked by its snapshot was delivered: keys' versions stay in memory from now
  // on (snapshot walks read the chains).
  void MarkSeen() { seen_ = true; }
  bool seen() const { return seen_; }
  void set_seen(bool seen) { seen_ = seen; }

  // Transaction `id` (`t`), checked by its snapshot, has arrived and its versions are in the
  // chains: judged now if the final point has passed its commit (a late arrival), else queued.
  void OnArrival(TxnId id, const history::Transaction& t);
  // At an advance of the final point: judges the queued transactions it has passed.
  void JudgeDue() {
    if (pending_ > 0) [[unlikely]] {
      JudgeDueNow();
    }
  }

  // NoConflict for writer `t` with a snapshot, at its arrival, against the writers with a start
  // that committed after it and started before it committed (their rule: they did not see it).
  // The writers before it are judged by its snapshot, at JudgeDue.
  [[gnu::noinline]] void WriterOverlaps(TxnId id, const history::Transaction& t, KeyId key,
                                        const KeyState& ks, const OrderKey& vkey);

  uint64_t pending() const { return pending_; }
  uint64_t MemoryBytes() const { return pending_ * 24; }
  void CheckInvariants() const;

 private:
  void JudgeDueNow();
  // Judges transaction `id`, which has a snapshot, once the final point has passed its commit.
  // A walk that reaches collected state without an answer is a horizon miss.
  void Judge(TxnId id);
  void JudgeRead(TxnId reader, const history::Transaction& t, const OrderKey& vkey,
                 const history::Op& op, std::span<const history::Value> own);

  EngineContext& ctx_;
  const Finality& finality_;
  KeyStore& keys_;
  ExtReads& reads_;
  bool seen_ = false;  // a transaction checked by its snapshot was delivered
  // Transactions with a snapshot, under their commit, until the final point passes it.
  TimeQueue due_queue_;
  uint64_t pending_ = 0;
  std::vector<uint64_t> due_;
  std::vector<TxnId> visible_scratch_;
  std::vector<history::Value> committed_scratch_;
};

}  // namespace isowatch::engine::internal
