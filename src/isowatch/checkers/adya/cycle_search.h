// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/adya/scc.h"

namespace isowatch::checkers::adya {

// The cycle classes the search names, each defined by the edges a cycle is made of. They are
// disjoint, so every cycle has exactly one name.
enum class CycleClass : uint8_t {
  kG0 = 0,       // write dependencies only
  kG1c = 1,      // write and read dependencies, at least one read dependency
  kGSingle = 2,  // exactly one anti-dependency (the rest dependencies)
  kG2Item = 3,   // two or more anti-dependencies
};

const char* CycleClassName(CycleClass c);  // "G0", "G1c", "G-single", "G2-item"

struct CycleFound {
  std::vector<uint32_t> edges;  // indices into the graph, in cycle order; empty: none found
  bool truncated = false;       // the step budget ran out before every candidate was tried
};

// Finds short typed cycles inside the strongly connected components of a DependencyGraph.
// Holds the components of the whole graph, of its write-dependency subgraph and of its
// dependency subgraph, and scratch space for breadth-first search; reusable across components.
// Thread-compatible; the graph (and the poller, if any) must outlive it.
//
// For a component and a class, every candidate edge that can start a cycle of that class is
// tried (ww edges for G0, wr edges for G1c, rw edges for G-single and G2-item), in node order:
// a breadth-first search from its head back to its tail over the edges the class allows, inside
// the smallest region such a cycle can lie in. The shortest cycle found wins; later searches are
// cut off at its length. Where the region guarantees a cycle (both ends of a ww edge in one
// component of the write-dependency subgraph, ...) the search cannot fail; G-single's can, and is
// pruned with the dependency subgraph's topological order (invariant 2 of Components).
class CycleSearch {
 public:
  // Computes the three sets of components, polling `poll` (if not null) as it goes; if it
  // expires, the search is unusable: check poll->expired() before calling Find.
  explicit CycleSearch(const DependencyGraph& g, LimitPoller* poll = nullptr);

  const Components& components() const { return all_; }

  // The shortest cycle of class `c` found among the nodes of component `scc` (of the whole
  // graph), `nodes` being exactly those nodes, examining at most `max_steps` edges. Stops early,
  // with whatever it found, when the poller expires.
  CycleFound Find(CycleClass c, uint32_t scc, std::span<const uint32_t> nodes, uint64_t max_steps);

 private:
  // Nodes a search may visit: component(v) == id and, if `band` is set, lo <= band(v) <= hi.
  struct Region {
    const std::vector<uint32_t>* comp;
    uint32_t id;
    const std::vector<uint32_t>* band = nullptr;
    uint32_t lo = 0;
    uint32_t hi = 0;
    bool Contains(uint32_t v) const {
      if ((*comp)[v] != id) return false;
      return band == nullptr || ((*band)[v] >= lo && (*band)[v] <= hi);
    }
  };

  // Breadth-first search from `src` to `dst` over edges in `mask` inside `region`, with paths of
  // at most `max_edges` edges. On success replaces `path` with the edges, in order. Spends
  // `budget` (edges examined); sets `exhausted` when it runs out.
  bool ShortestPath(uint32_t src, uint32_t dst, EdgeMask mask, const Region& region,
                    uint32_t max_edges, uint64_t& budget, bool& exhausted,
                    std::vector<uint32_t>& path);

  const DependencyGraph& g_;
  LimitPoller* poll_;
  Components all_;
  Components ww_;
  Components deps_;
  // Breadth-first search scratch: a node is visited in the current search iff seen_[v] == stamp_.
  std::vector<uint32_t> seen_;
  std::vector<uint32_t> parent_edge_;
  std::vector<uint32_t> depth_;
  std::vector<uint32_t> queue_;
  uint32_t stamp_ = 0;
};

}  // namespace isowatch::checkers::adya
