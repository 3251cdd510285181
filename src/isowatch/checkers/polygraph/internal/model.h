// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

#include "isowatch/checkers/plugin.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::polygraph {

// Kinds of dependency between two transactions (docs/checkers/polygraph.md, "The polygraph").
enum class EdgeKind : uint8_t {
  kWr = 0,        // `to` read `key` from `from`
  kWw = 1,        // `to` wrote `key` after `from`
  kRw = 2,        // `from` read a version of `key` that `to` overwrote
  kSession = 3,   // `from` precedes `to` in their session
  kRealTime = 4,  // `from` completed before `to` was invoked
};

const char* EdgeKindName(EdgeKind kind);  // "wr", "ww", "rw", "so", "rt"

// An edge between two nodes of the model: committed transactions, numbered densely
// (Model::txns).
struct TxnEdge {
  uint32_t from = 0;
  uint32_t to = 0;
  EdgeKind kind = EdgeKind::kWr;
  KeyId key;  // invalid for session and real-time edges
  bool operator==(const TxnEdge&) const = default;
};

// One unknown choice: exactly one of two sets of edges holds. Either set closes a cycle with the
// other (docs/checkers/polygraph.md), so "at least one" is the same constraint.
struct Constraint {
  uint32_t begin = 0;  // the first set is Model::constraint_edges[begin, mid),
  uint32_t mid = 0;    // the second [mid, end)
  uint32_t end = 0;
  KeyId key;
  // The two chains of writers of `key` it orders (heads, as Model::txns indices), for messages.
  uint32_t first_head = 0;
  uint32_t second_head = 0;
};

// A register key's chains of writers (read-modify-writes combined), with the readers of each
// chain's tail: what the constraints between its pairs of chains are made of.
struct KeyChains {
  KeyId key;
  std::vector<uint32_t> heads;  // per chain, its first and last writer (Model::txns indices)
  std::vector<uint32_t> tails;
  std::vector<uint32_t> reader_begin;  // chain i's tail is read by readers[reader_begin[i],
  std::vector<uint32_t> readers;       // reader_begin[i + 1])

  size_t size() const { return heads.size(); }
  std::span<const uint32_t> ReadersOf(size_t chain) const {
    return std::span<const uint32_t>(readers).subspan(
        reader_begin[chain], reader_begin[chain + 1] - reader_begin[chain]);
  }
};

// A hot key, whose constraints are added pair by pair as the search needs them instead of all at
// once (docs/checkers/polygraph.md, "Hot keys").
struct LazyKey {
  KeyChains chains;
  absl::flat_hash_set<uint64_t> added;  // pairs (a << 32 | b), a < b, in Model::constraints
};

// Counts for reports.
struct ModelStats {
  size_t transactions = 0;       // nodes
  size_t unknown_committed = 0;  // outcome unknown, read from: judged as committed
  size_t unknown_dropped = 0;    // outcome unknown, never read from: judged as aborted
  size_t unobserved_reads = 0;   // reads whose result was never seen
  size_t duplicate_writes = 0;   // (key, value) pairs written by more than one transaction
  size_t raw_constraints = 0;    // ww pairs and rw triples before combining and coalescing
  size_t chains = 0;             // chains of read-modify-writes after combining writes
  size_t lazy_keys = 0;          // keys whose constraints are added as needed
};

// The polygraph of a key-value or list-append history, at the level of transactions (the search
// maps it to transaction nodes for serializability, begin and commit nodes for snapshot
// isolation): known edges, constraints, and the findings that need no graph at all.
//
// Invariants:
//  1. Every edge's ends are < txns.size(); no edge joins a node to itself.
//  2. Every constraint's two sets are non-empty.
struct Model {
  std::vector<TxnId> txns;  // node -> transaction
  // node -> its position in its session: where a topological order of the known edges puts the
  // nodes it is free to place, so that the order follows the sessions side by side.
  std::vector<uint32_t> position;
  std::vector<TxnEdge> known;
  std::vector<TxnEdge> constraint_edges;
  std::vector<Constraint> constraints;
  std::vector<LazyKey> lazy;
  // Findings of the checks before the graph (internal reads, aborted, intermediate and thin-air
  // reads, lost updates), without level or checker set.
  std::vector<verdict::Violation> findings;
  // Non-empty when the history cannot be judged (values written twice): why.
  std::string unjudgeable;
  // The limits expired before the model was complete.
  bool stopped = false;
  ModelStats stats;

  std::span<const TxnEdge> first(const Constraint& c) const {
    return std::span<const TxnEdge>(constraint_edges).subspan(c.begin, c.mid - c.begin);
  }
  std::span<const TxnEdge> second(const Constraint& c) const {
    return std::span<const TxnEdge>(constraint_edges).subspan(c.mid, c.end - c.mid);
  }
};

// Builds the model of `h`: for register keys, combines read-modify-writes into chains and
// coalesces the constraints between chains; for list keys, reads the version order from the
// longest read and leaves only the appends no read saw to constraints.
// Polls `limits` (nullptr: none) and stops when they expire (Model::stopped). A history whose
// constraints need more than `max_constraint_edges` edges is left unjudgeable. A key with more
// than `lazy_chains` chains of writers gets no constraints but a Model::lazy entry.
Model BuildModel(const history::History& h, const CheckLimits* limits, size_t max_constraint_edges,
                 size_t lazy_chains);

// Adds the constraint between chains a < b of `k`: a before b, or b before a. Each order is a
// ww edge from the earlier chain's tail to the later one's head, and an rw edge to that head from
// every other reader of the earlier tail.
void AddPairConstraint(const KeyChains& k, uint32_t a, uint32_t b, Model& m);

// Adds to `m` (built from `h`) the known edges of session order (between consecutive nodes of a
// session) and of real time (T -> U when T completed more than `clock_drift` time units before U
// was invoked, transitively reduced: O(n log n) plus one edge per pair of transactions no third
// one comes between).
void AddOrderEdges(const history::History& h, bool session, bool real_time, int64_t clock_drift,
                   Model& m);

}  // namespace isowatch::checkers::polygraph
