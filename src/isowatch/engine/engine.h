// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "isowatch/common/clock.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/history.h"
#include "isowatch/history/live_history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::v1 {
class EngineCheckpoint;
}  // namespace isowatch::v1

namespace isowatch::engine {

// Identifies a delivering stream (a collector) to the engine.
using StreamId = uint32_t;

struct EngineOptions {
  verdict::IsolationLevel level = verdict::IsolationLevel::kSnapshotIsolation;
  // Streams that never send a watermark: a provisional verdict becomes final this long after the
  // transaction arrived (Aion's timeout).
  int64_t finality_timeout_ms = 5000;
  // Source of time for the timeout; nullptr = the system clock.
  const common::Clock* clock = nullptr;
  // Versions are collected only below (final point - retention), in the physical unit of the
  // timestamps: room for transactions whose start lies that far below the final point when they
  // arrive. Longer ones are still checked against what is retained and counted as horizon misses.
  int64_t retention = 0;
  // Where collected versions go (docs/spill-format.md); nullptr = they are dropped. With a spill,
  // a check that needs a snapshot older than memory holds reloads it, so there are no horizon
  // misses. Not owned; must outlive the engine.
  VersionSpill* spill = nullptr;
  // With a spill, also write to it what the normal collection drops (versions below the newest
  // one a transaction no longer than `retention` can need): then a transaction of any length is
  // checked exactly, at the cost of writing every version once. Otherwise the spill receives
  // only what a memory budget pushes out of memory.
  bool spill_collected = false;
  // Bytes of engine state (EngineStats::memory_bytes) above which every version older than the
  // newest one at or below the final point is spilled rather than kept for `retention`. 0 = no
  // budget. Needs `spill`.
  uint64_t memory_budget = 0;
  // With a spill: how far below the final point, in the physical unit of the timestamps, the
  // spill keeps what checks of older snapshots could need (never less than the normal
  // collection keeps: `retention` and the longest transaction seen). Below that the spill drops
  // versions (docs/spill-format.md, "Pruning"), and a check that would need one is a horizon
  // miss. 0 = the spill keeps everything for the life of the process.
  int64_t spill_retention = 0;
  // Called with the duration, in seconds, of each write of collected versions to the spill (the
  // pause it adds to a delivery). May be empty.
  std::function<void(double)> on_spill_pause;
  // Called with the duration, in seconds, of each check that read the spill (a reload). May be
  // empty.
  std::function<void(double)> on_reload;
};

// Counters and gauges of the engine. Plain data.
struct EngineStats {
  uint64_t delivered = 0;       // transactions delivered (any status)
  uint64_t checked = 0;         // committed transactions checked
  uint64_t duplicates = 0;      // transactions delivered twice (ignored)
  uint64_t late_arrivals = 0;   // commit timestamp at or below its stream's passed watermark
  uint64_t horizon_misses = 0;  // checks that needed state already collected
  uint64_t flip_flops = 0;      // provisional EXT verdicts that changed (never reported)
  // Committed transactions whose commit timestamp was at or below the final point when they
  // arrived: the verdicts they could reverse were final, reported, and are not revisited. 0 with
  // honest watermarks (docs/engine.md, "Finality").
  uint64_t below_final_arrivals = 0;
  uint64_t final_violations = 0;  // violations reported
  // Checks of transactions with a snapshot left unjudged because a writer they would judge has
  // no xid (docs/engine.md, "Snapshots"); ChronosStats::snapshot_unjudged offline.
  uint64_t snapshot_unjudged = 0;
  // Committed transactions left out of their session's checks: their session position lay more
  // than 16,384 positions past the first one of their session not delivered yet
  // (docs/engine.md, "Session positions").
  uint64_t session_unjudged = 0;
  // Gauges: what the engine holds now.
  uint64_t provisional_reads = 0;       // external reads whose verdict is not final yet
  uint64_t provisional_violations = 0;  // of which currently wrong
  uint64_t retained_versions = 0;
  uint64_t retained_txns = 0;
  uint64_t pending_snapshots = 0;  // transactions with a snapshot waiting for the final point
  // Spill (EngineOptions::spill).
  uint64_t spilled_versions = 0;    // versions written to the spill
  uint64_t reloads = 0;             // checks that read the spill
  uint64_t spill_errors = 0;        // spill reads or writes that failed (the spill is then off)
  uint64_t budget_collections = 0;  // collections cut at the final point by the memory budget
  uint64_t spill_bytes = 0;         // gauge: bytes the spill holds (estimate)
  uint64_t spill_pruned = 0;        // versions the spill dropped (EngineOptions::spill_retention)
  // Gauge: byte strings of the history that spilled versions hold, which the live history must
  // keep while the spill may still be read for them (Engine::MarkBytes drops the expired ones).
  uint64_t spill_pinned_strings = 0;
  // Cold register keys whose last version and state the memory budget moved to the spill, and
  // evicted keys whose state a read or write brought back.
  uint64_t evicted_keys = 0;
  uint64_t restored_keys = 0;
  // Keys the history forgot (Engine::ForgetKeys); first reads or writes of keys interned since
  // that looked for a state in the spill and found one (a forgotten key back: also counted in
  // restored_keys) or none (a new key).
  uint64_t forgotten_keys = 0;
  uint64_t forgotten_returns = 0;
  uint64_t new_key_lookups = 0;
  // Gauge: keys whose state memory holds (under a memory budget, not an evicted key, nor one
  // only ever read once its reads are final and it has stayed idle).
  uint64_t resident_keys = 0;
  // Gauge: how many advances of the final point a key must stay idle before it is evicted
  // (adapts between 64 and 65,536 to how often evicted keys come back).
  uint64_t eviction_idle_advances = 0;
  // Gauge: bytes of engine state in memory, by the engine's own accounting (docs/engine.md,
  // "Memory"): key states, chain entries, pending reads, list bases, session windows and the
  // per-transaction arrays. Excludes the History the engine reads.
  uint64_t memory_bytes = 0;
};

// A transaction a restored engine takes again (Engine::RestoreCheckpoint), and its stream.
struct HeldTxn {
  StreamId stream = 0;
  TxnId id;
};

class EngineImpl;
class EnginePeer;

// The name under which the engine's spill keeps `key` of `h` (spill_format::EncodeIntKeyName,
// EncodeBytesKeyName).
std::string SpillKeyName(const history::History& h, KeyId key);

// The online checker (docs/engine.md): accepts the transactions of a history in any order, a
// batch at a time, keeps per key the chain of committed versions and per key the external reads
// whose verdict is not final yet, re-checks exactly what each arrival can change, and reports a
// violation only once it is final: when the minimum watermark over the live streams passes it (or
// its timeout expires, for streams without watermarks). Its final violation set equals the one
// Chronos reports for the same history, whatever the arrival order.
//
// Transactions are named by their TxnId in `history`, which holds their contents and interns
// keys and values; the engine keeps its own state per transaction only until it is final.
// A live history it reads (history::LiveHistory) may forget what the engine no longer needs: the
// engine registers there as a holder of the transactions, keys and byte strings it keeps.
//
// Engine-thread only (thread-compatible).
class Engine final : public history::HistoryHolder {
 public:
  // REQUIRES: `history` outlives the engine.
  Engine(const history::History& history, EngineOptions options);
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Declares a stream. Until it sends a watermark, its transactions finalise by timeout.
  StreamId AddStream(std::string name);

