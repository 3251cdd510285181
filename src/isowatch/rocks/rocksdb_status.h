// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "rocksdb/status.h"

namespace isowatch::rocks {

// The one adapter from rocksdb::Status to absl::Status. The code maps by kind (NotFound,
// Corruption -> DataLoss, IOError -> Unavailable, Busy/TimedOut -> Unavailable, ...); the message
// is `context: ` followed by RocksDB's own text.
absl::Status FromRocksStatus(const rocksdb::Status& status, std::string_view context);

}  // namespace isowatch::rocks
