// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"

namespace isowatch::verdict {

enum class IsolationLevel : uint8_t {
  kSnapshotIsolation = 0,
  kSerializable = 1,
  // Judged by the adya checker (docs/checkers/adya.md) as Adya's phenomena and by the plume
  // checker (docs/checkers/plume.md) as Biswas and Enea's axioms.
  kReadCommitted = 2,   // Adya PL-2
  kRepeatableRead = 3,  // Adya PL-2.99
  // Judged only by the plume checker.
  kReadAtomic = 4,
  kCausal = 5,  // transactional causal consistency
};

// "si", "ser", "rc", "rr", "ra", "tcc"
const char* IsolationLevelName(IsolationLevel level);
std::optional<IsolationLevel> ParseIsolationLevel(std::string_view name);

enum class Anomaly : uint8_t {
  kSession = 0,     // a transaction does not see its session predecessor
  kInt = 1,         // an internal read disagrees with the transaction's own earlier operations
  kExt = 2,         // an external read disagrees with the snapshot
  kNoConflict = 3,  // two concurrent transactions wrote the same key
  // Adya's phenomena, found by the adya checker (docs/checkers/adya.md).
  kG0 = 4,       // a cycle of write dependencies only
  kG1a = 5,      // a committed transaction read a value only an aborted transaction wrote
  kG1b = 6,      // a committed transaction read a non-final write of another transaction
  kG1c = 7,      // a cycle of write and read dependencies, at least one a read dependency
  kGSingle = 8,  // a cycle with exactly one anti-dependency
  kG2Item = 9,   // a cycle with two or more item anti-dependencies
  kGSIa = 10,    // a dependency on a transaction that had not committed when the reader started
  kGSIb = 11,    // a cycle of one anti-dependency and a start dependency (a missed effect)
  // Reads no version order can explain, found by the adya checker.
  kThinAir = 12,            // a read of a value no transaction wrote (nor the initial value)
  kIncompatibleOrder = 13,  // a list read that is no prefix of the key's other reads
  kDuplicateElements = 14,  // a list read that holds one appended element twice
  // The transactional anomalous patterns of Liu et al. (OOPSLA 2024), found by the plume checker
  // (docs/checkers/plume.md). a-f are judged inside one read, g-n over the causal order.
  kTapA = 15,  // thin-air read: a value nobody wrote
  kTapB = 16,  // aborted read
  kTapC = 17,  // future read: a value the transaction itself writes later
  kTapD = 18,  // not my own write: another's value after the transaction wrote the key
  kTapE = 19,  // not my last write: an own write the transaction had overwritten
  kTapF = 20,  // intermediate read: another transaction's non-final write
  kTapG = 21,  // cyclic causal order
  kTapH = 22,  // non-monotonic read, against the causal order
  kTapI = 23,  // non-monotonic read, against the commit order
  kTapJ = 24,  // non-repeatable read
  kTapK = 25,  // fractured read, against the causal order
  kTapL = 26,  // fractured read, against the commit order
  kTapM = 27,  // causality conflict, against the causal order
  kTapN = 28,  // conflict, against the commit order
};

// "SESSION", "INT", "EXT", "NOCONFLICT", "G0", "G1a", "G1b", "G1c", "G-single", "G2-item",
// "G-SIa", "G-SIb", "thin-air", "incompatible-order", "duplicate-elements", "TAP-a" ... "TAP-n".
const char* AnomalyName(Anomaly anomaly);

// Why an external read disagrees with its snapshot, judged by who wrote the value it returned.
enum class ExtKind : uint8_t {
  kNone = 0,
  kNever = 1,         // no transaction wrote the value (nor is it the initial value)
  kBefore = 2,        // written by a transaction committed before the snapshot, since overwritten
  kUncommitted = 3,   // written by a transaction that started by the snapshot but committed after
  kAfter = 4,         // written by a transaction that started after the snapshot
  kAborted = 5,       // written by an aborted transaction
  kIntermediate = 6,  // an intermediate (not final) write of some transaction
  kUnknown = 7,       // no transaction still held wrote it (a live history forgot older ones)
};

const char* ExtKindName(ExtKind kind);  // "never", "before", "uncommitted", "after", ...

// The anomalies judged inside one read, named alike by every checker that finds them
// (docs/checkers/read-faults.md): plume reports them as TAP-a to TAP-f, adya as thin-air, G1a,
// G1b and INT, Chronos and the online engine as EXT or INT, each with this name beside its own.
enum class ReadFault : uint8_t {
  kNone = 0,
  kThinAir = 1,       // a value nobody wrote, nor the initial value (TAP-a)
  kAborted = 2,       // a value only an aborted transaction wrote (TAP-b)
  kFuture = 3,        // a value the reading transaction itself writes only later (TAP-c)
  kNotOwnWrite = 4,   // after writing the key, a read that misses that write (TAP-d): another
                      // transaction's value, or a list without the reader's own earlier appends
  kNotLastWrite = 5,  // an own write the transaction had since overwritten (TAP-e)
  kIntermediate = 6,  // another transaction's write it overwrote before committing (TAP-f)
};

// "thin-air read", "aborted read", "future read", "not own write", "not last write",
// "intermediate read"; "" for kNone.
const char* ReadFaultName(ReadFault fault);

// The anomaly a dependency cycle is, by the kinds and number of its edges, beside the phenomenon
// that `Violation::anomaly` names (docs/checkers/polygraph.md, "Counterexamples"): G-single is
// a lost update or a read skew, G2-item a write skew or, under snapshot isolation, a long fork.
enum class CycleKind : uint8_t {
  kNone = 0,
  kWriteCycle = 1,           // ww edges only (G0)
  kCircularFlow = 2,         // wr and ww edges, at least one wr (G1c)
  kOrderCycle = 3,           // session or real-time order edges only
  kLostUpdate = 4,           // two transactions: one rw and one ww (a read-modify-write lost)
  kReadSkew = 5,             // one rw, the rest wr and ww: a read saw one write and missed another
  kMissedEffect = 6,         // snapshot isolation: one rw in a longer cycle (G-SIb)
  kWriteSkew = 7,            // serializability: two transactions, two rw edges
  kAntiDependencyCycle = 8,  // serializability: two or more rw edges in a longer cycle
  kLongFork = 9,             // snapshot isolation: two or more rw edges, none adjacent
};

// "write cycle", "circular information flow", "order cycle", "lost update", "read skew",
// "missed effect", "write skew", "anti-dependency cycle", "long fork"; "" for kNone.
const char* CycleKindName(CycleKind kind);

// One violation found by a checker. A result, not an error.
//
// `txns` lists the transactions involved, the offending one first: for SESSION the transaction
// then its session predecessor; for INT the transaction; for EXT the reader then the writer of
// the value it read (when there is one); for NOCONFLICT the transaction that committed first
// then the other one. For the adya checker's cycles, the transactions of the cycle in order; for
// G1a and G1b the reader then the writer; for G-SIa the two ends of the edge.
struct Violation {
  std::string checker = "chronos";
  IsolationLevel level = IsolationLevel::kSnapshotIsolation;
  Anomaly anomaly = Anomaly::kExt;
  ExtKind ext_kind = ExtKind::kNone;
  ReadFault read_fault = ReadFault::kNone;  // what is wrong with the read, if one is
  CycleKind cycle_kind = CycleKind::kNone;  // what the cycle is, when the finding is one
  std::vector<TxnId> txns;
  KeyId key;                // invalid for SESSION
  std::string expected;     // rendered; empty when not applicable
  std::string observed;     // rendered; empty when not applicable
  std::string explanation;  // one sentence a person can follow
  // Source ids of transactions in `txns` that the history no longer holds (a live history
  // forgets final transactions), as the engine found them elsewhere; usually empty.
  std::vector<std::pair<TxnId, std::string>> released_names;
  // Every level the finding violates, for a checker that judges several levels at once (adya);
  // `level` is then the first of them. Empty: the finding is a violation of `level` only.
  std::vector<IsolationLevel> levels;
};

// The source id of transaction `id` of `v`: from the history, else from v.released_names, else
// "#<index>".
std::string TxnLabel(const history::History& h, const Violation& v, TxnId id);

// Sorts violations into a deterministic order that does not depend on when they became final:
// by anomaly, transactions (history order), key, EXT kind, expected and observed values.
void SortViolations(std::vector<Violation>& violations);

}  // namespace isowatch::verdict
