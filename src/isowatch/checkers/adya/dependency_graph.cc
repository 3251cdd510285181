// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/adya/dependency_graph.h"

namespace isowatch::checkers::adya {

const char* EdgeKindName(EdgeKind kind) {
  switch (kind) {
    case EdgeKind::kWw:
      return "ww";
    case EdgeKind::kWr:
      return "wr";
    case EdgeKind::kRw:
      return "rw";
    case EdgeKind::kPredWr:
      return "pred-wr";
    case EdgeKind::kPredRw:
      return "pred-rw";
    case EdgeKind::kStart:
      return "start";
  }
  return "?";
}

void DependencyGraph::Finish() {
  offsets_.assign(static_cast<size_t>(nodes_) + 1, 0);
  for (const Edge& e : pending_) {
    ++offsets_[e.from + 1];
    ++counts_[static_cast<int>(e.kind)];
  }
  for (uint32_t u = 0; u < nodes_; ++u) offsets_[u + 1] += offsets_[u];
  edges_.resize(pending_.size());
  std::vector<uint32_t> next(offsets_.begin(), offsets_.end() - 1);
  for (const Edge& e : pending_) edges_[next[e.from]++] = e;
  pending_.clear();
  pending_.shrink_to_fit();
}

}  // namespace isowatch::checkers::adya
