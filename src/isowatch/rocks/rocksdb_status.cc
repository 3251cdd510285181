// SPDX-License-Identifier: Apache-2.0
#include "isowatch/rocks/rocksdb_status.h"

#include <string>

#include "fmt/format.h"

namespace isowatch::rocks {

absl::Status FromRocksStatus(const rocksdb::Status& status, std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  const std::string message = fmt::format("{}: {}", context, status.ToString());
  switch (status.code()) {
    case rocksdb::Status::kNotFound:
      return absl::NotFoundError(message);
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(message);
    case rocksdb::Status::kNotSupported:
      return absl::UnimplementedError(message);
    case rocksdb::Status::kInvalidArgument:
      return absl::InvalidArgumentError(message);
    case rocksdb::Status::kIOError:
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kTryAgain:
    case rocksdb::Status::kIncomplete:
      return absl::UnavailableError(message);
    case rocksdb::Status::kAborted:
      return absl::AbortedError(message);
    case rocksdb::Status::kShutdownInProgress:
      return absl::CancelledError(message);
    case rocksdb::Status::kColumnFamilyDropped:
    case rocksdb::Status::kMergeInProgress:
    case rocksdb::Status::kExpired:
    case rocksdb::Status::kCompactionTooLarge:
    case rocksdb::Status::kOk:
    case rocksdb::Status::kMaxCode:
      break;
  }
  return absl::InternalError(message);
}

}  // namespace isowatch::rocks
