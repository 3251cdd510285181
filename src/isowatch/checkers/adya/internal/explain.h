// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::adya::internal {

// How a transaction is named in explanations: its id, with a "T" in front of one that starts like
// a number ("T12", "T-3", "oncall-a").
std::string TxnLabel(const history::History& h, uint64_t txn);

// One edge as a clause a person can check against the history, ending with its kind:
//   "T1 read 0 from key 1 and T2 overwrote that version with 2 (rw)".
std::string DescribeEdge(const history::History& h, const Edge& e);

// The edges of a cycle, in order, then the cycle as a path of labels:
//   "T1 read 0 from key 1 and T2 ... (rw); T1 read 1 from key 2, which T2 wrote (wr): T1 -> T2
//   -> T1".
std::string DescribeCycle(const history::History& h, std::span<const Edge> cycle);

// "read committed, repeatable read and serializable".
std::string LevelList(std::span<const verdict::IsolationLevel> levels);

// What a read observed: "1 from key 5" or "[1, 2, 3] from key 5" (long lists shortened to their
// last elements).
std::string DescribeRead(const history::History& h, const history::Op& read);

// The value a transaction last wrote (or appended) to `key`, rendered; "?" if none.
std::string LastWritten(const history::History& h, uint64_t txn, KeyId key);

}  // namespace isowatch::checkers::adya::internal
