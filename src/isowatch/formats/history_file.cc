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
  char head[64] = {};
  in.read(head, sizeof(head));
  std::string_view bytes(head, static_cast<size_t>(in.gcount()));
  // A binary record's length byte can look like '[' or '{'; binary files are recognised first.
  if (LooksLikeNativeBinary(bytes)) return FileFormat::kNative;
  size_t i = 0;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // a UTF-8 byte order mark
  while (i < bytes.size() && std::isspace(static_cast<unsigned char>(bytes[i]))) ++i;
  if (i == bytes.size()) return FileFormat::kNative;  // empty: the native reader answers best
  if (bytes[i] == '[') return FileFormat::kTimeKiller;
  if (bytes[i] == '{') return FileFormat::kNativeJson;
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
