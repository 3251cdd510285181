// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/plugin.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::adya::internal {

// A read that observed a version outside the version order: G1a or G1b; that no version order
// explains: thin-air, incompatible-order, duplicate-elements; or that the reader's own writes
// contradict: INT (a future read, or a read that misses the reader's own last write).
struct ReadFinding {
  verdict::Anomaly anomaly;
  TxnId reader;
  // G1a, G1b: the writer of the value read. Incompatible order: the transaction whose list the
  // read contradicts (the reader of the longest list, or the writer of the version it names).
  // Invalid for the others.
  TxnId writer;
  uint32_t op;        // the read, within the reader
  uint32_t write_op;  // within `writer`: the write of the value read, or its contradicting read
  // Incompatible order: the list the read should have been a prefix of, rendered.
  std::string expected;
  // What is wrong with the read (G1a, G1b, thin-air; and INT, where `write_op` is the reader's
  // own operation the read contradicts and `writer` is invalid).
  verdict::ReadFault fault = verdict::ReadFault::kNone;
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
  // Keys some committed writer of which has no commit timestamp, whose version order is
  // inferred from the reads (docs/checkers/adya.md, "Histories without timestamps").
  size_t inferred_keys = 0;
  size_t undetermined_keys = 0;   // registers among them whose order the reads do not determine
  size_t unobserved_appends = 0;  // committed final appends no read shows, ordered after the rest
};

// Two committed transactions that read the same version of a register (`base`'s, or the initial
// one when `base` is invalid) and both overwrote it: whichever version order the database chose,
// one missed the other's write and overwrote it, a cycle with one anti-dependency (G-single). Found
// where the version order is inferred, which such a pair leaves undetermined.
struct LostUpdate {
  KeyId key;
  TxnId first;
  TxnId second;
  TxnId base;
  uint32_t first_read = 0;   // the read of the base version, within `first`
  uint32_t second_read = 0;  // ... within `second`
};

struct BuiltGraph {
  DependencyGraph graph;
  std::vector<LostUpdate> lost_updates;
  std::vector<ReadFinding> findings;  // at most one per (reader, key), in history order
  // Committed writers of the undetermined register keys: their versions of those keys are outside
  // the version order (only the ww edges the reads imply, no rw edges into them, none from reads
  // of them).
  std::vector<TxnId> unordered_writers;
  BuildCounts counts;
  // False: `poll` expired and the build stopped; the rest is partial and must not be judged.
  bool complete = true;
};

// Builds Adya's direct serialization graph of `h` over its committed transactions (node i is
// the transaction with index i; others are isolated), with the version order of each key taken
// from the commit timestamps of its committed writers (ties by input order), or, for a key some
// committed writer of which has none, inferred from the reads: a list's from its longest read, a
// register's from the versions its writers read before overwriting them. O(n log n + m) for
// n transactions and m operations (plus the length of list reads). Polls `poll` (if not null)
// once per transaction.
BuiltGraph BuildGraph(const history::History& h, LimitPoller* poll = nullptr);

}  // namespace isowatch::checkers::adya::internal
