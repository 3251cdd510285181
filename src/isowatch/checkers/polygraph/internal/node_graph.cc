// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/internal/node_graph.h"

#include <functional>
#include <queue>
#include <utility>

namespace isowatch::checkers::polygraph {

NodeEdge MapEdge(const TxnEdge& e, uint32_t label, const SearchOptions& o) {
  if (o.mode == Mode::kSerializable) return {e.from, e.to, label};
  const uint32_t begin_from = 2 * e.from;
  const uint32_t commit_from = 2 * e.from + 1;
  const uint32_t begin_to = 2 * e.to;
  const uint32_t commit_to = 2 * e.to + 1;
  switch (e.kind) {
    case EdgeKind::kRw:
      return {begin_from, commit_to, label};
    case EdgeKind::kRealTime:
      return {commit_from, o.real_time_to_begin ? begin_to : commit_to, label};
    default:
      return {commit_from, begin_to, label};
  }
}

uint32_t NodeCount(const Model& m, Mode mode) {
  return static_cast<uint32_t>(mode == Mode::kSnapshot ? 2 * m.txns.size() : m.txns.size());
}

std::vector<uint32_t> NodePriorities(const Model& m, Mode mode) {
  std::vector<uint32_t> priority(NodeCount(m, mode));
  for (uint32_t t = 0; t < m.txns.size(); ++t) {
    if (mode == Mode::kSnapshot) {
      priority[size_t{2} * t] = 2 * m.position[t];
      priority[size_t{2} * t + 1] = 2 * m.position[t] + 1;
    } else {
      priority[t] = m.position[t];
    }
  }
  return priority;
}

void AddProgramEdges(const Model& m, Mode mode, std::vector<NodeEdge>& out) {
  if (mode != Mode::kSnapshot) return;
  for (uint32_t t = 0; t < m.txns.size(); ++t) out.push_back({2 * t, 2 * t + 1, kProgram});
}

adya::DependencyGraph Graph(uint32_t nodes, const std::vector<NodeEdge>& edges) {
  adya::DependencyGraph g(nodes);
  for (const NodeEdge& e : edges) g.Add(e.from, e.to, adya::EdgeKind::kWw, e.label);
  g.Finish();
  return g;
}

std::vector<uint32_t> TopologicalRanks(const adya::DependencyGraph& g,
                                       const std::vector<uint32_t>& priority) {
  const uint32_t n = g.node_count();
  std::vector<uint32_t> indegree(n, 0);
  for (const adya::Edge& e : g.edges()) ++indegree[e.to];
  using Entry = std::pair<uint32_t, uint32_t>;  // (priority, node)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (uint32_t u = 0; u < n; ++u) {
    if (indegree[u] == 0) ready.emplace(priority[u], u);
  }
  std::vector<uint32_t> rank(n, 0);
  uint32_t next = 0;
  while (!ready.empty()) {
    const uint32_t u = ready.top().second;
    ready.pop();
    rank[u] = next++;
    for (uint32_t j = g.begin(u); j < g.end(u); ++j) {
      if (--indegree[g.edge(j).to] == 0) ready.emplace(priority[g.edge(j).to], g.edge(j).to);
    }
  }
  return rank;
}

}  // namespace isowatch::checkers::polygraph
