// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

// The common form every TiCDC decoder of this collector produces (docs/collectors/tidb.md,
// "Decoding"): row changes with their commit TSO, schema changes, and resolved-ts watermarks.

namespace isowatch::tidb {

// A TiDB timestamp from PD: the physical time in milliseconds shifted left by 18 bits, or'ed
// with an 18-bit logical counter. Compared as a 64-bit number.
using Tso = uint64_t;

inline constexpr int kTsoLogicalBits = 18;
inline constexpr uint64_t TsoPhysicalMs(Tso ts) { return ts >> kTsoLogicalBits; }
inline constexpr uint64_t TsoLogical(Tso ts) { return ts & ((uint64_t{1} << kTsoLogicalBits) - 1); }
inline constexpr Tso MakeTso(uint64_t physical_ms, uint64_t logical) {
  return (physical_ms << kTsoLogicalBits) | logical;
}

// One column of a row. std::nullopt is SQL NULL. Values are text: numbers as their decimal
// digits, strings as their bytes (the open protocol's base64 is decoded).
struct Column {
  std::string name;
  std::optional<std::string> value;

  bool operator==(const Column&) const = default;
};

enum class RowOp : uint8_t { kInsert, kUpdate, kDelete };

// "INSERT", "UPDATE", "DELETE".
const char* RowOpName(RowOp op);

// The operation named "INSERT", "UPDATE", "DELETE", or by their initials "I", "U", "D" (as
// the storage sink's CSV writes them); std::nullopt for any other name.
std::optional<RowOp> RowOpFromName(std::string_view name);

// One committed row change. Rows of one transaction share `commit_ts`; nothing on the wire
// groups them otherwise.
struct RowChange {
  std::string schema;
  std::string table;
  RowOp op = RowOp::kInsert;
  Tso commit_ts = 0;  // never 0: a decoder refuses a row without a commit ts
  // The names of the row's key columns (primary key, or the unique key TiCDC used as the
  // handle), as far as the message says; empty when it does not.
  std::vector<std::string> key_columns;
  // Insert, update: the new row. Delete: the deleted row (with the open protocol, possibly
  // only its key columns).
  std::vector<Column> columns;
  // Update: the previous row, when the message carries it; empty otherwise.
  std::vector<Column> old_columns;

  bool operator==(const RowChange&) const = default;

  // The value of column `name` in `columns`; nullptr if there is no such column.
  const Column* Find(const std::string& name) const;
};

// A resolved ts: the stream it arrived on has sent every row change it will send with a
// commit ts below `ts` (docs/collectors/tidb.md, "Watermarks" for why "below" and not "at or
// below").
struct Watermark {
  Tso ts = 0;

  bool operator==(const Watermark&) const = default;
};

// A DDL statement, in commit order with the rows.
struct SchemaChange {
  std::string schema;
  std::string table;
  Tso commit_ts = 0;
  std::string query;

  bool operator==(const SchemaChange&) const = default;
};

using CdcEvent = std::variant<RowChange, Watermark, SchemaChange>;

// A byte string that is equal for two row changes exactly when they are the same change:
// same table, operation, commit ts and column values, whatever the order of the columns.
// The grouper de-duplicates on it.
std::string RowFingerprint(const RowChange& row);

}  // namespace isowatch::tidb