  // Delivers `batch` from `stream`, then applies `watermark` if given: the stream's promise that
  // every transaction with commit timestamp <= watermark has now been delivered. A watermark
  // below the stream's previous one is ignored.
  void Deliver(StreamId stream, std::span<const TxnId> batch,
               std::optional<history::Timestamp> watermark = std::nullopt);

  // The stream has ended: it no longer holds finality back.
  void CloseStream(StreamId stream);

  // Finalises whatever the clock says has timed out. Call it periodically.
  void Tick();

  // Ends the run: every stream is closed and every verdict becomes final.
  void Finish();

  // Removes and returns the violations that became final since the last call, in the order
  // they became final.
  std::vector<verdict::Violation> TakeFinalViolations();

  const EngineStats& stats() const;

  // The final point: every verdict of a transaction reading at or below it is final.
  history::Timestamp final_point() const;

  // Whether transaction `id` has been delivered and nothing about it can change any more: its
  // reads are final. A live history may then release it (HistoryBuilder::ReleaseLive).
  bool IsFinal(TxnId id) const override;
  // The history is about to forget final transaction `id`. Returns whether the engine still
  // reads it (it is in a chain of versions or in its session's window); if not, the engine
  // drops what it keeps about it for explanations. Ask again about a retired transaction at each
  // release: the answer turns false once its versions are collected.
  // REQUIRES: IsFinal(id).
  bool Release(TxnId id) override;
  // A hint that Release(id) is asked soon (a few calls ahead, as HistoryBuilder::ReleaseLive's
  // `ahead` tells): the engine asks for the memory it will read then. Changes nothing else.
  void WillRelease(TxnId id) override;
  // Adds to `marks` (history::MarkBytes) every byte string of the history the engine holds
  // outside the history's transactions: in its chains, list bases and evicted keys' bases, and
  // in the spill's versions that can still be read (HistoryBuilder::CollectBytes). The spill's
  // strings are tracked under a memory budget only (EngineOptions::memory_budget): call it only
  // then.
  void MarkBytes(std::vector<uint64_t>& marks) override;
  // Sets in `marks` (a bit per key id, grown to the key table) the bit of every key whose state
  // in memory holds anything a fresh one would not: the keys the history must not forget
  // (HistoryBuilder::CollectKeys).
  void MarkKeys(std::vector<uint64_t>& marks) const override;
  // Without a spill an evicted key's state would have nowhere to wait for it: keys stay.
  bool PinsKeys() const override;
  // The history forgot `keys` (HistoryBuilder::CollectKeys, after MarkKeys): their ids will name
  // other keys. The spill keeps the states of those that were evicted, by name, and from now on
  // the first read or write of a key the history interns (under a forgotten id or a new one)
  // looks for its state there: a forgotten key that comes back is checked as if it had stayed
  // (docs/engine.md, "Forgetting keys"). A key's state in memory that holds nothing goes too.
  // Does nothing without a memory budget and a spill. REQUIRES: none of `keys` was marked by
  // MarkKeys since the keys were last delivered (such a key keeps its state, which the id's next
  // key would then inherit).
  void ForgetKeys(std::span<const KeyId> keys) override;

