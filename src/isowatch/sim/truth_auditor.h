// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "isowatch/history/value.h"
#include "isowatch/sim/mv_store.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/sim/txn_log.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::sim {

// Derives the violations a correct checker must report for one committed transaction, applying
// the checker's conventions (docs/simulator.md, "Ground truth") to what the store knows: the
// committed versions, who wrote every value, and every transaction's timestamps and status. It
// does not look at the fault: the simulator attributes the findings to the transaction's fault
// and treats a finding in a fault-free transaction as its own bug.
//
// Holds references to the store and the log, which must outlive it. Thread-compatible.
class TruthAuditor {
 public:
  TruthAuditor(const MvStore& store, const TxnLog& log, verdict::IsolationLevel level,
               bool aborted_recorded)
      : store_(store), log_(log), level_(level), aborted_recorded_(aborted_recorded) {}

  // Audits committed transaction `txn` with operations `ops` (list reads index `list_pool`).
  // `committed_pred` is the nearest committed transaction before it in its session.
  // Appends the findings to `out`; their `cause` is left for the caller.
  // REQUIRES: `txn` has its id, status and timestamps; its writes are not installed yet; every
  // transaction whose value it read has completed.
  void Audit(uint32_t txn, std::optional<uint32_t> committed_pred, std::span<const TxnOp> ops,
             std::span<const history::Value> list_pool, std::vector<ExpectedViolation>& out);

 private:
  // Per key of the audited transaction, what the checker tracks.
  struct KeyView {
    uint64_t key = 0;
    bool observed = false;  // a read (or, for registers, a write) made later reads internal
    bool int_reported = false;
    bool wrote = false;
    history::Value last;               // registers: last value read or written
    bool has_list = false;             // lists: `list` is meaningful
    std::vector<history::Value> list;  // lists: last read then appends since, or appends so far
  };
  struct Finding {
    verdict::ExtKind kind = verdict::ExtKind::kNever;
    std::optional<uint32_t> writer;
  };

  KeyView& View(uint64_t key);
  // Who wrote `v`, judged against `reader`'s snapshot point. Lists have no intermediate values.
  Finding Classify(uint32_t reader, history::Value v, bool list) const;
  void AddExt(uint32_t reader, uint64_t key, const Finding& f,
              std::vector<ExpectedViolation>& out) const;

  const MvStore& store_;
  const TxnLog& log_;
  verdict::IsolationLevel level_;
  bool aborted_recorded_;
  std::vector<KeyView> views_;  // scratch, per audited transaction
  size_t views_used_ = 0;
};

}  // namespace isowatch::sim
