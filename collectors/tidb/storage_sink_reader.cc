// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/storage_sink_reader.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"

#include "collectors/tidb/canal_json.h"
#include "collectors/tidb/storage_schema.h"

namespace isowatch::tidb {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadWholeFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnavailableError(fmt::format("cannot read {}", path.string()));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::UnavailableError(fmt::format("cannot read {}", path.string()));
  return content;
}

// `status` with "<path>: " in front of its message.
absl::Status InFile(const fs::path& path, const absl::Status& status) {
  return absl::Status(status.code(),
                      fmt::format("{}: {}", path.string(), common::StdView(status.message())));
}

// A table's data files, with their table version: every regular `CDC*.<extension>` below
// `{table}/{version}/`, skipping `meta/` directories.
absl::Status ListDataFiles(const fs::path& table_dir, std::string_view extension,
                           std::vector<std::pair<uint64_t, fs::path>>& out) {
  std::error_code ec;
  for (const fs::directory_entry& version_dir : fs::directory_iterator(table_dir, ec)) {
    const std::string name = version_dir.path().filename().string();
    uint64_t version = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), version);
    if (!version_dir.is_directory() || error != std::errc() || end != name.data() + name.size()) {
      continue;  // `meta/`, or anything that is not a table version
    }
    for (auto it = fs::recursive_directory_iterator(version_dir.path(), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory() && it->path().filename() == "meta") {
        it.disable_recursion_pending();
        continue;
      }
      const std::string file = it->path().filename().string();
      if (it->is_regular_file() && file.starts_with("CDC") && file.ends_with(extension)) {
        out.emplace_back(version, it->path());
      }
    }
  }
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot list {}: {}", table_dir.string(), ec.message()));
  }
  return absl::OkStatus();
}

// The schema files of a table, by table version.
absl::StatusOr<std::map<uint64_t, StorageTableSchema>> ReadSchemas(const fs::path& table_dir) {
  std::map<uint64_t, StorageTableSchema> schemas;
  std::error_code ec;
  const fs::path meta = table_dir / "meta";
  if (!fs::is_directory(meta, ec)) return schemas;
  for (const fs::directory_entry& entry : fs::directory_iterator(meta, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !name.starts_with("schema_") || !name.ends_with(".json")) {
      continue;
    }
    ASSIGN_OR_RETURN(const std::string content, ReadWholeFile(entry.path()));
    absl::StatusOr<StorageTableSchema> schema = ParseStorageTableSchema(content);
    if (!schema.ok()) return InFile(entry.path(), schema.status());
    const uint64_t version = schema->table_version;
    schemas[version] = *std::move(schema);
  }
  if (ec) {
    return absl::UnavailableError(fmt::format("cannot list {}: {}", meta.string(), ec.message()));
  }
  return schemas;
}

}  // namespace

StorageSinkReader::StorageSinkReader(std::string root, Format format, StorageCsvOptions csv_options)
    : root_(std::move(root)), format_(format), csv_options_(std::move(csv_options)) {}

absl::StatusOr<std::vector<CdcEvent>> StorageSinkReader::Poll() {
  const fs::path root(root_);
  std::error_code ec;
  std::optional<Tso> checkpoint;
  if (const fs::path metadata = root / "metadata"; fs::exists(metadata, ec)) {
    ASSIGN_OR_RETURN(const std::string content, ReadWholeFile(metadata));
    absl::StatusOr<Tso> ts = ParseStorageMetadata(content);
    if (!ts.ok()) return InFile(metadata, ts.status());
    checkpoint = *ts;
  }
  const std::string_view extension = format_ == Format::kCsv ? ".csv" : ".json";
  std::vector<CdcEvent> events;
  std::vector<std::string> newly_read;
  std::vector<fs::path> table_dirs;
  for (const fs::directory_entry& schema_dir : fs::directory_iterator(root, ec)) {
    if (!schema_dir.is_directory()) continue;
    for (const fs::directory_entry& table_dir : fs::directory_iterator(schema_dir.path(), ec)) {
      if (table_dir.is_directory() && table_dir.path().filename() != "meta") {
        table_dirs.push_back(table_dir.path());
      }
    }
  }
  if (ec) {
    return absl::UnavailableError(fmt::format("cannot list {}: {}", root_, ec.message()));
  }
  std::sort(table_dirs.begin(), table_dirs.end());
  for (const fs::path& table_dir : table_dirs) {
    std::vector<std::pair<uint64_t, fs::path>> files;
    RETURN_IF_ERROR(ListDataFiles(table_dir, extension, files));
    std::sort(files.begin(), files.end());
    std::optional<std::map<uint64_t, StorageTableSchema>> schemas;
    for (const auto& [version, path] : files) {
      if (read_.contains(path.string())) continue;
      ASSIGN_OR_RETURN(const std::string content, ReadWholeFile(path));
      if (format_ == Format::kCanalJson) {
        size_t line = 0;
        for (std::string_view rest = content; !rest.empty();) {
          const size_t end = rest.find('\n');
          std::string_view record = rest.substr(0, end);
          rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
          ++line;
          if (record.ends_with('\r')) record.remove_suffix(1);
          absl::StatusOr<std::vector<CdcEvent>> decoded = DecodeCanalJson(record);
          if (!decoded.ok()) {
            return InFile(path,
                          absl::Status(decoded.status().code(),
                                       fmt::format("line {}: {}", line,
                                                   common::StdView(decoded.status().message()))));
          }
          for (CdcEvent& event : *decoded) events.push_back(std::move(event));
        }
      } else {
        if (!schemas.has_value()) {
          ASSIGN_OR_RETURN(schemas, ReadSchemas(table_dir));
        }
        const auto schema = schemas->find(version);
        if (schema == schemas->end()) {
          return absl::FailedPreconditionError(
              fmt::format("{}: no schema file for table version {} in {}", path.string(), version,
                          (table_dir / "meta").string()));
        }
        absl::StatusOr<std::vector<RowChange>> rows =
            DecodeStorageCsv(content, schema->second, csv_options_);
        if (!rows.ok()) return InFile(path, rows.status());
        for (RowChange& row : *rows) events.emplace_back(std::move(row));
      }
      newly_read.push_back(path.string());
    }
  }
  read_.insert(newly_read.begin(), newly_read.end());
  if (checkpoint.has_value() && (!checkpoint_.has_value() || *checkpoint > *checkpoint_)) {
    checkpoint_ = checkpoint;
    events.emplace_back(Watermark{*checkpoint});
  }
  return events;
}

}  // namespace isowatch::tidb
