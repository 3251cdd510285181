// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/checkers/plume/internal/model.h"

namespace isowatch::checkers::plume {

// What an edge of the causal or commit-order graph stands for: its kind in the low two bits, and
// for kWw and kForced an index (into Model::ww, or the checker's forced edges) above them.
enum class EdgeKind : uint8_t { kSession = 0, kWr = 1, kWw = 2, kForced = 3 };
inline uint32_t Tag(EdgeKind kind, uint32_t index = 0) {
  return (index << 2) | static_cast<uint32_t>(kind);
}
inline EdgeKind KindOf(uint32_t tag) { return static_cast<EdgeKind>(tag & 3); }
inline uint32_t IndexOf(uint32_t tag) { return tag >> 2; }

// A directed graph over nodes 0..n-1 in compressed rows, each edge with its tag.
struct Graph {
  struct Edge {
    uint32_t from;
    uint32_t to;
    uint32_t tag;
  };
  std::vector<uint32_t> begin;  // n + 1 offsets into `to` and `tag`
  std::vector<uint32_t> to;
  std::vector<uint32_t> tag;

  // REQUIRES: every edge's ends are below n.
  static Graph FromEdges(uint32_t n, std::span<const Edge> edges);
  uint32_t size() const { return static_cast<uint32_t>(begin.size() - 1); }
};

// The session-order and write-read edges of `m` (the causal order's generators).
std::vector<Graph::Edge> CausalEdges(const Model& m);

// Strongly connected components. Invariants: ids are a reverse topological order of the
// condensation (an edge u -> v between components has id[u] > id[v]); size[c] counts c's nodes.
struct Components {
  std::vector<uint32_t> id;
  std::vector<uint32_t> size;
  uint32_t count = 0;
};

// Tarjan's algorithm, iterative. Polls `poll` once per edge; when it expires the result is
// partial.
Components FindComponents(const Graph& g, LimitPoller& poll);

// A shortest path from `from` to `to` through nodes of component `comp` only, as the tags and
// nodes of its edges; empty if there is none or `from == to`. Polls `poll` once per edge.
std::vector<std::pair<uint32_t, uint32_t>> PathWithin(const Graph& g, const Components& c,
                                                      uint32_t from, uint32_t to,
                                                      LimitPoller& poll);

// The causal order CO = (SO ∪ WR)+ as one vector clock per strongly connected component:
// clock[s] is the highest position in session s of a node that reaches the component (0: none).
// u reaches v iff clock(v)[session(u)] >= position(u). Memory: components × sessions × 4 bytes.
// Thread-compatible; refers to the model, which must outlive it.
class CausalOrder {
 public:
  CausalOrder(const Model& m, LimitPoller& poll);

  // Whether u ->CO v or u == v; kInit reaches every node.
  bool Reaches(uint32_t u, uint32_t v) const {
    if (u == kInit) return true;
    return Known(v, m_.session[u]) >= m_.position[u];
  }
  // The highest position in session s of a node that reaches v (or is v).
  uint32_t Known(uint32_t v, uint32_t s) const {
    return clocks_[static_cast<size_t>(comps_.id[v]) * sessions_ + s];
  }
  const Graph& graph() const { return graph_; }
  const Components& components() const { return comps_; }
  // A causal path from u to v (u reaches v, u != v), as (tag, node) steps; found greedily with
  // the clocks, so in time proportional to its length times the degrees along it; at most
  // `max_steps` steps (then cut).
  std::vector<std::pair<uint32_t, uint32_t>> Path(uint32_t u, uint32_t v, uint32_t max_steps) const;

 private:
  const Model& m_;
  uint32_t sessions_;
  Graph graph_;
  Components comps_;
  std::vector<uint32_t> clocks_;
};

}  // namespace isowatch::checkers::plume
