// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/history_file.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/check.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/formats/internal/json_head.h"
#include "isowatch/formats/native.h"
#include "isowatch/formats/timekiller.h"

namespace isowatch::formats {

namespace {

absl::Status NotIt(std::string_view why) { return absl::InvalidArgumentError(std::string(why)); }

absl::Status SniffNativeBinary(std::string_view head) {
  if (internal::SkipBomAndSpace(head).empty()) return absl::OkStatus();  // an empty history
  if (LooksLikeNativeBinary(head)) return absl::OkStatus();
  return NotIt("does not start with a length-prefixed header or transaction record");
}

absl::Status SniffTimeKiller(std::string_view head) {
  const internal::JsonHead json = internal::ScanJsonHead(head);
  if (json.top != '[') return NotIt("not a JSON array");
  if (json.first == ']') return absl::OkStatus();  // an empty history
  if (json.first != '{') return NotIt("the array's first element is not an object");
  if (json.keys.empty() || json.Has("sts") || json.Has("cts") || json.Has("tid") ||
      json.Has("sid")) {
    return absl::OkStatus();
  }
  return NotIt("the first object has no \"tid\", \"sid\", \"sts\" or \"cts\"");
}

absl::Status SniffNativeJson(std::string_view head) {
  const internal::JsonHead json = internal::ScanJsonHead(head);
  if (json.top != '{') return NotIt("not a JSON object per line");
  if (json.Has("header") || json.Has("txn")) return absl::OkStatus();
  return NotIt("the first line has no \"header\" or \"txn\" record");
}

// The table. Detection tries the formats in this order: the binary ones first (a binary record
// can start with '[' or '{'), then those whose first bytes say the most.
const std::array kFormats = {
    FormatDescription{.format = FileFormat::kNative,
                      .name = "native",
                      .summary = "isowatch's own: length-prefixed isowatch.v1.HistoryRecord "
                                 "protobufs (reading: also its JSON lines)",
                      .carries = "everything the model holds",
                      .writable = true,
                      .sniff = SniffNativeBinary},
    FormatDescription{.format = FileFormat::kTimeKiller,
                      .name = "timekiller",
                      .summary = "TimeKiller (Chronos, Aion) JSON array of transactions",
                      .carries = "start and commit timestamps (HLC)",
                      .writable = true,
                      .sniff = SniffTimeKiller},
    FormatDescription{.format = FileFormat::kNativeJson,
                      .name = "native-json",
                      .summary = "isowatch's own, as JSON lines of the protobuf JSON mapping",
                      .carries = "everything the model holds",
                      .writable = true,
                      .sniff = SniffNativeJson},
};

}  // namespace

std::span<const FormatDescription> Formats() { return kFormats; }

const FormatDescription& Describe(FileFormat format) {
  for (const FormatDescription& d : kFormats) {
    if (d.format == format) return d;
  }
  ISOWATCH_CHECK(false, "every format but kAuto is described");
  return kFormats[0];
}

std::optional<FileFormat> ParseFileFormat(std::string_view name) {
  if (name == "auto") return FileFormat::kAuto;
  for (const FormatDescription& d : kFormats) {
    if (d.name == name) return d.format;
  }
  return std::nullopt;
}

const char* FileFormatName(FileFormat format) {
  if (format == FileFormat::kAuto) return "auto";
  return Describe(format).name.data();
}

absl::StatusOr<FileFormat> DetectFileFormat(const std::string& path) {
  std::error_code ec;
  const bool directory = std::filesystem::is_directory(path, ec);
  std::string head;
  if (!directory) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(fmt::format("{}: cannot open file", path));
    head.resize(kSniffBytes);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
  }
  std::vector<std::string> tried;
  for (const FormatDescription& d : kFormats) {
    if (d.directory != directory) continue;
    absl::Status fits = d.sniff(directory ? std::string_view(path) : std::string_view(head));
    if (fits.ok()) return d.format;
    tried.push_back(fmt::format("{}: {}", d.name, common::StdView(fits.message())));
  }
  std::vector<std::string_view> others;
  for (const FormatDescription& d : kFormats) {
    if (d.directory != directory) others.push_back(d.name);
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: no {} format fits ({}); give --format if it is one of them{}", path,
                  directory ? "directory" : "file", fmt::join(tried, "; "),
                  others.empty() ? ""
                                 : fmt::format(" (as a {}: {})", directory ? "file" : "directory",
                                               fmt::join(others, ", "))));
}

absl::StatusOr<history::History> ReadHistoryFile(const std::string& path, FileFormat format,
                                                 const ReadOptions& options, FileFormat* used) {
  if (format == FileFormat::kAuto) {
    ASSIGN_OR_RETURN(format, DetectFileFormat(path));
  }
  if (used != nullptr) *used = format;
  switch (format) {
    case FileFormat::kAuto:
      break;
    case FileFormat::kTimeKiller:
      return ReadTimeKillerFile(path, options);
    case FileFormat::kNative:
    case FileFormat::kNativeJson:
      return ReadNativeFile(path, options);
  }
  return absl::InvalidArgumentError("no format to read");
}

absl::Status WriteHistoryFile(const history::History& h, const std::string& path,
                              FileFormat format) {
  if (format == FileFormat::kAuto || !Describe(format).writable) {
    return absl::InvalidArgumentError(
        fmt::format("isowatch cannot write the {} format", FileFormatName(format)));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(fmt::format("{}: cannot write file", path));
  switch (format) {
    case FileFormat::kAuto:
      break;
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
