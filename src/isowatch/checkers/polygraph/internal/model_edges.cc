// SPDX-License-Identifier: Apache-2.0
// The model's edges that do not come from reading the history's operations: the constraint of a
// pair of chains, and the order edges of sessions and real time.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "isowatch/checkers/polygraph/internal/model.h"

namespace isowatch::checkers::polygraph {

namespace {

using history::History;
using history::Transaction;

constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();

}  // namespace

const char* EdgeKindName(EdgeKind kind) {
  switch (kind) {
    case EdgeKind::kWr:
      return "wr";
    case EdgeKind::kWw:
      return "ww";
    case EdgeKind::kRw:
      return "rw";
    case EdgeKind::kSession:
      return "so";
    case EdgeKind::kRealTime:
      return "rt";
  }
  return "?";
}

void AddPairConstraint(const KeyChains& k, uint32_t a, uint32_t b, Model& m) {
  Constraint c{.key = k.key, .first_head = k.heads[a], .second_head = k.heads[b]};
  auto order = [&](uint32_t x, uint32_t y) {
    m.constraint_edges.push_back({k.tails[x], k.heads[y], EdgeKind::kWw, k.key});
    for (uint32_t r : k.ReadersOf(x)) {
      if (r != k.heads[y]) m.constraint_edges.push_back({r, k.heads[y], EdgeKind::kRw, k.key});
    }
  };
  c.begin = static_cast<uint32_t>(m.constraint_edges.size());
  order(a, b);
  c.mid = static_cast<uint32_t>(m.constraint_edges.size());
  order(b, a);
  c.end = static_cast<uint32_t>(m.constraint_edges.size());
  m.constraints.push_back(c);
}

void AddOrderEdges(const History& h, bool session, bool real_time, int64_t clock_drift, Model& m) {
  std::vector<uint32_t> node_of(h.txns().size(), kNoNode);
  for (uint32_t node = 0; node < m.txns.size(); ++node) {
    node_of[m.txns[node].value() - h.first_txn()] = node;
  }
  auto node = [&](TxnId id) {
    return id.valid() && id.value() >= h.first_txn() ? node_of[id.value() - h.first_txn()]
                                                     : kNoNode;
  };
  if (session) {
    // Between consecutive nodes of a session.
    for (uint32_t u = 0; u < m.txns.size(); ++u) {
      TxnId prev = h.txn(m.txns[u]).session_prev;
      while (prev.valid() && prev.value() >= h.first_txn() && node(prev) == kNoNode) {
        prev = h.txn(prev).session_prev;
      }
      if (node(prev) != kNoNode) m.known.push_back({node(prev), u, EdgeKind::kSession, KeyId()});
    }
  }
  if (!real_time) return;
  // T -> U when T completed more than δ = clock_drift before U was invoked, only from the T that
  // no third transaction between them implies: with K the predecessor of U invoked last,
  // T -> K -> U covers every T that completed more than δ before K was invoked.
  std::vector<uint32_t> by_completion;
  for (uint32_t u = 0; u < m.txns.size(); ++u) {
    const Transaction& t = h.txn(m.txns[u]);
    if (t.has_real_time && t.complete_time != Transaction::kNeverCompleted) {
      by_completion.push_back(u);
    }
  }
  // Saturated: a completion time near the end of the range plus δ stays the latest time there is.
  auto complete = [&](uint32_t u) {
    const int64_t t = h.txn(m.txns[u]).complete_time;
    return t > std::numeric_limits<int64_t>::max() - clock_drift
               ? std::numeric_limits<int64_t>::max()
               : t + clock_drift;
  };
  auto invoke = [&](uint32_t u) { return h.txn(m.txns[u]).invoke_time; };
  std::sort(by_completion.begin(), by_completion.end(),
            [&](uint32_t a, uint32_t b) { return complete(a) < complete(b); });
  std::vector<int64_t> latest_invoke(by_completion.size());  // over by_completion[0..i]
  for (size_t i = 0; i < by_completion.size(); ++i) {
    latest_invoke[i] = std::max(i == 0 ? invoke(by_completion[0]) : latest_invoke[i - 1],
                                invoke(by_completion[i]));
  }
  for (uint32_t u = 0; u < m.txns.size(); ++u) {
    if (!h.txn(m.txns[u]).has_real_time) continue;
    // Predecessors: by_completion[0, n).
    const size_t n = static_cast<size_t>(
        std::partition_point(by_completion.begin(), by_completion.end(),
                             [&](uint32_t t) { return complete(t) < invoke(u); }) -
        by_completion.begin());
    if (n == 0) continue;
    const int64_t last = latest_invoke[n - 1];
    for (size_t i = n; i-- > 0 && complete(by_completion[i]) >= last;) {
      m.known.push_back({by_completion[i], u, EdgeKind::kRealTime, KeyId()});
    }
  }
}

}  // namespace isowatch::checkers::polygraph
