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

}  // namespace isowatch::store
