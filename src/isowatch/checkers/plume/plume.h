// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::plume {

struct PlumeOptions {
  // The levels to judge, any of read committed, read atomic and causal consistency. A finding is
  // reported if it violates at least one of them, and names those it violates
  // (verdict::Violation::levels, in the order rc, ra, tcc).
  std::vector<verdict::IsolationLevel> levels = {verdict::IsolationLevel::kReadCommitted,
                                                 verdict::IsolationLevel::kReadAtomic,
                                                 verdict::IsolationLevel::kCausal};
  // Findings against the commit order whose explanation walks the cycle (a search over the
  // cycle's component each); later ones name the transactions without the path.
  uint32_t max_explained_cycles = 256;
  // When to stop (polled every 1024 steps); nullptr: never. Not owned.
  const CheckLimits* limits = nullptr;
  // Transactions with a smaller index (a window's lead-in) are judged but not counted in
  // PlumeStats::counted.
  uint64_t first_counted = 0;
};

struct PlumeStats {
  size_t nodes = 0;    // transactions judged: committed, and of unknown outcome but read from
  size_t counted = 0;  // those among them from PlumeOptions::first_counted on
  size_t sessions = 0;
  size_t wr_edges = 0;       // distinct (writer, reader) pairs
  size_t ww_edges = 0;       // list version-order edges
  size_t co_components = 0;  // strongly connected components of the causal order (n if acyclic)
  // Commit-order edges the axioms force, per level (docs/checkers/plume.md, "Algorithm").
  size_t forced_rc = 0;
  size_t forced_ra = 0;
  size_t forced_tcc = 0;
  // What the checker could not use (docs/checkers/plume.md, "What it cannot judge").
  size_t unknown_committed = 0;  // unknown outcome, read from: judged as committed
  size_t unknown_dropped = 0;    // unknown outcome, never read from: judged as aborted
  size_t unobserved_reads = 0;   // reads whose result was never seen
  size_t ambiguous_reads = 0;    // reads of a (key, value) written more than once
  size_t duplicate_writes = 0;   // (key, value) pairs written more than once
};

struct PlumeResult {
  // False: out of time (UNKNOWN; `violations` is then empty), or `undecided` says what the
  // checker could not decide (the violations found stand).
  bool complete = true;
  std::string undecided;
  // Sorted (verdict::SortViolations); each names its TAP, transactions, key and levels.
  std::vector<verdict::Violation> violations;
  PlumeStats stats;
};

// Checks `h` for the 14 transactional anomalous patterns of Liu et al. (OOPSLA 2024), TAP-a to
// TAP-n, and so for read committed, read atomic and transactional causal consistency in Biswas
// and Enea's axiomatic model, from the reads alone: timestamps are not used. Registers need
// unique written values per key; list appends are read as registers plus the version order the
// list reads show. See docs/checkers/plume.md. Time O(n·s + r·(s log w)) for n transactions in s
// sessions, r reads and w writers per key, plus a component search per level; memory
// O(n·s) words for the clocks and O(n + r) for the rest.
PlumeResult CheckPlume(const history::History& h, const PlumeOptions& options = {});

}  // namespace isowatch::checkers::plume
