// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "isowatch/axioms/write_index.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::axioms {

// Builders of Chronos's violations: the transactions, key, expected and observed values and one
// sentence a person can follow. Stateless.

// "12 (session 3, start 5, commit 9)"; for a transaction the history no longer holds, its id
// (from `released_name` if given) and that it is no longer held.
std::string DescribeTxn(const history::History& h, TxnId id, std::string_view released_name = {});

verdict::Violation ExplainSession(const history::History& h, verdict::IsolationLevel level,
                                  TxnId txn, TxnId pred);
// What is wrong with a read that the transaction's own operations judge: an internal read, or a
// list read that misses the transaction's own appends.
struct IntRead {
  uint32_t read_op = 0;  // the read's index in the transaction
  verdict::ReadFault fault = verdict::ReadFault::kNone;
  // The own operation the read contradicts: the earlier read it disagrees with (kNone), the
  // write that follows it (kFuture), the last own write before it (kNotLastWrite, kNotOwnWrite),
  // or for a list the own append it misses (kNotOwnWrite).
  uint32_t own_op = 0;
};

// The sentence (without its full stop) saying what is wrong with a read of `key` = `observed`
// by transaction `txn`, called `who`, that its own operations contradict: "WHO read key 1 = 2 at
// operation 3, though it had written 1 there itself at operation 1". `expected`: what an earlier
// read returned (a non-repeatable read, kNone). Shared by Chronos and the adya checker.
std::string OwnReadSentence(const history::History& h, std::string_view who, TxnId txn, KeyId key,
                            std::string_view observed, std::string_view expected,
                            const IntRead& what);

verdict::Violation ExplainInt(const history::History& h, verdict::IsolationLevel level, TxnId txn,
                              KeyId key, std::string expected, std::string observed,
                              const IntRead& what);
// The shared name of what an external read's finding says of it (verdict::ReadFault).
verdict::ReadFault ReadFaultOf(TxnId reader, const ExtFinding& finding);
verdict::Violation ExplainExtRegister(const history::History& h, verdict::IsolationLevel level,
                                      TxnId reader, KeyId key, history::Value expected,
                                      TxnId expected_writer, history::Value observed,
                                      const ExtFinding& finding);
verdict::Violation ExplainExtList(const history::History& h, verdict::IsolationLevel level,
                                  TxnId reader, KeyId key, std::span<const history::Value> expected,
                                  std::span<const history::Value> observed, size_t first_difference,
                                  const ExtFinding& finding);
// `released`: the source ids of either transaction if the history no longer holds it.
verdict::Violation ExplainNoConflict(const history::History& h, TxnId first, TxnId second,
                                     KeyId key,
                                     std::span<const std::pair<TxnId, std::string>> released = {});

}  // namespace isowatch::axioms
