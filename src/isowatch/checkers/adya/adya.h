// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::adya {

struct AdyaOptions {
  // The levels to judge. A finding is reported if it violates at least one of them, and names
  // those it violates (verdict::Violation::levels, in this canonical order: read committed,
  // repeatable read, snapshot isolation, serializable).
  std::vector<verdict::IsolationLevel> levels = {
      verdict::IsolationLevel::kReadCommitted, verdict::IsolationLevel::kRepeatableRead,
      verdict::IsolationLevel::kSnapshotIsolation, verdict::IsolationLevel::kSerializable};
  // Edges a typed cycle search may examine, per strongly connected component and cycle class,
  // before it settles for the shortest cycle found so far (AdyaStats::truncated_searches).
  uint64_t max_search_steps = uint64_t{1} << 24;
  // When to stop (polled every 1024 transactions while building the graph, every few thousand
  // steps of the component and cycle searches); nullptr: never. Not owned.
  const CheckLimits* limits = nullptr;
};

struct AdyaStats {
  size_t nodes = 0;     // committed transactions
  size_t versions = 0;  // installed versions in the version order
  size_t ww_edges = 0;
  size_t wr_edges = 0;
  size_t rw_edges = 0;
  size_t sccs = 0;         // strongly connected components with two or more transactions
  size_t largest_scc = 0;  // transactions in the largest one (1 if the graph is acyclic)
  // What the checker could not use (docs/checkers/adya.md, "What the checker can see").
  size_t unordered_writers = 0;   // committed writers without a commit timestamp
  size_t commit_ties = 0;         // consecutive versions of a key with equal commit timestamps
  size_t garbage_reads = 0;       // values never written (and not initial)
  size_t unknown_reads = 0;       // values written only by transactions of unknown outcome
  size_t incompatible_reads = 0;  // list reads that are no version of the list
  size_t duplicate_writes = 0;    // a (key, value) installed by more than one transaction
  size_t unjudged_si_edges = 0;   // ww/wr/rw edges whose ends lack the timestamps SI needs
  // Histories without commit timestamps (docs/checkers/adya.md, "Histories without timestamps").
  size_t inferred_keys = 0;       // keys whose version order was inferred from the reads
  size_t undetermined_keys = 0;   // registers among them whose order the reads do not determine
  size_t unobserved_appends = 0;  // list appends no read shows
  size_t truncated_searches = 0;  // cycle searches stopped by max_search_steps
};

struct AdyaResult {
  // False: the limits expired before the check ended. The history is then neither valid nor
  // invalid (UNKNOWN), and `violations` is empty.
  bool complete = true;
  // Non-cyclic findings (G1a, G1b, thin-air, incompatible-order, duplicate-elements, G-SIa,
  // G-SIb) in history order, then cycles per component.
  std::vector<verdict::Violation> violations;
  // Non-empty: what the checker could not decide, in a sentence (`complete` is then false, but
  // the violations found stand): a history without commit timestamps whose register version
  // orders the reads do not determine, or whose anti-dependency cycles snapshot isolation may
  // allow and no start timestamps can tell.
  std::string undecided;
  AdyaStats stats;
  // Committed transactions that wrote but have no commit timestamp, so their versions could not
  // be placed in the version order.
  std::vector<TxnId> unordered_writers;
};

// Adya's direct serialization graph over the committed transactions of `h`, with the version
// order of every key taken from commit timestamps; reports G1a and G1b reads, the SCCs' shortest
// G0, G1c, G-single and G2-item cycles, and for snapshot isolation G-SIa edges and G-SIb cycles,
// each naming the levels it violates, with checker "adya" and an explanation that walks the
// cycle. See docs/checkers/adya.md. Time O(n log n + m + edges) for n transactions and m
// operations, plus the bounded cycle searches.
AdyaResult CheckAdya(const history::History& h, const AdyaOptions& options = {});

}  // namespace isowatch::checkers::adya
