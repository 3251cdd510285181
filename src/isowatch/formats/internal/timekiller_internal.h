// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the TimeKiller reader and its tests: the readers with a chosen chunk size, so that
// tests can put chunk boundaries anywhere.

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats::internal {

// ReadTimeKillerString, reading the history document `chunk_size` bytes at a time.
absl::StatusOr<history::History> ReadTimeKillerStringChunked(std::string_view json,
                                                             const ReadOptions& options,
                                                             std::string_view source,
                                                             std::string_view initial_txn_json,
                                                             size_t chunk_size);

// ReadTimeKillerFile, reading the history file `chunk_size` bytes at a time.
absl::StatusOr<history::History> ReadTimeKillerFileChunked(const std::string& path,
                                                           const ReadOptions& options,
                                                           size_t chunk_size);

}  // namespace isowatch::formats::internal
