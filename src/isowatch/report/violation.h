// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "isowatch/common/strong_id.h"

namespace isowatch::report {

enum class IsolationLevel : uint8_t {
  kSnapshotIsolation = 0,
  kSerializable = 1,
};

const char* IsolationLevelName(IsolationLevel level);  // "si", "ser"
std::optional<IsolationLevel> ParseIsolationLevel(std::string_view name);

enum class Anomaly : uint8_t {
  kSession = 0,     // a transaction does not see its session predecessor
  kInt = 1,         // an internal read disagrees with the transaction's own earlier operations
  kExt = 2,         // an external read disagrees with the snapshot
  kNoConflict = 3,  // two concurrent transactions wrote the same key
};

const char* AnomalyName(Anomaly anomaly);  // "SESSION", "INT", "EXT", "NOCONFLICT"

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

// One violation found by a checker. A result, not an error.
//
// `txns` lists the transactions involved, the offending one first: for SESSION the transaction
// then its session predecessor; for INT the transaction; for EXT the reader then the writer of
// the value it read (when there is one); for NOCONFLICT the transaction that committed first
// then the other one.
struct Violation {
  std::string checker = "chronos";
  IsolationLevel level = IsolationLevel::kSnapshotIsolation;
  Anomaly anomaly = Anomaly::kExt;
  ExtKind ext_kind = ExtKind::kNone;
  std::vector<TxnId> txns;
  KeyId key;                // invalid for SESSION
  std::string expected;     // rendered; empty when not applicable
  std::string observed;     // rendered; empty when not applicable
  std::string explanation;  // one sentence a person can follow
  // Source ids of transactions in `txns` that the history no longer holds (a live history
  // forgets final transactions), as the engine found them elsewhere; usually empty.
  std::vector<std::pair<TxnId, std::string>> released_names;
};

}  // namespace isowatch::report
