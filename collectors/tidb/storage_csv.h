// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/storage_schema.h"

// The CSV data files of TiCDC's storage sink (`protocol=csv`): docs/collectors/tidb.md,
// "Storage sink". Decoding only: no I/O, no state.

namespace isowatch::tidb {

// The changefeed's `[sink.csv]` settings a file was written with.
struct StorageCsvOptions {
  char delimiter = ',';
  char quote = '"';  // '\0': values are not quoted
  std::string null_text = "\\N";
  std::string terminator = "\r\n";  // `terminator = ""` in the changefeed means CRLF
  bool include_commit_ts = true;    // required: a file without commit ts is refused
  bool output_old_value = false;    // the `is-update` column after the commit ts
};

// Decodes one data file of table `table` (its schema file at the table version of the file's
// directory). Each record is `op` (I, U or D), table, schema, commit ts, [is-update,] then one
// value per column of `table`, in order; a quoted value may hold the delimiter, the terminator
// and doubled quotes; `null_text` unquoted is NULL. Rows come out in file order, with key
// columns from the schema. With `output_old_value`, TiCDC writes an update as a D and an I
// (is-update true) of the same commit ts; they come out as that delete and that insert.
//
// Errors (INVALID_ARGUMENT, naming the line and column): a bad op, table or schema other than
// `table`'s, a commit ts that is not a TSO, an is-update other than true/false, a value count
// other than the table's column count, an unterminated quote, text after a closing quote, an
// empty record; FAILED_PRECONDITION for options without the commit ts.
absl::StatusOr<std::vector<RowChange>> DecodeStorageCsv(std::string_view content,
                                                        const StorageTableSchema& table,
                                                        const StorageCsvOptions& options);

}  // namespace isowatch::tidb
