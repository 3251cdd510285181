// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/internal/hot_keys.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "isowatch/checkers/adya/scc.h"
#include "isowatch/checkers/polygraph/internal/node_graph.h"

namespace isowatch::checkers::polygraph {
namespace {

// How far apart, in a hot key's candidate order, the pairs added around a needed one may be.
constexpr size_t kAround = 3;

}  // namespace

size_t AddNeededPairs(const std::vector<uint8_t>& first_chosen, const SearchOptions& o,
                      const CheckLimits* limits, Model& m) {
  LimitPoller poll(limits, 256);
  const uint32_t nodes = NodeCount(m, o.mode);
  // The known edges and the chosen sides: acyclic.
  std::vector<NodeEdge> edges;
  AddProgramEdges(m, o.mode, edges);
  for (uint32_t i = 0; i < m.known.size(); ++i) edges.push_back(MapEdge(m.known[i], i, o));
  for (size_t c = 0; c < m.constraints.size(); ++c) {
    const Constraint& con = m.constraints[c];
    const uint32_t lo = first_chosen[c] != 0 ? con.begin : con.mid;
    const uint32_t hi = first_chosen[c] != 0 ? con.mid : con.end;
    for (uint32_t j = lo; j < hi; ++j) edges.push_back(MapEdge(m.constraint_edges[j], 0, o));
  }
  const std::vector<uint32_t> rank =
      TopologicalRanks(Graph(nodes, edges), NodePriorities(m, o.mode));
  // The candidate: each lazy key's chains in the order of their heads' ranks (under snapshot
  // isolation the head's begin, which its chain's writes all follow), with the edges between
  // neighbours whose pair has no constraint yet, labelled by the pair they stand for.
  struct Pair {
    uint32_t key;  // index into m.lazy
    uint32_t earlier;
    uint32_t later;
    uint32_t at;  // where `earlier` stands in orders[key]
  };
  std::vector<std::vector<uint32_t>> orders(m.lazy.size());
  std::vector<Pair> pairs;
  const size_t chosen_edges = edges.size();
  for (uint32_t k = 0; k < m.lazy.size(); ++k) {
    const KeyChains& ch = m.lazy[k].chains;
    std::vector<uint32_t> order(ch.size());
    std::iota(order.begin(), order.end(), 0);
    auto head_rank = [&](uint32_t chain) {
      return rank[o.mode == Mode::kSnapshot ? 2 * ch.heads[chain] : ch.heads[chain]];
    };
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return head_rank(a) < head_rank(b); });
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      const uint32_t x = order[i];
      const uint32_t y = order[i + 1];
      const uint64_t key = (uint64_t{std::min(x, y)} << 32) | std::max(x, y);
      if (m.lazy[k].added.contains(key)) continue;  // its chosen side is among the edges
      const auto label = static_cast<uint32_t>(pairs.size());
      pairs.push_back({k, x, y, static_cast<uint32_t>(i)});
      edges.push_back(MapEdge({ch.tails[x], ch.heads[y], EdgeKind::kWw, ch.key}, label, o));
      for (uint32_t r : ch.ReadersOf(x)) {
        if (r != ch.heads[y])
          edges.push_back(MapEdge({r, ch.heads[y], EdgeKind::kRw, ch.key}, label, o));
      }
    }
    orders[k] = std::move(order);
    if (poll.Expired()) return 0;
  }
  if (pairs.empty()) return 0;
  const adya::DependencyGraph g = Graph(nodes, edges);
  const adya::Components comp = adya::FindComponents(g, adya::kAllEdges, &poll);
  if (poll.expired()) return 0;
  std::vector<uint8_t> needed(pairs.size(), 0);
  for (size_t j = chosen_edges; j < edges.size(); ++j) {
    if (comp.id[edges[j].from] == comp.id[edges[j].to]) needed[edges[j].label] = 1;
  }
  size_t added = 0;
  auto add = [&](LazyKey& lk, uint32_t x, uint32_t y) {
    const uint32_t a = std::min(x, y);
    const uint32_t b = std::max(x, y);
    if (!lk.added.insert((uint64_t{a} << 32) | b).second) return;
    AddPairConstraint(lk.chains, a, b, m);
    ++added;
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (needed[i] == 0) continue;
    LazyKey& lk = m.lazy[pairs[i].key];
    add(lk, pairs[i].earlier, pairs[i].later);
    // And the pairs around it, up to kAround chains apart: where two neighbours were out of
    // order, their neighbours mostly are too, and a round for each would cost a search each.
    const std::vector<uint32_t>& order = orders[pairs[i].key];
    const size_t at = pairs[i].at;
    for (size_t lo = at > kAround ? at - kAround : 0; lo <= at; ++lo) {
      for (size_t hi = at + 1; hi <= at + kAround && hi < order.size(); ++hi) {
        if (hi - lo >= 2 && hi - lo <= kAround) add(lk, order[lo], order[hi]);
      }
    }
  }
  return added;
}

}  // namespace isowatch::checkers::polygraph
