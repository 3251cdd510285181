// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the storage-sink CSV decoder (collectors/tidb/storage_csv.h) and,
// from the same bytes, to the schema and metadata file parsers (storage_schema.h). The first
// byte picks the CSV options (bit 0: is-update column, bit 1: CRLF terminator, bit 2: no
// quoting); the rest is a data file of a two-column table `test`.`t`. Nothing may crash;
// every decoded row must have the table's two columns and a commit ts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/storage_csv.h"
#include "collectors/tidb/storage_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view content(reinterpret_cast<const char*>(data) + 1, size - 1);
  (void)isowatch::tidb::ParseStorageTableSchema(content);
  (void)isowatch::tidb::ParseStorageMetadata(content);
  isowatch::tidb::StorageCsvOptions options;
  options.output_old_value = (data[0] & 1) != 0;
  options.terminator = (data[0] & 2) != 0 ? "\r\n" : "\n";
  if ((data[0] & 4) != 0) options.quote = '\0';
  const isowatch::tidb::StorageTableSchema table{
      .schema = "test", .table = "t", .columns = {{"id", "INT", true}, {"pad", "VARCHAR", false}}};
  auto rows = isowatch::tidb::DecodeStorageCsv(content, table, options);
  if (!rows.ok()) return 0;
  for (const isowatch::tidb::RowChange& row : *rows) {
    if (row.commit_ts == 0 || row.columns.size() != 2 || row.table != "t") std::abort();
  }
  return 0;
}
