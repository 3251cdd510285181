// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace isowatch::store {

// A final violation as the daemon keeps and serves it: self-contained (it no longer refers to
// transactions in memory), with the fields the HTTP API filters on.
struct ViolationRecord {
  // Stable id: the same violation found again (after a restart, a re-sent batch) gets the same
  // id, so it is stored and reported once.
  std::string id;
  std::string checker;               // "online", "chronos", "adya", ...
  std::string level;                 // "si", "ser", ...
  std::string anomaly;               // "SESSION", "INT", "EXT", "NOCONFLICT", ...
  std::string ext_kind;              // "never", "before", ...; empty when not EXT
  std::vector<std::string> streams;  // the streams of the transactions involved
  int64_t finalised_unix_ms = 0;     // wall-clock time the verdict became final
  // The violation as one JSON object with the fields of `isowatch check --json`'s violations
  // (anomaly, ext_kind, txns, key, expected, observed, explanation).
  std::string json;

  // What findings are bounded by (docs/operations.md, "Bounded findings"): the key, and the
  // transactions at fault with their streams, as `json` names them. The store groups violations
  // by them and keeps no field of its own for them: a record read back has them empty.
  struct Txn {
    std::string id;      // as in the source
    std::string stream;  // empty: unknown

    bool operator==(const Txn&) const = default;
  };
  std::string key;  // empty: none (SESSION)
  std::vector<Txn> txns;
};

// What the metrics count violations by: the checker that found them, the level and the anomaly.
struct ViolationKind {
  std::string checker;
  std::string level;
  std::string anomaly;

  auto operator<=>(const ViolationKind&) const = default;
};

// A filter over stored violations; unset fields match everything.
struct ViolationFilter {
  std::optional<std::string> level;
  std::optional<std::string> anomaly;
  std::optional<std::string> checker;
  std::optional<std::string> stream;     // any of the record's streams
  std::optional<int64_t> since_unix_ms;  // finalised at or after
  std::optional<int64_t> until_unix_ms;  // finalised before
};

struct ViolationPage {
  std::vector<ViolationRecord> violations;  // in the order they became final
  std::string next_page_token;              // empty on the last page
};

// How many violations the store keeps in full (docs/operations.md, "Bounded findings"). A
// violation is stored in full while its kind has kept fewer than max_per_key on its key and
// fewer than max_per_txn on each of its first two transactions, and the stored violations'
// bytes are below max_bytes; otherwise it is counted in a summary: of the first of those groups
// that is full, or of its kind once max_bytes is reached. 0: no bound.
struct ViolationBounds {
  uint64_t max_per_key = 0;
  uint64_t max_per_txn = 0;
  uint64_t max_bytes = 0;

  bool operator==(const ViolationBounds&) const = default;
};

// What the store holds of violations.
struct ViolationSpace {
  uint64_t bytes = 0;      // encoded: the stored violations, their ids and the summaries
  uint64_t summaries = 0;  // summaries that count at least one violation
  // ViolationBounds::max_bytes is reached: no violation is stored in full any more. Not stored.
  bool limit_reached = false;
};

// What a summary groups: the violations of one kind on one key, of one kind with one transaction
// at fault, or of one kind past the store's limit.
enum class SummaryScope : uint8_t { kKey = 0, kTxn = 1, kKind = 2 };
const char* SummaryScopeName(SummaryScope scope);  // "key", "txn", "kind"

// One violation counted in a summary, as the summary remembers it.
struct SummarisedViolation {
  std::string id;
  int64_t finalised_unix_ms = 0;
  std::vector<std::string> txns;  // their ids, as in the source

  bool operator==(const SummarisedViolation&) const = default;
};

// A group of violations of one kind (docs/operations.md, "Bounded findings"): how many the store
// kept in full and how many it counted here instead, with the first and the last of those.
struct ViolationSummary {
  SummaryScope scope = SummaryScope::kKey;
  std::string checker;
  std::string level;
  std::string anomaly;
  std::string subject;        // the key (kKey) or the transaction's id (kTxn); empty for kKind
  std::string stream;         // kTxn: the transaction's stream (empty: unknown)
  uint64_t kept = 0;          // stored in full
  uint64_t summarised = 0;    // counted here, not stored
  SummarisedViolation first;  // of the summarised; empty while there is none
  SummarisedViolation last;
  std::vector<std::string> streams;  // of the summarised violations, at most kMaxStreams
  static constexpr size_t kMaxStreams = 8;

  bool operator==(const ViolationSummary&) const = default;
};

// What the store did with a violation.
enum class ViolationFate : uint8_t {
  kDuplicate,   // one with its id was stored or summarised before: nothing done
  kStored,      // stored in full
  kSummarised,  // counted in `summary`
};

struct ViolationOutcome {
  ViolationFate fate = ViolationFate::kDuplicate;
  ViolationSummary summary;  // kSummarised: the summary after the violation was counted in it
};

// What the store did with a batch of violations.
struct AddedViolations {
  std::vector<ViolationFate> fates;  // one per violation, in order
  // The summaries the batch counted violations in, as after the batch, with how many each got.
  struct Summarised {
    ViolationSummary summary;
    uint64_t count = 0;
  };
  std::vector<Summarised> summarised;
};

// A filter over summaries; unset fields match everything. Summaries of no violation (groups
// whose violations were all kept in full) never match.
struct SummaryFilter {
  std::optional<std::string> level;
  std::optional<std::string> anomaly;
  std::optional<std::string> checker;
  std::optional<SummaryScope> scope;
};

struct SummaryPage {
  std::vector<ViolationSummary> summaries;  // by scope, checker, level, anomaly, stream, subject
  std::string next_page_token;              // empty on the last page
};

}  // namespace isowatch::store
