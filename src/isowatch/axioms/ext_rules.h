// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>

#include "isowatch/axioms/write_index.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::axioms {

// The EXT axiom's comparisons, shared by Chronos and the online engine.

// Whether a register read of `observed` agrees with the visible version `expected`.
// `expected_is_initial`: no transaction's version is visible, so `expected` is the initial value;
// an absent observation then matches whatever the initial-value convention.
inline bool RegisterReadMatches(history::Value observed, history::Value expected,
                                bool expected_is_initial) {
  return observed == expected || (observed.absent() && expected_is_initial);
}

// Whether a list read of `observed` equals the visible list `committed` followed by the
// reader's own earlier appends `own`.
bool ListReadMatches(std::span<const history::Value> committed, std::span<const history::Value> own,
                     std::span<const history::Value> observed);

// The EXT violation of a register read. REQUIRES: !RegisterReadMatches(...).
verdict::Violation RegisterViolation(const history::History& h, WriteIndex& writes,
                                     verdict::IsolationLevel level, TxnId reader, KeyId key,
                                     history::Value expected, TxnId expected_writer,
                                     history::Value observed);

// The EXT violation of a list read. REQUIRES: !ListReadMatches(committed, own, observed).
verdict::Violation ListViolation(const history::History& h, WriteIndex& writes,
                                 verdict::IsolationLevel level, TxnId reader, KeyId key,
                                 std::span<const history::Value> committed,
                                 std::span<const history::Value> own,
                                 std::span<const history::Value> observed);

}  // namespace isowatch::axioms
