// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {

// The native history format (docs/history-format.md): a sequence of isowatch.v1.HistoryRecord
// messages, a Header first and then one Transaction each, in one of two encodings:
//  - binary: each record as a varint length followed by the serialized message;
//  - JSON lines: each record as one line of the protobuf JSON mapping.
// Readers stream record by record. Errors (InvalidArgument) name the source and the record
// number and byte offset (binary) or line (JSON lines).
enum class NativeEncoding { kBinary, kJsonLines };

// Reads a native file, detecting the encoding from its first byte ('{' = JSON lines).
absl::StatusOr<history::History> ReadNativeFile(const std::string& path, const ReadOptions& options);
absl::StatusOr<history::History> ReadNativeString(std::string_view data, const ReadOptions& options,
                                                  std::string_view source);

absl::Status WriteNative(const history::History& h, NativeEncoding encoding, std::ostream& out);

}  // namespace isowatch::formats
