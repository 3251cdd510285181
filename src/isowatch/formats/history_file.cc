// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/history_file.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/check.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/formats/cobra.h"
#include "isowatch/formats/dbcop.h"
#include "isowatch/formats/edn.h"
#include "isowatch/formats/internal/json_head.h"
#include "isowatch/formats/native.h"
#include "isowatch/formats/text.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/formats/viper.h"

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

// The first kSniffBytes of the file at `path`; empty if it cannot be read.
std::string Head(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(kSniffBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(in ? head.size() : static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return head;
}

// The regular files of directory `dir` whose name `fits`, sorted by name.
template <typename Fits>
std::vector<std::filesystem::path> FilesIn(const std::string& dir, Fits fits) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && fits(entry.path().filename().string())) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status SniffCobraDir(std::string_view dir) {
  const auto logs = FilesIn(std::string(dir), [](const std::string& name) {
    return name.size() > 4 && name[0] == 'T' && name.ends_with(".log");
  });
  if (logs.empty()) return NotIt("no T*.log file");
  if (absl::Status fits = SniffCobra(Head(logs.front())); !fits.ok()) {
    return NotIt(
        fmt::format("{}: {}", logs.front().filename().string(), common::StdView(fits.message())));
  }
  return absl::OkStatus();
}

// The bincode history of a dbcop directory: `history.bincode`, or the one `hist-*/history.bincode`
// (an error names them when there are several).
absl::StatusOr<std::filesystem::path> DbcopHistoryIn(const std::string& dir) {
  const std::filesystem::path direct = std::filesystem::path(dir) / "history.bincode";
  std::error_code ec;
  if (std::filesystem::is_regular_file(direct, ec)) return direct;
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::filesystem::path candidate = entry.path() / "history.bincode";
    if (entry.is_directory(ec) && entry.path().filename().string().starts_with("hist-") &&
        std::filesystem::is_regular_file(candidate, ec)) {
      found.push_back(candidate);
    }
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) return NotIt("no history.bincode, nor hist-*/history.bincode");
  if (found.size() > 1) {
    return NotIt(fmt::format("{} histories ({} ... {}); give one of them", found.size(),
                             found.front().string(), found.back().string()));
  }
  return found.front();
}

absl::Status SniffDbcopDir(std::string_view dir) {
  ASSIGN_OR_RETURN(std::filesystem::path file, DbcopHistoryIn(std::string(dir)));
  return SniffDbcopBincode(Head(file));
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
                      .timestamps = true,
                      .sniff = SniffNativeBinary},
    FormatDescription{.format = FileFormat::kTimeKiller,
                      .name = "timekiller",
                      .summary = "TimeKiller (Chronos, Aion) JSON array of transactions",
                      .carries = "start and commit timestamps (HLC)",
                      .writable = true,
                      .timestamps = true,
                      .sniff = SniffTimeKiller},
    FormatDescription{.format = FileFormat::kNativeJson,
                      .name = "native-json",
                      .summary = "isowatch's own, as JSON lines of the protobuf JSON mapping",
                      .carries = "everything the model holds",
                      .writable = true,
                      .timestamps = true,
                      .sniff = SniffNativeJson},
    FormatDescription{.format = FileFormat::kDbcopBincode,
                      .name = "dbcop",
                      .summary = "dbcop's old bincode history (PolySI, VeriStrong, Plume): a "
                                 "history.bincode file",
                      .carries = "no timestamps (sessions and commit status only)",
                      .writable = true,
                      .sniff = SniffDbcopBincode},
    FormatDescription{.format = FileFormat::kElleJson,
                      .name = "elle-json",
                      .summary = "elle-cli's JSON: Jepsen operations as one array or JSON lines",
                      .carries = "real time (invoke and complete); database timestamps with the "
                                 "ts extension",
                      .writable = true,
                      .timestamps = true,
                      .sniff = SniffElleJson},
    FormatDescription{
        .format = FileFormat::kDbcopJson,
        .name = "dbcop-json",
        .summary = "dbcop's JSON history, old or new layout, wrapper or bare sessions",
        .carries = "no timestamps (sessions and commit status only)",
        .sniff = SniffDbcopJson},
    FormatDescription{.format = FileFormat::kEdn,
                      .name = "edn",
                      .summary = "Jepsen/Elle history.edn, list-append or rw-register",
                      .carries = "real time (invoke and complete); database timestamps with the "
                                 ":ts extension",
                      .writable = true,
                      .timestamps = true,
                      .sniff = SniffEdn},
    FormatDescription{.format = FileFormat::kText,
                      .name = "text",
                      .summary = "r/w(key,value,session,txn) lines of PolySI, MTC, Plume and "
                                 "IsoVista",
                      .carries = "no timestamps",
                      .writable = true,
                      .sniff = SniffText},
    FormatDescription{.format = FileFormat::kCobra,
                      .name = "cobra",
                      .summary = "a directory of Cobra client logs (T*.log, big-endian records)",
                      .carries = "no timestamps (real time in the time-order variant)",
                      .directory = true,
                      .writable = true,
                      .sniff = SniffCobraDir},
    FormatDescription{.format = FileFormat::kDbcopBincode,
                      .name = "dbcop",
                      .summary = "a dbcop run directory: history.bincode or one hist-*/",
                      .carries = "no timestamps (sessions and commit status only)",
                      .directory = true,
                      .writable = true,
                      .sniff = SniffDbcopDir},
    FormatDescription{.format = FileFormat::kViper,
                      .name = "viper",
                      .summary = "a ViperBench directory of JSON-lines logs (J*.log), with range "
                                 "reads",
                      .carries = "no timestamps (real time in ms when the logs record it)",
                      .directory = true,
                      .writable = true,
                      .sniff = SniffViperDir},
};

}  // namespace

