// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace isowatch::checkers::adya {

// The kind of a direct serialization graph edge Ti -> Tj (Adya 1999, §3).
enum class EdgeKind : uint8_t {
  kWw = 0,  // write dependency: Tj installed the version of a key right after Ti's
  kWr = 1,  // read dependency: Tj read a version Ti installed
  kRw = 2,  // anti-dependency: Ti read a version and Tj installed the next one
  // Predicate dependencies (Adya's predicate read- and anti-dependencies). Reserved for predicate
  // reads, which the history model does not hold yet: nothing produces these kinds today. A cycle
  // whose only anti-dependencies are predicate ones is G2 but not G2-item (allowed at repeatable
  // read), which is why they are kinds of their own.
  kPredWr = 3,
  kPredRw = 4,
  // Start dependency (snapshot isolation): Ti committed no later than Tj started. Never stored;
  // it appears only in cycles the checker reports.
  kStart = 5,
};

inline constexpr int kEdgeKindCount = 6;

const char* EdgeKindName(EdgeKind kind);  // "ww", "wr", "rw", "pred-wr", "pred-rw", "start"

// A set of edge kinds.
using EdgeMask = uint8_t;
constexpr EdgeMask Mask(EdgeKind kind) {
  return static_cast<EdgeMask>(1u << static_cast<int>(kind));
}
inline constexpr EdgeMask kDependencyEdges =
    Mask(EdgeKind::kWw) | Mask(EdgeKind::kWr) | Mask(EdgeKind::kPredWr);
inline constexpr EdgeMask kAntiDependencyEdges = Mask(EdgeKind::kRw) | Mask(EdgeKind::kPredRw);
inline constexpr EdgeMask kAllEdges = kDependencyEdges | kAntiDependencyEdges;

// One edge. `op` is the index, within the transaction that performed it, of the operation the
// edge comes from: for ww the write of `to`, for wr the read of `to`, for rw the read of `from`.
struct Edge {
  uint32_t from = 0;
  uint32_t to = 0;
  uint32_t op = 0;
  EdgeKind kind = EdgeKind::kWw;
};

// A directed multigraph over nodes 0..n-1 (a history's transactions by index) in compressed
// sparse row form: the out-edges of u are edges()[begin(u) .. end(u)), in the order they were
// added. Built once by Finish; immutable after. Thread-compatible.
//
// Invariants after Finish:
//  1. edges() is sorted by `from` (stable), and offsets_[u] indexes the first edge from u.
//  2. No edge is a self-loop (Add drops them).
class DependencyGraph {
 public:
  explicit DependencyGraph(uint32_t nodes) : nodes_(nodes) {}

  // Adds from -> to unless from == to. REQUIRES: not finished; from, to < node_count().
  void Add(uint32_t from, uint32_t to, EdgeKind kind, uint32_t op) {
    if (from != to) pending_.push_back({from, to, op, kind});
  }
  // Sorts the edges into rows. O(nodes + edges).
  void Finish();

  uint32_t node_count() const { return nodes_; }
  size_t edge_count() const { return edges_.size(); }
  std::span<const Edge> edges() const { return edges_; }
  const Edge& edge(uint32_t index) const { return edges_[index]; }
  uint32_t begin(uint32_t node) const { return offsets_[node]; }
  uint32_t end(uint32_t node) const { return offsets_[node + 1]; }
  // Edges of each kind.
  size_t count(EdgeKind kind) const { return counts_[static_cast<int>(kind)]; }

 private:
  uint32_t nodes_;
  std::vector<Edge> pending_;
  std::vector<Edge> edges_;
  std::vector<uint32_t> offsets_;
  size_t counts_[kEdgeKindCount] = {};
};

}  // namespace isowatch::checkers::adya
