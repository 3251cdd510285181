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
verdict::Violation ExplainInt(const history::History& h, verdict::IsolationLevel level, TxnId txn,
                              KeyId key, std::string expected, std::string observed);
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
