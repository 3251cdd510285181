// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/storage_csv.h"

namespace isowatch::tidb {

// Reads the directory a TiCDC storage sink writes to (a local path, or a mounted bucket):
// docs/collectors/tidb.md, "Storage sink". Each Poll() returns the row changes of the data
// files that appeared since the last one, and the checkpoint as a Watermark.
//
// Layout read: `metadata` at the root; per table `{schema}/{table}/meta/schema_{version}_*.json`
// and data files `{schema}/{table}/{version}/.../CDC*.{csv|json}` (any partition and date
// directories between; `meta/` directories skipped). A data file is read once, whole, against
// the schema file of its table version. The checkpoint is read before the directory is listed,
// so every row below it is in a file the same Poll() reads.
//
// Thread-compatible.
class StorageSinkReader {
 public:
  enum class Format : uint8_t { kCsv, kCanalJson };

  StorageSinkReader(std::string root, Format format, StorageCsvOptions csv_options = {});

  // The events since the last call: rows (and, for canal-json, DDL) of new data files, in
  // path order, then a Watermark at the checkpoint if it moved forward. Before the sink has
  // written `metadata`, no watermark. Errors name the file: an unreadable or malformed
  // `metadata`, schema file or data file (then nothing of this Poll() counts as read, and the
  // next one tries again), a data file whose table version has no schema file.
  absl::StatusOr<std::vector<CdcEvent>> Poll();

  // How many data files have been read.
  size_t files_read() const { return read_.size(); }

 private:
  std::string root_;
  Format format_;
  StorageCsvOptions csv_options_;
  std::set<std::string> read_;
  std::optional<Tso> checkpoint_;
};

}  // namespace isowatch::tidb
