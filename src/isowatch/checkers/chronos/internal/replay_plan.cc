// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/chronos/internal/replay_plan.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace isowatch::checkers::chronos {
namespace {

using history::History;
using history::Op;
using history::Transaction;
using verdict::IsolationLevel;

// Whether transaction `t` takes part in the replay at `level`.
bool Participates(const History& h, IsolationLevel level, const Transaction& t) {
  if (!t.committed() || !t.has_commit) return false;
  return level == IsolationLevel::kSerializable || t.has_start || h.has_snapshot(t);
}

// Each transaction's nearest session predecessor that takes part in the replay.
std::vector<TxnId> CommittedPredecessors(const History& h, IsolationLevel level) {
  std::vector<TxnId> committed_pred(h.size(), TxnId::Invalid());
  // Session order is seq order; walking each transaction's predecessor chain with memoisation
  // of the answer keeps this linear.
  std::vector<uint8_t> done(h.size(), 0);
  std::vector<uint64_t> stack;
  for (uint64_t i = 0; i < h.size(); ++i) {
    uint64_t cur = i;
    while (!done[cur]) {
      stack.push_back(cur);
      TxnId prev = h.txn(TxnId(cur)).session_prev;
      if (!prev.valid()) break;
      cur = prev.value();
    }
    while (!stack.empty()) {
      uint64_t x = stack.back();
      stack.pop_back();
      TxnId prev = h.txn(TxnId(x)).session_prev;
      if (prev.valid()) {
        committed_pred[x] =
            Participates(h, level, h.txn(prev)) ? prev : committed_pred[prev.value()];
      }
      done[x] = 1;
    }
  }
  return committed_pred;
}

// The events of the replay, in their two sorted runs, and the counts of transactions in and out
// of it.
void MakeEvents(const History& h, IsolationLevel level, ReplayPlan* plan) {
  std::vector<Event>& at_commit = plan->at_commit;
  std::vector<Event>& starts = plan->starts;
  at_commit.reserve(h.size());
  if (level != IsolationLevel::kSerializable) starts.reserve(h.size());
  for (uint64_t i = 0; i < h.size(); ++i) {
    const Transaction& t = h.txn(TxnId(i));
    if (!Participates(h, level, t)) {
      ++plan->transactions_skipped;
      continue;
    }
    ++plan->transactions_checked;
    const bool one_event = level == IsolationLevel::kSerializable || h.has_snapshot(t);
    if (one_event && !(t.has_start && t.start == t.commit)) {
      at_commit.push_back({t.commit, kCommit, i});
    } else if (t.start == t.commit) {
      at_commit.push_back({t.commit, kPoint, i});
    } else {
      starts.push_back({t.start, kStart, i});
      at_commit.push_back({t.commit, kCommit, i});
    }
  }
  for (std::vector<Event>* run : {&at_commit, &starts}) {
    if (!std::is_sorted(run->begin(), run->end())) std::sort(run->begin(), run->end());
  }
}

// Shares the keys among `parts` parts so that each has about as many ops to judge: the keys by
// falling op count, each to the part with the fewest so far.
void PlanKeys(const History& h, uint32_t parts, ReplayPlan* plan) {
  std::vector<uint64_t> ops(h.key_count(), 0);
  for (uint64_t t = 0; t < h.size(); ++t) {
    for (const Op& op : h.ops(TxnId(t))) ++ops[op.key().value()];
  }
  // The keys by falling op count, and by id among keys of one count: by counting when the counts
  // are no more than the keys (a history of many keys, each used a few times), else by sorting.
  std::vector<uint32_t> keys(h.key_count());
  const uint64_t most = ops.empty() ? 0 : *std::max_element(ops.begin(), ops.end());
  if (most <= keys.size()) {
    // at[most - c]: where the next key of c ops goes, once the keys with more are counted.
    std::vector<uint32_t> at(most + 2, 0);
    for (const uint64_t n : ops) ++at[most - n + 1];
    for (size_t i = 1; i < at.size(); ++i) at[i] += at[i - 1];
    for (uint32_t k = 0; k < keys.size(); ++k) keys[at[most - ops[k]]++] = k;
  } else {
    for (uint32_t k = 0; k < keys.size(); ++k) keys[k] = k;
    std::sort(keys.begin(), keys.end(),
              [&](uint32_t a, uint32_t b) { return ops[a] != ops[b] ? ops[a] > ops[b] : a < b; });
  }
  plan->owner.assign(h.key_count(), 0);
  std::vector<uint64_t> load(parts, 0);
  for (uint32_t k : keys) {
    const auto least =
        static_cast<uint8_t>(std::min_element(load.begin(), load.end()) - load.begin());
    plan->owner[k] = least;
    load[least] += ops[k];
  }
}

}  // namespace

ReplayPlan MakePlan(const History& h, IsolationLevel level, uint32_t parts) {
  ReplayPlan plan;
  {
    // The keys' parts and the session predecessors on a second thread, when the replay will have
    // one anyway; the events, the larger share, on this one.
    std::jthread second;
    if (parts > 1) {
      second = std::jthread([&] {
        PlanKeys(h, parts, &plan);
        plan.committed_pred = CommittedPredecessors(h, level);
      });
    } else {
      plan.committed_pred = CommittedPredecessors(h, level);
    }
    MakeEvents(h, level, &plan);
  }
  return plan;
}

}  // namespace isowatch::checkers::chronos
