// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/client_log_writer.h"

#include <utility>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

namespace isowatch::tidb {

absl::StatusOr<std::unique_ptr<ClientLogWriter>> ClientLogWriter::Create(const std::string& path,
                                                                         const v1::Header& header) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(fmt::format("cannot create {}", path));
  std::unique_ptr<ClientLogWriter> w(new ClientLogWriter(path, std::move(out)));
  v1::HistoryRecord record;
  *record.mutable_header() = header;
  if (absl::Status s = w->WriteRecord(record); !s.ok()) return s;
  if (absl::Status s = w->Flush(); !s.ok()) return s;
  return w;
}

absl::Status ClientLogWriter::WriteRecord(const v1::HistoryRecord& record) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  line_.clear();
  if (!google::protobuf::util::MessageToJsonString(record, &line_, options).ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: a record cannot be written as JSON", path_));
  }
  line_.push_back('\n');
  out_.write(line_.data(), static_cast<std::streamsize>(line_.size()));
  if (!out_) return absl::UnavailableError(fmt::format("writing {} failed", path_));
  return absl::OkStatus();
}

absl::Status ClientLogWriter::Write(const v1::Transaction& txn) {
  v1::HistoryRecord record;
  *record.mutable_txn() = txn;
  return WriteRecord(record);
}

absl::Status ClientLogWriter::Flush() {
  out_.flush();
  if (!out_) return absl::UnavailableError(fmt::format("writing {} failed", path_));
  return absl::OkStatus();
}

}  // namespace isowatch::tidb
