// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/adya/cycle_search.h"

#include <algorithm>
#include <limits>

namespace isowatch::checkers::adya {

namespace {

constexpr uint32_t kNoLimit = std::numeric_limits<uint32_t>::max();

}  // namespace

const char* CycleClassName(CycleClass c) {
  switch (c) {
    case CycleClass::kG0:
      return "G0";
    case CycleClass::kG1c:
      return "G1c";
    case CycleClass::kGSingle:
      return "G-single";
    case CycleClass::kG2Item:
      return "G2-item";
  }
  return "?";
}

CycleSearch::CycleSearch(const DependencyGraph& g, LimitPoller* poll)
    : g_(g),
      poll_(poll),
      all_(FindComponents(g, kAllEdges, poll)),
      ww_(FindComponents(g, Mask(EdgeKind::kWw), poll)),
      deps_(FindComponents(g, kDependencyEdges, poll)),
      seen_(g.node_count(), 0),
      parent_edge_(g.node_count(), 0),
      depth_(g.node_count(), 0) {}

bool CycleSearch::ShortestPath(uint32_t src, uint32_t dst, EdgeMask mask, const Region& region,
                               uint32_t max_edges, uint64_t& budget, bool& exhausted,
                               std::vector<uint32_t>& path) {
  if (++stamp_ == 0) {  // wrapped: forget every earlier search
    std::fill(seen_.begin(), seen_.end(), 0);
    stamp_ = 1;
  }
  queue_.clear();
  queue_.push_back(src);
  seen_[src] = stamp_;
  depth_[src] = 0;
  for (size_t head = 0; head < queue_.size(); ++head) {
    const uint32_t u = queue_[head];
    if (depth_[u] >= max_edges) break;  // breadth-first: every later node is at least as deep
    for (uint32_t i = g_.begin(u); i < g_.end(u); ++i) {
      if (budget == 0 || (poll_ != nullptr && poll_->Expired())) {
        exhausted = true;
        return false;
      }
      --budget;
      const Edge& e = g_.edge(i);
      if ((mask & Mask(e.kind)) == 0 || seen_[e.to] == stamp_ || !region.Contains(e.to)) continue;
      seen_[e.to] = stamp_;
      parent_edge_[e.to] = i;
      depth_[e.to] = depth_[u] + 1;
      if (e.to == dst) {
        path.clear();
        for (uint32_t v = dst; v != src; v = g_.edge(parent_edge_[v]).from) {
          path.push_back(parent_edge_[v]);
        }
        std::reverse(path.begin(), path.end());
        return true;
      }
      queue_.push_back(e.to);
    }
  }
  return false;
}

CycleFound CycleSearch::Find(CycleClass c, uint32_t scc, std::span<const uint32_t> nodes,
                             uint64_t max_steps) {
  CycleFound out;
  EdgeKind first_kind = EdgeKind::kWw;
  EdgeMask rest = 0;
  switch (c) {
    case CycleClass::kG0:
      first_kind = EdgeKind::kWw;
      rest = Mask(EdgeKind::kWw);
      break;
    case CycleClass::kG1c:
      first_kind = EdgeKind::kWr;
      rest = kDependencyEdges;
      break;
    case CycleClass::kGSingle:
      first_kind = EdgeKind::kRw;
      rest = kDependencyEdges;
      break;
    case CycleClass::kG2Item:
      first_kind = EdgeKind::kRw;
      rest = kAllEdges;
      break;
  }
  uint64_t budget = max_steps;
  uint32_t best = kNoLimit;  // length of the shortest cycle found
  std::vector<uint32_t> path;
  for (uint32_t u : nodes) {
    for (uint32_t i = g_.begin(u); i < g_.end(u); ++i) {
      if (best == 2) return out;  // no cycle is shorter
      const Edge& e = g_.edge(i);
      if (e.kind != first_kind || all_.id[e.to] != scc) continue;
      Region region{&all_.id, scc};
      switch (c) {
        case CycleClass::kG0:
          if (ww_.id[u] != ww_.id[e.to]) continue;
          region = {&ww_.id, ww_.id[u]};
          break;
        case CycleClass::kG1c:
          if (deps_.id[u] != deps_.id[e.to]) continue;
          region = {&deps_.id, deps_.id[u]};
          break;
        case CycleClass::kGSingle:
          // A dependency path from e.to back to u never climbs the dependency order.
          if (deps_.id[e.to] < deps_.id[u]) continue;
          region.band = &deps_.id;
          region.lo = deps_.id[u];
          region.hi = deps_.id[e.to];
          break;
        case CycleClass::kG2Item:
          break;
      }
      const uint32_t max_edges = best == kNoLimit ? kNoLimit : best - 2;
      if (ShortestPath(e.to, u, rest, region, max_edges, budget, out.truncated, path)) {
        best = static_cast<uint32_t>(path.size()) + 1;
        out.edges.clear();
        out.edges.push_back(i);
        out.edges.insert(out.edges.end(), path.begin(), path.end());
      }
      if (out.truncated) return out;
    }
  }
  return out;
}

}  // namespace isowatch::checkers::adya
