// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/adya/scc.h"

#include <algorithm>
#include <limits>

namespace isowatch::checkers::adya {

namespace {

constexpr uint32_t kUnvisited = std::numeric_limits<uint32_t>::max();

struct Frame {
  uint32_t node;
  uint32_t next_edge;
};

}  // namespace

Components FindComponents(const DependencyGraph& g, EdgeMask mask, LimitPoller* poll) {
  const uint32_t n = g.node_count();
  Components out;
  out.id.assign(n, 0);
  std::vector<uint32_t> index(n, kUnvisited);
  std::vector<uint32_t> low(n, 0);
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<uint32_t> stack;
  std::vector<Frame> frames;
  uint32_t counter = 0;

  auto visit = [&](uint32_t u) {
    index[u] = low[u] = counter++;
    stack.push_back(u);
    on_stack[u] = 1;
    frames.push_back({u, g.begin(u)});
  };

  for (uint32_t root = 0; root < n; ++root) {
    if (index[root] != kUnvisited) continue;
    visit(root);
    while (!frames.empty()) {
      if (poll != nullptr && poll->Expired()) return out;
      Frame& f = frames.back();
      const uint32_t u = f.node;
      if (f.next_edge < g.end(u)) {
        const Edge& e = g.edge(f.next_edge++);
        if ((mask & Mask(e.kind)) == 0) continue;
        if (index[e.to] == kUnvisited) {
          visit(e.to);  // invalidates f
        } else if (on_stack[e.to]) {
          low[u] = std::min(low[u], index[e.to]);
        }
        continue;
      }
      if (low[u] == index[u]) {
        uint32_t size = 0;
        uint32_t v;
        do {
          v = stack.back();
          stack.pop_back();
          on_stack[v] = 0;
          out.id[v] = out.count;
          ++size;
        } while (v != u);
        out.size.push_back(size);
        ++out.count;
      }
      frames.pop_back();
      if (!frames.empty()) {
        uint32_t parent = frames.back().node;
        low[parent] = std::min(low[parent], low[u]);
      }
    }
  }
  return out;
}

}  // namespace isowatch::checkers::adya
