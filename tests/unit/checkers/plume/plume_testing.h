// SPDX-License-Identifier: Apache-2.0
#pragma once

// Test helpers for the plume checker: tiny histories written as Plume's text lines
// `w(key,value,session,txn)` / `r(key,value,session,txn)` (txn -1: an aborted write; value 0:
// the initial value), built as register histories or as list-append histories, and a
// brute-force oracle that judges read committed, read atomic and causal consistency from the
// axioms by trying every commit order.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "isowatch/checkers/plume/plume.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::plume::testing {

struct TextOp {
  bool write = false;
  int64_t key = 0;
  int64_t value = 0;
  int64_t session = 0;
  int64_t txn = 0;  // -1: an aborted write
};

// Parses whitespace-separated text lines; aborts on a malformed one (test input).
std::vector<TextOp> ParseOps(std::string_view text);
std::string FormatOps(const std::vector<TextOp>& ops);

// Registers: transactions in order of first appearance, ops in text order, the aborted writes of
// session s in one aborted transaction "abort<s>". Initial value 0.
history::History BuildKv(const std::vector<TextOp>& ops);

// Several such histories one after the other, each part's aborted transactions before its
// committed ones, each with start timestamp 1, 2, 3, ... in that order and the committed ones
// with the same commit timestamp (plume ignores them; windows are cut by them). REQUIRES: the parts use distinct keys,
// sessions and transaction ids.
history::History BuildKvParts(const std::vector<std::vector<TextOp>>& parts);

// The same history as list appends: a write is an append, and a read of value v returns the
// key's list up to v, in the order the key's committed appends first appear in the text (an
// aborted v is placed at its own place in that order); a read of 0 returns the empty list, one
// of a value nobody appended the list [v].
history::History BuildList(const std::vector<TextOp>& ops);

// The letters of the TAPs found that violate `level`, sorted and distinct ("hk"); the other
// findings (duplicate elements, incompatible list orders) as '*'.
std::string Labels(const PlumeResult& r, verdict::IsolationLevel level);

// Whether some finding violates `level`.
bool Violates(const PlumeResult& r, verdict::IsolationLevel level);

// The oracle's verdicts: satisfied at read committed, read atomic, causal consistency.
struct OracleVerdict {
  bool rc = false;
  bool ra = false;
  bool tcc = false;
};

// Judges `ops` from the axioms (Biswas and Enea; docs/checkers/plume.md, "The model"): every
// read returns a committed write (or the initial value); an own write is read only after it, and
// then the latest one; another transaction's write only if it is its last of the key; and some
// total commit order extends session order and write-read and satisfies the level's axiom
// (MonoAtomicView, ReadAtomic, Causal). `lists`: the history built by BuildList, so a read
// returns the list, and the commit order must also follow the lists' append order, with every
// committed append a read lacks after the read's last element.
// REQUIRES: at most 7 committed transactions.
OracleVerdict Oracle(const std::vector<TextOp>& ops, bool lists);

}  // namespace isowatch::checkers::plume::testing
