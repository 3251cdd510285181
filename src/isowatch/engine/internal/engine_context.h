// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "isowatch/axioms/read_walker.h"
#include "isowatch/axioms/snapshot_rules.h"
#include "isowatch/axioms/write_index.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. The options never change after construction.
//  2. longest() >= commit.physical - start.physical of every checked transaction with a start
//     (SeeTransaction), and never decreases but on a restore.
//  3. While restoring(), Emit drops what it is given (it was reported before the checkpoint);
//     otherwise every violation given to Emit is counted in stats().final_violations and kept,
//     in order, until TakeFinal.

// What every part of the engine reads, and where each reports: the history, the options, the
// counters, the violations made final, the read walker and write index the checks share, the
// longest transaction seen, and the rules that place a transaction in the replay order
// (docs/engine.md, "Order and visibility").
//
// Engine-thread only. Owned by the engine; every part holds a reference. Owns the walker, the
// write index and the violations; not the history, which must outlive it.
class EngineContext {
 public:
  EngineContext(const history::History& h, EngineOptions options)
      : h_(h), options_(std::move(options)), write_index_(h), walker_(h) {}
  EngineContext(const EngineContext&) = delete;
  EngineContext& operator=(const EngineContext&) = delete;

  const history::History& h() const { return h_; }
  const EngineOptions& options() const { return options_; }
  verdict::IsolationLevel level() const { return options_.level; }
  bool si() const { return options_.level == verdict::IsolationLevel::kSnapshotIsolation; }
  EngineStats& stats() { return stats_; }
  const EngineStats& stats() const { return stats_; }
  axioms::WriteIndex& write_index() { return write_index_; }
  axioms::ReadWalker& walker() { return walker_; }

  // The longest transaction seen, in physical timestamp units.
  int64_t longest() const { return longest_; }
  void set_longest(int64_t d) { longest_ = d; }
  void SeeDuration(int64_t d) { longest_ = std::max(longest_, d); }

  // Whether the held transactions of a checkpoint are being taken again (RestoreCheckpoint).
  bool restoring() const { return restoring_; }
  void set_restoring(bool r) { restoring_ = r; }

  // Reports a final violation (invariant 3).
  void Emit(verdict::Violation v) {
    if (restoring_) return;  // reported before the checkpoint
    v.checker = "online";
    v.level = options_.level;
    ++stats_.final_violations;
    final_.push_back(std::move(v));
  }
  std::vector<verdict::Violation> TakeFinal() { return std::exchange(final_, {}); }

  // Whether `t` takes part in the checks: committed with a commit timestamp, and with what its
  // level reads at (a start under SI, unless it has a snapshot).
  bool Participates(const history::Transaction& t) const {
    if (!t.committed() || !t.has_commit) return false;
    return options_.level == verdict::IsolationLevel::kSerializable || t.has_start ||
           h_.has_snapshot(t);
  }

  // Whether `t` is checked by its snapshot (SI only; at SER the snapshot is not used).
  bool BySnapshot(const history::Transaction& t) const {
    return t.xid_slot != 0 && si() && h_.has_snapshot(t);
  }

  // The point at which `t` reads: its start (SI) or its commit (SER). Under both levels a
  // transaction that starts and commits at the same timestamp t comes after the commits at t (a
  // write committed at t is visible to a transaction that starts at t).
  OrderKey ReadPoint(TxnId id, const history::Transaction& t) const {
    if (!si()) return {t.commit, AtOnePoint(t) ? kPointPhase : kCommitPhase, id.value()};
    return {t.start, t.start == t.commit ? kPointPhase : kStartPhase, id.value()};
  }

  // Where `t`'s versions go in a chain. A transaction with a snapshot (no start) is a commit, at
  // either level.
  static OrderKey VersionKey(TxnId id, const history::Transaction& t) {
    return {t.commit, AtOnePoint(t) ? kPointPhase : kCommitPhase, id.value()};
  }

  // Appends `writer`'s appends to `key`, in program order, to `out`; only those before op
  // `limit` if given.
  void AppendsOf(TxnId writer, KeyId key, std::vector<history::Value>* out,
                 size_t limit = static_cast<size_t>(-1)) const {
    axioms::AppendsOf(h_, writer, key, out, limit);
  }

 private:
  static bool AtOnePoint(const history::Transaction& t) {
    return t.has_start && t.start == t.commit;
  }

  const history::History& h_;
  const EngineOptions options_;
  EngineStats stats_;
  axioms::WriteIndex write_index_;
  axioms::ReadWalker walker_;
  std::vector<verdict::Violation> final_;
  int64_t longest_ = 0;
  bool restoring_ = false;
};

}  // namespace isowatch::engine::internal
