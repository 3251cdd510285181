// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/history_file.h"

#include <cctype>
#include <fstream>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/native.h"
#include "isowatch/formats/timekiller.h"

namespace isowatch::formats {

std::optional<FileFormat> ParseFileFormat(std::string_view name) {
  if (name == "auto") return FileFormat::kAuto;
  if (name == "timekiller") return FileFormat::kTimeKiller;
  if (name == "native") return FileFormat::kNative;
  if (name == "native-json") return FileFormat::kNativeJson;
  return std::nullopt;
}

const char* FileFormatName(FileFormat format) {
  switch (format) {
    case FileFormat::kAuto:
      return "auto";
    case FileFormat::kTimeKiller:
      return "timekiller";
    case FileFormat::kNative:
      return "native";
    case FileFormat::kNativeJson:
      return "native-json";
  }
  return "?";
}

absl::StatusOr<FileFormat> DetectFileFormat(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open file", path));
  char c = 0;
  while (in.get(c)) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    // A UTF-8 byte order mark before JSON.
    if (static_cast<unsigned char>(c) == 0xEF) {
      in.ignore(2);
      continue;
    }
    if (c == '[') return FileFormat::kTimeKiller;
    if (c == '{') return FileFormat::kNativeJson;
    return FileFormat::kNative;
  }
  // An empty file: the native reader gives the clearer answer.
  return FileFormat::kNative;
}

absl::StatusOr<history::History> ReadHistoryFile(const std::string& path, FileFormat format,
                                                 const ReadOptions& options, FileFormat* used) {
  if (format == FileFormat::kAuto) {
    ASSIGN_OR_RETURN(format, DetectFileFormat(path));
  }
  if (used != nullptr) *used = format;
  if (format == FileFormat::kTimeKiller) return ReadTimeKillerFile(path, options);
  return ReadNativeFile(path, options);
}

absl::Status WriteHistoryFile(const history::History& h, const std::string& path,
                              FileFormat format) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(fmt::format("{}: cannot write file", path));
  switch (format) {
    case FileFormat::kAuto:
      return absl::InvalidArgumentError("no format given for writing");
    case FileFormat::kTimeKiller: {
      RETURN_IF_ERROR(WriteTimeKiller(h, out));
      const auto& init = h.initial();
      if (!init.registers.empty() || !init.lists.empty()) {
        std::ofstream init_out(path + ".init.json", std::ios::trunc);
        RETURN_IF_ERROR(WriteTimeKillerInitial(h, init_out));
      }
      break;
    }
    case FileFormat::kNative:
      RETURN_IF_ERROR(WriteNative(h, NativeEncoding::kBinary, out));
      break;
    case FileFormat::kNativeJson:
      RETURN_IF_ERROR(WriteNative(h, NativeEncoding::kJsonLines, out));
      break;
  }
  out.flush();
  if (!out) return absl::DataLossError(fmt::format("{}: write failed", path));
  return absl::OkStatus();
}

}  // namespace isowatch::formats
