// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "collectors/tidb/cdc_event.h"

// The JSON files of TiCDC's storage sink other than data: the table schema files
// (`{schema}/{table}/meta/schema_{version}_{checksum}.json`, and `{schema}/meta/...` for a
// database) and the `metadata` file at the root. docs/collectors/tidb.md, "Storage sink".

namespace isowatch::tidb {

// A table's schema as one version of its schema file gives it.
struct StorageTableSchema {
  struct ColumnInfo {
    std::string name;
    std::string type;  // "INT", "VARCHAR", ...
    bool is_key = false;

    bool operator==(const ColumnInfo&) const = default;
  };
  std::string schema;
  std::string table;  // empty for a database's schema file
  uint64_t table_version = 0;
  std::string query;  // the DDL that made this version
  std::vector<ColumnInfo> columns;

  // The names of the key columns, in column order.
  std::vector<std::string> KeyColumns() const;
};

// Parses a schema file. `Schema`, `Table`, `TableVersion` and `TableColumns` (each with
// `ColumnName`, `ColumnType` and, for key columns, `ColumnIsPk: "true"`) are read; other
// fields are ignored. INVALID_ARGUMENT, naming the field, for anything malformed, and when
// `TableColumnsTotal` (if present) is not the number of columns.
absl::StatusOr<StorageTableSchema> ParseStorageTableSchema(std::string_view json);

// Parses the `metadata` file: `{"checkpoint-ts": N}`, the storage sink's checkpoint (the data
// files hold every row change committed up to it). As a Watermark it is used at N, which
// promises only what is below N: safe whether the checkpoint includes N or not.
// INVALID_ARGUMENT for anything but an object with a TSO `checkpoint-ts`.
absl::StatusOr<Tso> ParseStorageMetadata(std::string_view json);

}  // namespace isowatch::tidb
