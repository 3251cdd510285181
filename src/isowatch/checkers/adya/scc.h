// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/plugin.h"

namespace isowatch::checkers::adya {

// The strongly connected components of a graph.
//
// Invariants:
//  1. id[u] < count for every node u; u and v share an id iff each reaches the other.
//  2. Ids are a reverse topological order of the condensation: an edge u -> v with
//     id[u] != id[v] has id[u] > id[v]. So along any path ids never increase.
//  3. size[c] is the number of nodes with id c.
struct Components {
  std::vector<uint32_t> id;
  std::vector<uint32_t> size;
  uint32_t count = 0;
};

// Tarjan's algorithm over the edges of `g` whose kind is in `mask`, iterative (an explicit stack
// of (node, next edge) frames, no recursion), so a path of a million transactions is fine.
// Time O(nodes + edges), memory O(nodes). Polls `poll` (if not null) once per edge and stops
// when it expires, leaving the components partial (the caller checks poll->expired()).
Components FindComponents(const DependencyGraph& g, EdgeMask mask, LimitPoller* poll = nullptr);

}  // namespace isowatch::checkers::adya
