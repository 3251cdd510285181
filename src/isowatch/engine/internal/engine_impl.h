// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/internal/checkpointer.h"
#include "isowatch/engine/internal/collector.h"
#include "isowatch/engine/internal/delivered_set.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/ext_reads.h"
#include "isowatch/engine/internal/finality.h"
#include "isowatch/engine/internal/key_store.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/engine/internal/session_checker.h"
#include "isowatch/engine/internal/snapshot_judge.h"
#include "isowatch/engine/internal/spill_access.h"
#include "isowatch/engine/internal/version_chains.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::engine {

class EnginePeer;

// Invariants (besides each part's, which CheckInvariants checks too):
//  1. Between calls, the engine's arrays reach at most the history's sizes: the delivered set
//     ends at or below its transactions, the key table and the sessions at or below its keys and
//     sessions (Deliver grows them first).
//  2. Every transaction with a pending read or a version in a chain was delivered; Release keeps
//     every transaction with a pending read, in a session's window or with a version in a chain.
//  3. stats() gauges are what the parts hold: retained_txns is the session entries plus the
//     transactions with pending reads plus the pending snapshot transactions.

// The engine's coordinator (docs/engine.md, "The parts of the engine"): takes each arrival
// through the parts in order (finality's bookkeeping, the session, its reads, its versions and
// the writers they overlap, its snapshot), and at each advance of the final point has each part
// act on it (pending reads made final, idle keys released or evicted, snapshot transactions
// judged, versions collected, the spill flushed). Also answers the live history's questions
// (IsFinal, Release, MarkBytes, MarkKeys, ForgetKeys), prefetches ahead of the transaction being
// checked, accounts the memory and runs checkpoints.
//
// Engine-thread only. Owns the parts (by value, built in dependency order); Engine owns it.
class EngineImpl {
 public:
  EngineImpl(const history::History& h, EngineOptions options);
  EngineImpl(const EngineImpl&) = delete;
  EngineImpl& operator=(const EngineImpl&) = delete;

  StreamId AddStream(std::string name);
  void Deliver(StreamId stream, std::span<const TxnId> batch,
               std::optional<history::Timestamp> watermark);
  void CloseStream(StreamId stream);
  void Tick();
  void Finish();
  std::vector<verdict::Violation> TakeFinalViolations() { return ctx_.TakeFinal(); }
  history::Timestamp final_point() const { return finality_.final_point(); }
  bool IsFinal(TxnId id) const;
  bool Release(TxnId id);
  void WillRelease(TxnId id);
  void MarkBytes(std::vector<uint64_t>& marks);
  void MarkKeys(std::vector<uint64_t>& marks) const { keys_.MarkKeys(marks); }
  void ForgetKeys(std::span<const KeyId> keys) { keys_.ForgetKeys(keys); }
  bool PinsKeys() const { return ctx_.options().spill == nullptr; }
  absl::Status SaveCheckpoint(v1::EngineCheckpoint* out) { return checkpointer_.Save(out); }
  absl::Status RestoreCheckpoint(const v1::EngineCheckpoint& c, std::span<const HeldTxn> held);
  const EngineStats& stats();
  void CheckInvariants() const;

 private:
  friend class EnginePeer;

  // Makes room for the transactions, keys and sessions the history added since the last
  // delivery (a live history appended to by the daemon).
  void Grow();
  void DeliverOne(internal::Finality::Stream& s, TxnId id);
  // Has each part act on a raised final point.
  void AdvanceFinality();
  // Whether the engine may still read `id` from the history: it has pending reads, sits in its
  // session's window, or wrote a version still in a chain.
  bool Needs(TxnId id) const;
  // Asks for what Needs(id) will read of a held transaction's writes: the key states, or with
  // `chains` the ends of their version chains (a hint; nothing changes).
  void PrefetchNeeds(TxnId id, bool chains) const;
  // Software prefetch ahead of the transaction being checked, one level per step: its record,
  // then its operations, then the state of its keys, then the ends of their chains, each asked
  // for once the memory it is found through has been asked for a step earlier. (Always inlined:
  // GCC finds a function made only of prefetches free of side effects and drops calls to it.)
  [[gnu::always_inline]] void Prefetch(std::span<const TxnId> batch, size_t i) const;
  // batch[j], if it exists and takes part in the checks.
  const history::Transaction* PrefetchTarget(std::span<const TxnId> batch, size_t j) const;
  // The engine's own accounting of the memory it holds (docs/engine.md, "Memory").
  uint64_t MemoryBytes() const;

  // How many transactions ahead each level is asked for.
  static constexpr size_t kPrefetchRecord = 8;
  static constexpr size_t kPrefetchOps = 6;
  static constexpr size_t kPrefetchState = 4;
  static constexpr size_t kPrefetchChains = 2;

  // The parts, each built on those before it.
  internal::EngineContext ctx_;
  internal::Finality finality_;
  internal::SpillAccess spill_;
  internal::KeyStore keys_;
  internal::SessionChecker sessions_;
  internal::ExtReads reads_;
  internal::SnapshotJudge snapshots_;
  internal::Collector collector_;
  internal::VersionChains versions_;
  internal::DeliveredSet delivered_;
  internal::Checkpointer checkpointer_;
  // The last two transactions WillRelease was told of, the older at will_release_next_.
  std::array<TxnId, 2> will_release_ = {TxnId::Invalid(), TxnId::Invalid()};
  size_t will_release_next_ = 0;
};

}  // namespace isowatch::engine
