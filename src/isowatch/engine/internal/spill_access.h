// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/key_state.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. broken() implies a spill. Once broken, the spill is neither read nor written again, and
//     every check that would need it is a horizon miss.
//  2. pruned_point() never decreases but on a restore; the spill has been told to prune up to
//     it, and never above the normal collection point of the advance that set it.
//  3. Pins are kept only under a memory budget. Each counts the spilled versions holding its byte
//     string that never expire (`unbounded` >= 0) and the latest expiry of the others.
//  4. writes() counts the versions written or written again since construction.

// The engine's side of the version spill (docs/engine.md, "Spill"): every read and write of it
// under the key's spill name, what a failure does (the spill is then off), the prune point, the
// byte strings the spilled versions pin in the live history (docs/engine.md, "Byte strings"),
// and the timing of reloads and flushes. Decides nothing about what is spilled: collection and
// eviction do.
//
// Engine-thread only. Does not own the spill (EngineOptions::spill); owns the pins.
class SpillAccess {
 public:
  explicit SpillAccess(EngineContext& ctx) : ctx_(ctx), spill_(ctx.options().spill) {}
  SpillAccess(const SpillAccess&) = delete;
  SpillAccess& operator=(const SpillAccess&) = delete;

  // The byte strings of spilled versions a live history must keep, by pool index: `unbounded`
  // versions that never expire (a key's spilled base until a newer version follows it; every
  // version when nothing is pruned), and the latest expiry of the others.
  struct Pin {
    int64_t unbounded = 0;
    history::Timestamp expires = history::Timestamp::Min();
  };

  // Counts a reload (a check that reads the spill) and, with EngineOptions::on_reload, times it.
  class ReloadTimer {
   public:
    explicit ReloadTimer(SpillAccess& s) : s_(s) {
      ++s_.ctx_.stats().reloads;
      if (s_.ctx_.options().on_reload) start_ = std::chrono::steady_clock::now();
    }
    ~ReloadTimer() {
      if (!s_.ctx_.options().on_reload) return;
      s_.ctx_.options().on_reload(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    ReloadTimer(const ReloadTimer&) = delete;
    ReloadTimer& operator=(const ReloadTimer&) = delete;

   private:
    SpillAccess& s_;
    std::chrono::steady_clock::time_point start_;
  };

  // Whether there is a spill (broken or not), and whether it is still used.
  bool present() const { return spill_ != nullptr; }
  bool broken() const { return broken_; }
  bool usable() const { return spill_ != nullptr && !broken_; }
  // The spill may have dropped versions that expire at or before it (Prune).
  history::Timestamp pruned_point() const { return pruned_point_; }
  uint64_t writes() const { return ctx_.stats().spilled_versions + rewrites_; }

  // A failed spill read or write: counted and logged once; the spill is off from then on (the
  // checks that need it go unjudged, as horizon misses). Returns false.
  [[gnu::cold]] bool Failed(const absl::Status& s);

  // The spill's calls, under `key`'s spill name (SpillKeyName). REQUIRES: present().
  absl::StatusOr<std::optional<SpilledVersion>> NewestBefore(KeyId key, const OrderKey& point);
  absl::Status ScanAfter(KeyId key, const OrderKey& after,
                         absl::FunctionRef<bool(const SpilledVersion&)> fn) {
    return spill_->ScanAfter(Name(key), after, fn);
  }
  // Reads into `record` the spilled state of `key` (SpilledKey; nullopt if the spill holds none),
  // counted and timed as a reload. False if the spill could not answer (broken, or it failed
  // now). REQUIRES: present().
  bool FindKey(KeyId key, std::optional<SpilledKey>* record);
  void PutKey(KeyId key, const SpilledKey& record) { spill_->PutKey(Name(key), record); }

  // Writes the in-memory version `at` of `key` to the spill, with what a check needs without its
  // writer's record (SpilledVersion), expiring at `expires` (Max: never). REQUIRES: usable().
  void Put(KeyId key, bool is_list, const OrderKey& at, const VersionInfo& info,
           const history::Timestamp& expires);
  // Writes spilled version `at` of `key` again, expiring at `expires`, if the spill holds it.
  // False if the spill failed. REQUIRES: usable().
  bool Reexpire(KeyId key, const OrderKey& at, const history::Timestamp& expires);

  // Lets the spill drop the versions that expire at or before `p`, if above the prune point.
  void Prune(const history::Timestamp& p);
  // RestoreCheckpoint: the prune point saved, told to the spill again.
  void RestorePrunedPoint(const history::Timestamp& p);

  // Makes what was written since `writes_before` (writes()) visible to reads, timing the flush
  // (EngineOptions::on_spill_pause).
  void FlushIfWritten(uint64_t writes_before);
  // Flushes before a checkpoint: FailedPrecondition if the spill has failed before, the flush's
  // error if it fails now.
  absl::Status FlushForCheckpoint();

  // Adds to `marks` the byte strings of the pins that may still be read; forgets the others
  // (expired at or before the prune point).
  void MarkBytes(std::vector<uint64_t>& marks);
  const absl::flat_hash_map<uint32_t, Pin>& pins() const { return pins_; }
  void RestorePin(uint32_t index, Pin pin) { pins_[index] = pin; }

  uint64_t bytes() const { return spill_ != nullptr ? spill_->bytes() : 0; }
  uint64_t pruned() const { return spill_ != nullptr ? spill_->pruned() : 0; }
  uint64_t MemoryBytes() const { return pins_.capacity() * (sizeof(std::pair<uint32_t, Pin>) + 1); }

  void CheckInvariants() const;

 private:
  std::string Name(KeyId key) const { return SpillKeyName(ctx_.h(), key); }
  // Counts the byte strings of spilled version `v` in (`delta` +1) or out (-1) of pins_.
  void PinSpilled(const SpilledVersion& v, int delta);

  EngineContext& ctx_;
  VersionSpill* const spill_;  // may be null
  bool broken_ = false;
  history::Timestamp pruned_point_ = history::Timestamp::Min();
  uint64_t rewrites_ = 0;  // spilled versions written again (Reexpire)
  absl::flat_hash_map<uint32_t, Pin> pins_;
};

}  // namespace isowatch::engine::internal
