// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "isowatch/engine/internal/chain_map.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/history/value.h"

namespace isowatch::engine::internal {

// One committed version of a key, stored under its OrderKey (commit, 0 or 1, writer). The
// writer's start, needed only by the NoConflict scan, is read from the history.
struct VersionInfo {
  history::Value value;  // registers: the writer's final value; lists: unused
};

// An external read whose verdict is not final yet, stored under its read point (point.txn is the
// reader).
struct ReadInfo {
  history::Value observed;  // registers: the value read (re-checks need no history lookup)
  uint32_t op_index = 0;    // the read's index among the reader's operations
  bool wrong = false;       // the current, provisional verdict
};

// Everything the engine keeps about one key.
//
// Invariants:
//  1. readers holds one entry per pending external read (one per transaction and key).
//  2. If trimmed: every collected version had commit timestamp <= trim_point; for a register the
//     newest of them is still versions.begin(); for a list their appends, in order, are
//     base_list.
//  3. max_duration >= commit.physical - start.physical of every version ever inserted (SI).
//  4. finality_at is the timestamp of readers' first entry (Max if there is none), and the
//     engine's finality queue holds the key under finality_at.
//  5. If base_in_spill: trimmed, spilled_base.ts <= trim_point, the spill holds spilled_base,
//     and every in-memory version newer than it was inserted after it was spilled.
//
// Laid out for the cache: the two chains' headers fill the first 64-byte line, what every
// arrival reads next (finality and collection points, flags) the second; what only the spill
// and lists use comes last.
struct alignas(64) KeyState {
  ChainMap<VersionInfo> versions;
  ChainMap<ReadInfo> readers;
  history::Timestamp finality_at = history::Timestamp::Max();
  history::Timestamp trim_point = history::Timestamp::Min();
  int64_t max_duration = 0;
  bool trimmed = false;
  bool in_gc = false;          // the key has an entry in the engine's collection queue
  bool base_in_spill = false;  // see spilled_base
  // Under a memory budget (eviction): the key has an entry in the engine's idle queue, and the
  // advance of the final point (its low 32 bits) at which it was last read or written.
  bool idle_queued = false;
  uint32_t last_active = 0;
  // With a spill: the newest collected version that was dropped rather than spilled
  // (kBeforeAll-like minimum if none); a reload that could need it is a horizon miss.
  OrderKey dropped_upto{history::Timestamp::Min(), 0, 0};
  // With base_in_spill (registers, under a memory budget): the key's newest version at or below
  // trim_point, `spilled_base`, was moved to the spill when the key went cold, and memory holds
  // only versions that arrived since. It is what a read after it sees unless memory has a newer
  // version before the read; in-memory versions older than it (late arrivals) are hidden by it.
  OrderKey spilled_base{history::Timestamp::Min(), 0, 0};
  std::vector<history::Value> base_list;

  // Asks for the lines an arrival touching the key will read: this state and the chains' ends.
  [[gnu::always_inline]] void PrefetchState() const {
    __builtin_prefetch(this);
    __builtin_prefetch(reinterpret_cast<const char*>(this) + 64);
  }
  [[gnu::always_inline]] void PrefetchChains() const {
    versions.PrefetchEnds();
    readers.PrefetchEnds();
  }
};
static_assert(sizeof(KeyState) == 192, "three cache lines (see the layout above)");

}  // namespace isowatch::engine::internal
