// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to Chronos (chronos.cc): what every part of a run shares, made once before the replay
// (docs/checkers/chronos.md, "On several threads").

#include <cstdint>
#include <span>
#include <vector>

#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/history/operation.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::chronos {

// The keys one replayer judges. A run on several threads gives each a part of the keys; reads,
// writes and conflicts are judged per key, so the parts are independent, and what is judged per
// transaction (SESSION) belongs to part 0.
struct KeyPart {
  uint32_t index = 0;
  uint32_t count = 1;
  const std::vector<uint8_t>* owner = nullptr;  // per key, its part; unused with one part
  bool Has(uint32_t key) const { return count == 1 || (*owner)[key] == index; }
  bool first() const { return index == 0; }
  // The ops of `ops` (at most 64) on the part's keys, a bit each (bit i: ops[i]), and with
  // `writes_only` only the writes among them. Made without a branch per op, which would be
  // taken as much at random as the keys are shared out.
  uint64_t Mask(std::span<const history::Op> ops, bool writes_only) const {
    uint64_t mask = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const bool own = count == 1 || (*owner)[ops[i].key().value()] == index;
      mask |= static_cast<uint64_t>(own & (!writes_only | ops[i].is_write())) << i;
    }
    return mask;
  }
};

// A point of the replay. Phases order the events that share a timestamp: commits first, then
// transactions whose start equals their commit (start and commit handled together), then starts.
// So a write committed at t is visible to a transaction that starts at t, under SER too (where
// every other transaction is one commit event).
enum Phase : uint32_t { kCommit = 0, kPoint = 1, kStart = 2 };

struct Event {
  history::Timestamp ts;
  uint64_t tie;  // PackTaggedTxn(phase, transaction)

  Event(history::Timestamp t, Phase phase, uint64_t txn) : ts(t), tie(PackTaggedTxn(phase, txn)) {}
  Phase phase() const { return static_cast<Phase>(TagOfPacked(tie)); }
  TxnId txn() const { return TxnId(TxnOfPacked(tie)); }

  bool operator<(const Event& o) const {
    if (ts != o.ts) return ts < o.ts;
    return tie < o.tie;
  }
};

// What every part of a run shares, made once before the replay and read-only during it: the
// events, each transaction's committed session predecessor, and the keys.
struct ReplayPlan {
  // The events, in two sorted runs that the replay merges as it goes: those at a transaction's
  // commit (kCommit and kPoint) and the starts. Each run is made in transaction order, which is
  // usually sorted already for the first (histories are mostly written in commit order), so
  // sorting the runs apart costs less than sorting all the events.
  std::vector<Event> at_commit;
  std::vector<Event> starts;
  std::vector<TxnId> committed_pred;
  size_t transactions_checked = 0;
  size_t transactions_skipped = 0;
  std::vector<uint8_t> owner;  // per key: the part that judges it (with several parts)
};

// Makes the plan of a run on `parts` parts at `level` (the keys' parts on a second thread when
// there are several).
ReplayPlan MakePlan(const history::History& h, verdict::IsolationLevel level, uint32_t parts);

}  // namespace isowatch::checkers::chronos