  // Checkpoints (docs/engine.md, "Checkpoints"). Writes to `out` what a restarted engine needs
  // besides the history it reads (as it is now) and the spill (as it is now, flushed here):
  // streams and finality, the state each key keeps beyond the versions and pending reads of the
  // transactions the history still holds, the evicted keys, the sessions' windows. Call between
  // deliveries, after taking the final violations. FailedPrecondition if the spill has failed
  // (its contents are then incomplete).
  absl::Status SaveCheckpoint(v1::EngineCheckpoint* out);
  // Makes this engine, fresh (no stream, nothing delivered) and reading a history restored as it
  // was at the checkpoint, with a spill restored as it was then, the engine that saved
  // `checkpoint`: takes its state, then takes `held` again, every transaction the history holds
  // (in any order, with the stream that delivered it), without reporting again what was
  // reported before the checkpoint. Event counters start from zero. InvalidArgument if the
  // checkpoint does not fit this engine (level, sizes; evicted keys without a spill).
  absl::Status RestoreCheckpoint(const v1::EngineCheckpoint& checkpoint,
                                 std::span<const HeldTxn> held);

  // Checks the invariants every part of the engine states (src/isowatch/engine/internal/*.h),
  // aborting on the first one broken (ISOWATCH_CHECK). O(state): for tests, between calls. Does
  // nothing in builds with NDEBUG.
  void CheckInvariantsForTest() const;

 private:
  friend class EnginePeer;  // tests/unit/engine: reaches the parts to break an invariant

  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace isowatch::engine
