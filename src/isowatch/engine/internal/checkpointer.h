// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

#include "isowatch/engine/engine.h"
#include "isowatch/engine/internal/collector.h"
#include "isowatch/engine/internal/delivered_set.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/finality.h"
#include "isowatch/engine/internal/key_store.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/engine/internal/session_checker.h"
#include "isowatch/engine/internal/snapshot_judge.h"
#include "isowatch/engine/internal/spill_access.h"

namespace isowatch::v1 {
class EngineCheckpoint;
}  // namespace isowatch::v1

namespace isowatch::engine::internal {

// Invariants:
//  1. Save writes only what the history's held transactions cannot bring back (docs/engine.md,
//     "Checkpoints"); Apply sets exactly that, after Validate accepted the whole checkpoint, so a
//     checkpoint that does not fit leaves the engine untouched.
//  2. After Apply, every key with a `front` has its state in memory, and the final point is not
//     yet recomputed: the engine advances it, puts the chains back and takes the held
//     transactions again.

// The engine's checkpoints (proto/isowatch/v1/checkpoint.proto, EngineCheckpoint): saves and
// restores the state of the parts that the transactions the history still holds do not carry:
// streams, the longest transaction, the prune point and pins, sessions' bases, what was
// delivered, and per key what collection and the spill left in it. Does not put the chains and
// pending reads back: the engine does, from the held transactions.
//
// Engine-thread only. Owns nothing; reads and sets the parts it is given.
class Checkpointer {
 public:
  Checkpointer(EngineContext& ctx, Finality& finality, SpillAccess& spill, KeyStore& keys,
               SessionChecker& sessions, SnapshotJudge& snapshots, Collector& collector,
               DeliveredSet& delivered)
      : ctx_(ctx),
        finality_(finality),
        spill_(spill),
        keys_(keys),
        sessions_(sessions),
        snapshots_(snapshots),
        collector_(collector),
        delivered_(delivered) {}
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Engine::SaveCheckpoint: flushes the spill, then writes the state to `out`.
  absl::Status Save(v1::EngineCheckpoint* out);

  // Engine::RestoreCheckpoint, first half: whether `c` and `held` fit this engine, fresh
  // (InvalidArgument, or FailedPrecondition for evicted or forgotten keys this engine cannot
  // look up). Changes nothing.
  absl::Status Validate(const v1::EngineCheckpoint& c, std::span<const HeldTxn> held) const;
  // Second half, once the engine has grown to the history: sets the parts' state from `c`, and
  // into `fronts` each key's oldest version in memory at the checkpoint. Returns the number of
  // keys marked evicted. REQUIRES: Validate(c, held) is OK.
  uint64_t Apply(const v1::EngineCheckpoint& c, std::span<const HeldTxn> held,
                 absl::flat_hash_map<uint32_t, OrderKey>* fronts);

 private:
  // Transactions below the history's first were released, so delivered, but for the retired
  // ones among the held.
  uint64_t DeliveredBase(std::span<const HeldTxn> held) const;

  EngineContext& ctx_;
  Finality& finality_;
  SpillAccess& spill_;
  KeyStore& keys_;
  SessionChecker& sessions_;
  SnapshotJudge& snapshots_;
  Collector& collector_;
  DeliveredSet& delivered_;
};

}  // namespace isowatch::engine::internal
