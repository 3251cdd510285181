// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {

// The history formats isowatch reads (and some it writes), by name (docs/history-format.md).
enum class FileFormat {
  kAuto,          // reading only: decided from the content (DetectFileFormat)
  kTimeKiller,    // TimeKiller JSON
  kNative,        // native, binary records (reading: binary or JSON lines)
  kNativeJson,    // native, JSON lines
  kEdn,           // Jepsen/Elle EDN
  kElleJson,      // elle-cli JSON
  kText,          // text r/w (PolySI, MTC, Plume, IsoVista)
  kCobra,         // Cobra client log directory (T*.log)
  kDbcopBincode,  // dbcop's old bincode (a file, or a directory holding history.bincode)
  kDbcopJson,     // dbcop JSON, old or new
  kViper,         // ViperBench JSON-lines directory (J*.log)
};

// What a format is and carries, for `isowatch formats` and for messages.
struct FormatDescription {
  FileFormat format;
  std::string_view name;     // as --format takes it
  std::string_view summary;  // one line: who writes it
  std::string_view carries;  // what ordering evidence it holds: timestamps, real time, none
  bool directory = false;    // its input is a directory of files, not one file
  bool writable = false;     // WriteHistoryFile can write it
  bool timestamps = false;   // it holds the database's start and commit timestamps
  // Detection by content: OK if `head` (up to kSniffBytes of a file, or for a directory format
  // the directory's path) may be in this format; else an error saying in a few words why not.
  absl::Status (*sniff)(std::string_view head) = nullptr;
};

// How much of a file detection reads.
inline constexpr size_t kSniffBytes = 4096;

// Every format, kAuto excluded, in the order detection tries them. dbcop is listed twice, as a
// file and as a directory.
std::span<const FormatDescription> Formats();
const FormatDescription& Describe(FileFormat format);

std::optional<FileFormat> ParseFileFormat(std::string_view name);  // "auto", "timekiller", ...
const char* FileFormatName(FileFormat format);
// The names --format takes (without "auto"), each once; only the writable ones if asked.
std::vector<std::string> FormatNames(bool writable_only = false);

// Decides the format of `path` (a file or a directory) from its content: the first format in
// Formats() order whose sniffer accepts it. Errors: NotFound (cannot open); InvalidArgument when
// no format fits, naming each format tried and why it did not fit.
absl::StatusOr<FileFormat> DetectFileFormat(const std::string& path);

// Reads `path` in `format` (kAuto: detected). On success `*used` (if given) is the format read.
absl::StatusOr<history::History> ReadHistoryFile(const std::string& path, FileFormat format,
                                                 const ReadOptions& options,
                                                 FileFormat* used = nullptr);

// Writes `h` to `path` in `format` (a writable one). For TimeKiller, a non-trivial initial state
// is written beside it to `<path>.init.json`. A history with database timestamps (start, commit,
// xids, snapshots) is refused by a format that cannot hold them, never written without them
// silently: history::WithoutTimestamps drops them on purpose.
absl::Status WriteHistoryFile(const history::History& h, const std::string& path,
                              FileFormat format);

}  // namespace isowatch::formats
