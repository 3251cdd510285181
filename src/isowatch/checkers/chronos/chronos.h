// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers {

struct ChronosOptions {
  verdict::IsolationLevel level = verdict::IsolationLevel::kSnapshotIsolation;
  // When to stop (polled every 1024 replayed events); nullptr: never. Not owned.
  const CheckLimits* limits = nullptr;
  // Threads to replay on, each judging a share of the keys (the result is the same whatever
  // the number; at most kMaxThreads). 0: one for a history of fewer than kParallelMinTxns
  // transactions, else one per core, at most kMaxAutoThreads.
  uint32_t threads = 0;
};

inline constexpr size_t kParallelMinTxns = 100'000;
inline constexpr uint32_t kMaxAutoThreads = 4;
inline constexpr uint32_t kMaxThreads = 64;  // the most parts a key table can tell apart

struct ChronosStats {
  size_t transactions_checked = 0;  // committed transactions replayed
  size_t transactions_skipped = 0;  // aborted, or without the timestamps the level needs
  size_t external_reads = 0;
  size_t internal_reads = 0;
  size_t peak_ongoing = 0;  // most transactions open at once during the replay (SI)
  // Checks of transactions with a snapshot left unjudged because a writer they would judge has
  // no xid (external reads, NoConflict pairs, session pairs; docs/engine.md, "Snapshots").
  size_t snapshot_unjudged = 0;
};

struct ChronosResult {
  // False: the limits expired before the replay ended. The history is then neither valid nor
  // invalid (UNKNOWN), and `violations` is empty.
  bool complete = true;
  std::vector<verdict::Violation> violations;  // in replay order
  ChronosStats stats;
};

// Chronos (seed 000 §III-B, Algorithm 2): replays the committed transactions of `h` in timestamp
// order and checks SI (Session, Int, Ext, NoConflict) or SER (commit-order replay). Finds every
// violation. See docs/checkers/chronos.md for the rules and the report conventions.
ChronosResult RunChronos(const history::History& h, const ChronosOptions& options);

}  // namespace isowatch::checkers
