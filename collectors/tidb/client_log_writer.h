// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/v1/history.pb.h"

namespace isowatch::tidb {

// Writes a client log: the native history format in JSON lines (docs/history-format.md), a
// header and then one transaction a line, as they come, so that a run can be joined again later
// (`isowatch-tidb --client-log`) or checked offline. Each Flush pushes what was written to the
// operating system; a log cut short by a crash ends at a line boundary. Thread-compatible.
class ClientLogWriter {
 public:
  // Creates (truncates) `path` and writes `header`. Errors: Unavailable (cannot be written).
  static absl::StatusOr<std::unique_ptr<ClientLogWriter>> Create(const std::string& path,
                                                                 const v1::Header& header);

  // Errors: InvalidArgument (the record cannot be written as JSON), Unavailable.
  absl::Status Write(const v1::Transaction& txn);
  absl::Status Flush();

 private:
  ClientLogWriter(std::string path, std::ofstream out)
      : path_(std::move(path)), out_(std::move(out)) {}
  absl::Status WriteRecord(const v1::HistoryRecord& record);

  std::string path_;
  std::ofstream out_;
  std::string line_;
};

}  // namespace isowatch::tidb
