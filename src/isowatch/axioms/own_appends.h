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

// Judges a read of a register key against the transaction's own writes to it, shared by the
// adya, plume and polygraph checkers so that they name such a read alike
// (docs/checkers/read-faults.md). `read` is where the read stands among the transaction's
// operations: an own write at index i precedes it when i < read (a read operation's own index;
// for a range read, the index of the operation it comes before). `source` is the index of the
// transaction's own write of the value the read returned (nullopt: the value is another
// transaction's or the initial one); `last_own` the index of its last write to the key before
// the read (nullopt: it wrote none).
//   - an own write that does not precede the read: kFuture, naming that write;
//   - an own write before the read but not the last one: kNotLastWrite, naming the last;
//   - another's (or the initial) value after an own write: kNotOwnWrite, naming the last own
//     write.
// nullopt when the read returned the last own write, or the transaction had not written the key
// and the value is not its own. The caller reports thin-air and aborted values first
// (docs/checkers/read-faults.md, "One finding per (reader, key)"). O(1).
std::optional<IntRead> JudgeOwnWrite(uint32_t read, std::optional<uint32_t> source,
                                     std::optional<uint32_t> last_own);

}  // namespace isowatch::axioms
