// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>

#include "isowatch/axioms/explain.h"
#include "isowatch/history/history.h"

namespace isowatch::axioms {

// Judges list read `read` (an index into the transaction's operations) of transaction `txn`
// against the transaction's own appends to the key, shared by Chronos, the online engine and
// the adya checker so that they name such a read alike (docs/checkers/read-faults.md):
//   - an element the transaction appends only later: kFuture, naming that append;
//   - else, the appends before the read must end the list, in order; when they do not, and the
//     list ends with an earlier own append: kNotLastWrite, naming the last own append before
//     the read;
//   - else kNotOwnWrite, naming the first own append the list lacks (or, if it holds them all
//     in another order, the first out of place).
// nullopt when the read is consistent with the transaction's own appends. O(operations of the
// transaction + length of the read).
std::optional<IntRead> JudgeOwnAppends(const history::History& h, TxnId txn, uint32_t read);

}  // namespace isowatch::axioms
