// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/checkers/polygraph/internal/model.h"
#include "isowatch/checkers/polygraph/polygraph.h"

namespace isowatch::checkers::polygraph {

// What the nodes of the searched graph are (docs/checkers/polygraph.md, "The polygraph").
enum class Mode : uint8_t {
  kSerializable = 0,  // one node per transaction
  kSnapshot = 1,      // a begin and a commit node per transaction: wr, ww and session edges run
                      // commit to begin, rw edges begin to commit, real-time edges commit to
                      // begin (strong) or commit to commit (generalized)
};

struct SearchOptions {
  Mode mode = Mode::kSerializable;
  // Real-time edges run commit to begin (strong snapshot isolation) rather than commit to commit.
  bool real_time_to_begin = false;
  // Fixes constraints whose other order closes a cycle before solving. Off only to confirm, in
  // tests, that pruning changes no verdict.
  bool prune = true;
  SatBackend solver = SatBackend::kCadical;
  // The hot keys' pairs may add constraint edges up to this many (PolygraphOptions).
  size_t max_constraint_edges = size_t{1} << 24;
  // Not owned; nullptr: no limit.
  const CheckLimits* limits = nullptr;
};

// A cycle of the searched graph, as the dependencies between transactions it follows, in order
// (each edge's `to` is the next one's `from`). Model edges are referred to by label: i <
// model.known.size() is model.known[i], else model.constraint_edges[i - model.known.size()].
struct Cycle {
  std::vector<uint32_t> labels;
};

// Why no choice of the constraints gives an acyclic graph: cycles of known edges alone, or cycles
// every choice of `constraints` closes one of.
struct Refutation {
  std::vector<Cycle> cycles;          // shortest first
  std::vector<uint32_t> constraints;  // indices into Model::constraints; empty: known cycle
  std::vector<uint32_t> forced;       // constraints fixed by pruning that a cycle goes through
};

struct SearchStats {
  size_t nodes = 0;
  size_t known_edges = 0;
  size_t constraints = 0;  // after combining writes and coalescing
  size_t forced = 0;       // fixed by pruning (the other order closes a cycle)
  size_t free = 0;         // fixed because one order lies on no cycle at all
  size_t solved = 0;       // left to the solver
  size_t components = 0;   // independent parts solved apart
  size_t solver_calls = 0;
  size_t cycle_clauses = 0;   // cycles found in the solver's models, each a clause
  size_t hot_key_rounds = 0;  // times the hot keys' candidate orders needed more pairs
  size_t hot_key_pairs = 0;   // constraints those rounds added
};

struct SearchResult {
  // kTooLarge: the hot keys needed more constraint edges than SearchOptions allows.
  enum class Verdict : uint8_t { kAcyclic, kCyclic, kStopped, kTooLarge };
  Verdict verdict = Verdict::kAcyclic;
  std::vector<Refutation> refutations;  // kCyclic: at least one
  // kAcyclic: per constraint of the model, 1 when its first set holds in the acyclic choice the
  // search found.
  std::vector<uint8_t> first_chosen;
  SearchStats stats;
};

// Decides whether some choice of `m`'s constraints leaves the graph acyclic: known-graph cycles,
// then pruning, decomposition into independent components, and a SAT solver per component with
// a clause added for every cycle of its models. kStopped when the limits expire.
//
// With hot keys (Model::lazy), one solver takes every open constraint, and each acyclic model it
// finds is tested against the hot keys' write orders (AddNeededPairs): the pairs that order needs
// join `m` as constraints and the same solver, with what it learnt, goes on (docs/
// checkers/polygraph.md, "Hot keys"). `m` keeps them, so that a second search of it (another
// level) starts from them.
SearchResult Search(Model& m, const SearchOptions& options);

// The model edge that `label` names (Cycle).
const TxnEdge& EdgeAt(const Model& m, uint32_t label);

}  // namespace isowatch::checkers::polygraph