std::span<const FormatDescription> Formats() { return kFormats; }

const FormatDescription& Describe(FileFormat format) {
  for (const FormatDescription& d : kFormats) {
    if (d.format == format && !d.directory) return d;
  }
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

std::vector<std::string> FormatNames(bool writable_only) {
  std::vector<std::string> out;
  for (const FormatDescription& d : kFormats) {
    if (writable_only && !d.writable) continue;
    if (std::find(out.begin(), out.end(), d.name) == out.end()) out.emplace_back(d.name);
  }
  return out;
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
  std::error_code ec;
  const bool directory = std::filesystem::is_directory(path, ec);
  switch (format) {
    case FileFormat::kAuto:
      break;
    case FileFormat::kTimeKiller:
      return ReadTimeKillerFile(path, options);
    case FileFormat::kNative:
    case FileFormat::kNativeJson:
      return ReadNativeFile(path, options);
    case FileFormat::kEdn:
      return ReadEdnFile(path, options);
    case FileFormat::kElleJson:
      return ReadElleJsonFile(path, options);
    case FileFormat::kText:
      return ReadTextFile(path, options);
    case FileFormat::kCobra:
      return ReadCobraDir(path, options);
    case FileFormat::kViper:
      return ReadViperDir(path, options);
    case FileFormat::kDbcopBincode:
      if (directory) {
        absl::StatusOr<std::filesystem::path> file = DbcopHistoryIn(path);
        if (!file.ok()) {
          return absl::InvalidArgumentError(
              fmt::format("{}: {}", path, common::StdView(file.status().message())));
        }
        return ReadDbcopBincodeFile(file->string(), options);
      }
      return ReadDbcopBincodeFile(path, options);
    case FileFormat::kDbcopJson:
      return ReadDbcopJsonFile(path, options);
  }
  return absl::InvalidArgumentError("no format to read");
}

namespace {
absl::Status WriteSingleFile(const history::History& h, const std::string& path,
                             const std::string& partial, FileFormat format);
}  // namespace

absl::Status WriteHistoryFile(const history::History& h, const std::string& path,
                              FileFormat format) {
  if (format == FileFormat::kAuto || !Describe(format).writable) {
    return absl::InvalidArgumentError(
        fmt::format("isowatch cannot write the {} format", FileFormatName(format)));
  }
  if (!Describe(format).timestamps &&
      (h.has_commit_timestamps() || h.has_start_timestamps() || h.has_snapshots())) {
    return absl::InvalidArgumentError(fmt::format(
        "the {} format cannot hold the history's database timestamps; drop them on purpose "
        "(--drop-timestamps) to write it as a black-box history",
        FileFormatName(format)));
  }
  if (format == FileFormat::kCobra) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return absl::PermissionDeniedError(fmt::format("{}: {}", path, ec.message()));
    return WriteCobraDir(h, path);
  }
  if (format == FileFormat::kViper) return WriteViperDir(h, path);
  // Written beside `path` and renamed over it once whole, so that a history a format cannot
  // express (found part-way) leaves no partial file, and an older file at `path` stays as it was.
  // What is not a regular file (/dev/stdout, a pipe) is written in place.
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    return WriteSingleFile(h, path, path, format);
  }
  const std::string partial = path + ".partial";
  absl::Status status = WriteSingleFile(h, path, partial, format);
  if (status.ok()) {
    std::filesystem::rename(partial, path, ec);
    if (ec) {
      status = absl::DataLossError(
          fmt::format("{}: cannot rename {} over it: {}", path, partial, ec.message()));
    }
  }
  if (!status.ok()) std::filesystem::remove(partial, ec);
  return status;
}

namespace {

absl::Status WriteSingleFile(const history::History& h, const std::string& path,
                             const std::string& partial, FileFormat format) {
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(fmt::format("{}: cannot write file", partial));
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
    case FileFormat::kEdn:
      RETURN_IF_ERROR(WriteEdn(h, out));
      break;
    case FileFormat::kText:
      RETURN_IF_ERROR(WriteText(h, out));
      break;
    case FileFormat::kDbcopBincode:
      RETURN_IF_ERROR(WriteDbcopBincode(h, out));
      break;
    case FileFormat::kElleJson:
      RETURN_IF_ERROR(WriteElleJson(h, out));
      break;
    case FileFormat::kDbcopJson:
    case FileFormat::kCobra:
    case FileFormat::kViper:
      break;
  }
  out.flush();
  if (!out) return absl::DataLossError(fmt::format("{}: write failed", partial));
  return absl::OkStatus();
}

}  // namespace

}  // namespace isowatch::formats
