// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {

// The history file formats isowatch reads and writes by name.
enum class FileFormat {
  kAuto,        // reading only: decided from the file's first bytes
  kTimeKiller,  // TimeKiller JSON
  kNative,      // native, binary records (reading: binary or JSON lines)
  kNativeJson,  // native, JSON lines
};

std::optional<FileFormat> ParseFileFormat(std::string_view name);  // "auto", "timekiller", ...
const char* FileFormatName(FileFormat format);

// Decides the format of the file at `path` from its first non-blank byte: '[' = TimeKiller,
// '{' = native JSON lines, anything else = native binary. Errors: unreadable file.
absl::StatusOr<FileFormat> DetectFileFormat(const std::string& path);

// Reads `path` in `format` (kAuto: detected). On success `*used` (if given) is the format read.
absl::StatusOr<history::History> ReadHistoryFile(const std::string& path, FileFormat format,
                                                 const ReadOptions& options,
                                                 FileFormat* used = nullptr);

// Writes `h` to `path` in `format` (not kAuto). For TimeKiller, a non-trivial initial state is
// written beside it to `<path>.init.json`.
absl::Status WriteHistoryFile(const history::History& h, const std::string& path,
                              FileFormat format);

}  // namespace isowatch::formats
