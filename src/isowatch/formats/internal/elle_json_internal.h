// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the elle-cli JSON reader and its tests: the file reader with a chosen mapping.

#include <string>

#include "absl/status/statusor.h"

#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats::internal {

// ReadElleJsonFile, with the file mapped into memory as `mapping` says (kAuto: as
// ReadElleJsonFile does).
absl::StatusOr<history::History> ReadElleJsonFileMapped(const std::string& path,
                                                        const ReadOptions& options,
                                                        FileMapping mapping);

}  // namespace isowatch::formats::internal
