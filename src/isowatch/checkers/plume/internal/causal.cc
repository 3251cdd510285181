// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/plume/internal/causal.h"

#include <algorithm>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace isowatch::checkers::plume {
namespace {

constexpr uint32_t kUnseen = UINT32_MAX;

}  // namespace

Graph Graph::FromEdges(uint32_t n, std::span<const Edge> edges) {
  Graph g;
  g.begin.assign(n + 1, 0);
  for (const Edge& e : edges) ++g.begin[e.from + 1];
  for (uint32_t u = 0; u < n; ++u) g.begin[u + 1] += g.begin[u];
  g.to.resize(edges.size());
  g.tag.resize(edges.size());
  std::vector<uint32_t> next(g.begin.begin(), g.begin.end() - 1);
  for (const Edge& e : edges) {
    const uint32_t at = next[e.from]++;
    g.to[at] = e.to;
    g.tag[at] = e.tag;
  }
  return g;
}

std::vector<Graph::Edge> CausalEdges(const Model& m) {
  std::vector<Graph::Edge> edges;
  edges.reserve(m.size() + m.wr_pred.size());
  for (const std::vector<uint32_t>& nodes : m.session_nodes) {
    for (size_t i = 1; i < nodes.size(); ++i) {
      edges.push_back({nodes[i - 1], nodes[i], Tag(EdgeKind::kSession)});
    }
  }
  for (uint32_t v = 0; v < m.size(); ++v) {
    for (uint32_t u : m.WrPreds(v)) edges.push_back({u, v, Tag(EdgeKind::kWr)});
  }
  return edges;
}

Components FindComponents(const Graph& g, LimitPoller& poll) {
  const uint32_t n = g.size();
  Components c;
  c.id.assign(n, kUnseen);
  std::vector<uint32_t> index(n, kUnseen);
  std::vector<uint32_t> low(n, 0);
  std::vector<uint32_t> stack;
  std::vector<uint8_t> on_stack(n, 0);
  struct Frame {
    uint32_t node;
    uint32_t next;  // the next edge to follow
  };
  std::vector<Frame> frames;
  uint32_t counter = 0;
  for (uint32_t root = 0; root < n; ++root) {
    if (index[root] != kUnseen) continue;
    frames.push_back({root, g.begin[root]});
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!frames.empty()) {
      Frame& f = frames.back();
      const uint32_t u = f.node;
      if (f.next < g.begin[u + 1]) {
        if (poll.Expired()) return c;
        const uint32_t v = g.to[f.next++];
        if (index[v] == kUnseen) {
          index[v] = low[v] = counter++;
          stack.push_back(v);
          on_stack[v] = 1;
          frames.push_back({v, g.begin[v]});
        } else if (on_stack[v] != 0) {
          low[u] = std::min(low[u], index[v]);
        }
        continue;
      }
      if (low[u] == index[u]) {
        uint32_t size = 0;
        uint32_t w = 0;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          c.id[w] = c.count;
          ++size;
        } while (w != u);
        c.size.push_back(size);
        ++c.count;
      }
      frames.pop_back();
      if (!frames.empty()) {
        const uint32_t parent = frames.back().node;
        low[parent] = std::min(low[parent], low[u]);
      }
    }
  }
  return c;
}

std::vector<std::pair<uint32_t, uint32_t>> PathWithin(const Graph& g, const Components& c,
                                                      uint32_t from, uint32_t to,
                                                      LimitPoller& poll) {
  std::vector<std::pair<uint32_t, uint32_t>> path;
  if (from == to) return path;
  const uint32_t comp = c.id[from];
  // Predecessor edge of each node reached: (node it came from, edge index).
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint32_t>> came;
  std::deque<uint32_t> queue = {from};
  came.emplace(from, std::pair(kUnseen, kUnseen));
  while (!queue.empty() && !came.contains(to)) {
    const uint32_t u = queue.front();
    queue.pop_front();
    for (uint32_t e = g.begin[u]; e < g.begin[u + 1]; ++e) {
      if (poll.Expired()) return path;
      const uint32_t v = g.to[e];
      if (c.id[v] != comp || came.contains(v)) continue;
      came.emplace(v, std::pair(u, e));
      queue.push_back(v);
    }
  }
  if (!came.contains(to)) return path;
  for (uint32_t v = to; v != from;) {
    const auto [u, e] = came.at(v);
    path.emplace_back(g.tag[e], v);
    v = u;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

CausalOrder::CausalOrder(const Model& m, LimitPoller& poll)
    : m_(m), sessions_(static_cast<uint32_t>(std::max<size_t>(m.session_nodes.size(), 1))) {
  const auto n = static_cast<uint32_t>(m.size());
  graph_ = Graph::FromEdges(n, CausalEdges(m));
  comps_ = FindComponents(graph_, poll);
  if (poll.expired()) return;
  // Members of each component, then the clocks in topological order (descending ids).
  std::vector<uint32_t> first(comps_.count + 1, 0);
  for (uint32_t u = 0; u < n; ++u) ++first[comps_.id[u] + 1];
  for (uint32_t i = 0; i < comps_.count; ++i) first[i + 1] += first[i];
  std::vector<uint32_t> members(n);
  {
    std::vector<uint32_t> next(first.begin(), first.end() - 1);
    for (uint32_t u = 0; u < n; ++u) members[next[comps_.id[u]]++] = u;
  }
  clocks_.assign(static_cast<size_t>(comps_.count) * sessions_, 0);
  for (uint32_t c = comps_.count; c-- > 0;) {
    if (poll.Expired()) return;
    uint32_t* row = &clocks_[static_cast<size_t>(c) * sessions_];
    auto join = [&](uint32_t p) {
      const uint32_t cp = comps_.id[p];
      // Early stop: a clock that already knows p knows everything p knows.
      if (cp == c || row[m.session[p]] >= m.position[p]) return;
      const uint32_t* from = &clocks_[static_cast<size_t>(cp) * sessions_];
      for (uint32_t s = 0; s < sessions_; ++s) row[s] = std::max(row[s], from[s]);
    };
    for (uint32_t i = first[c]; i < first[c + 1]; ++i) {
      const uint32_t u = members[i];
      const uint32_t pos = m.position[u];
      if (pos > 1) join(m.session_nodes[m.session[u]][pos - 2]);
      for (uint32_t p : m.WrPreds(u)) join(p);
    }
    for (uint32_t i = first[c]; i < first[c + 1]; ++i) {
      const uint32_t u = members[i];
      row[m.session[u]] = std::max(row[m.session[u]], m.position[u]);
    }
  }
}

std::vector<std::pair<uint32_t, uint32_t>> CausalOrder::Path(uint32_t u, uint32_t v,
                                                             uint32_t max_steps) const {
  std::vector<std::pair<uint32_t, uint32_t>> path;
  absl::flat_hash_set<uint32_t> visited = {u};
  uint32_t at = u;
  while (at != v && path.size() < max_steps) {
    uint32_t next = kUnseen;
    uint32_t tag = 0;
    for (uint32_t e = graph_.begin[at]; e < graph_.begin[at + 1]; ++e) {
      const uint32_t w = graph_.to[e];
      if (w == v) {
        next = w;
        tag = graph_.tag[e];
        break;
      }
      if (next == kUnseen && !visited.contains(w) && Reaches(w, v)) {
        next = w;
        tag = graph_.tag[e];
      }
    }
    if (next == kUnseen) break;  // only inside a cycle, where a greedy walk may corner itself
    visited.insert(next);
    path.emplace_back(tag, next);
    at = next;
  }
  return path;
}

}  // namespace isowatch::checkers::plume
