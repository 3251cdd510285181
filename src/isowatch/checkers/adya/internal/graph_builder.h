// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/plugin.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::adya::internal {

// A read that observed a version outside the version order: G1a or G1b.
struct ReadFinding {
  verdict::Anomaly anomaly;  // kG1a or kG1b
  TxnId reader;
  TxnId writer;
  uint32_t op;        // the read, within the reader
  uint32_t write_op;  // the write of the value read, within the writer
};

// What building the graph counted (docs/checkers/adya.md, "What the checker can see").
struct BuildCounts {
  size_t committed = 0;
  size_t versions = 0;            // installed versions in the version order
  size_t reads = 0;               // reads of committed transactions that were resolved
  size_t own_reads = 0;           // reads of the reader's own write: no edge
  size_t garbage_reads = 0;       // the value was never written (and is not the initial one)
  size_t unknown_reads = 0;       // the value was written only by transactions of unknown outcome
  size_t incompatible_reads = 0;  // a list read that is no version of the list
  size_t duplicate_writes = 0;    // a (key, value) installed by more than one transaction
  size_t commit_ties = 0;         // consecutive versions of a key with equal commit timestamps
};

struct BuiltGraph {
  DependencyGraph graph;
  std::vector<ReadFinding> findings;  // at most one per (reader, key), in history order
  // Committed transactions that wrote but have no commit timestamp: their versions are outside
  // the version order (no ww edges, no rw edges into them, no rw edges from reads of them).
  std::vector<TxnId> unordered_writers;
  BuildCounts counts;
  // False: `poll` expired and the build stopped; the rest is partial and must not be judged.
  bool complete = true;
};

// Builds Adya's direct serialization graph of `h` over its committed transactions (node i is
// the transaction with index i; others are isolated), with the version order of each key taken
// from the commit timestamps of its committed writers (ties by input order). O(n log n + m) for
// n transactions and m operations (plus the length of list reads). Polls `poll` (if not null)
// once per transaction.
BuiltGraph BuildGraph(const history::History& h, LimitPoller* poll = nullptr);

}  // namespace isowatch::checkers::adya::internal
