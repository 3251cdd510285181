// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/storage_schema.h"

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"

#include "collectors/tidb/internal/json_fields.h"

namespace isowatch::tidb {
namespace {

namespace dom = simdjson::dom;
using internal::FieldError;
using internal::Member;

constexpr std::string_view kSchemaFile = "storage schema file";

// A count or version written as a number or as a string of digits (TiCDC writes both).
absl::StatusOr<uint64_t> Number(const dom::element& element, std::string_view path) {
  uint64_t value = 0;
  std::string_view text;
  if (element.get(value) == simdjson::SUCCESS) return value;
  if (element.get(text) == simdjson::SUCCESS) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && error == std::errc() && end == text.data() + text.size()) return value;
  }
  return FieldError(kSchemaFile, path, "expected a non-negative integer");
}

}  // namespace

std::vector<std::string> StorageTableSchema::KeyColumns() const {
  std::vector<std::string> keys;
  for (const ColumnInfo& column : columns) {
    if (column.is_key) keys.push_back(column.name);
  }
  return keys;
}

absl::StatusOr<StorageTableSchema> ParseStorageTableSchema(std::string_view json) {
  dom::parser parser;
  ASSIGN_OR_RETURN(const dom::element root, internal::ParseJson(parser, json, kSchemaFile));
  ASSIGN_OR_RETURN(const dom::object object, internal::AsObject(root, kSchemaFile, "(file)"));
  StorageTableSchema out;
  ASSIGN_OR_RETURN(out.schema, internal::RequiredString(object, "Schema", kSchemaFile, "Schema"));
  ASSIGN_OR_RETURN(out.table, internal::OptionalString(object, "Table", kSchemaFile, "Table"));
  ASSIGN_OR_RETURN(out.query, internal::OptionalString(object, "Query", kSchemaFile, "Query"));
  const std::optional<dom::element> version = Member(object, "TableVersion");
  if (!version.has_value()) return FieldError(kSchemaFile, "TableVersion", "missing");
  ASSIGN_OR_RETURN(out.table_version, Number(*version, "TableVersion"));
  const std::optional<dom::element> columns = Member(object, "TableColumns");
  if (columns.has_value() && !columns->is_null()) {
    dom::array array;
    if (columns->get(array) != simdjson::SUCCESS) {
      return FieldError(kSchemaFile, "TableColumns", "expected an array");
    }
    for (const dom::element element : array) {
      const std::string path = fmt::format("TableColumns[{}]", out.columns.size());
      ASSIGN_OR_RETURN(const dom::object column, internal::AsObject(element, kSchemaFile, path));
      StorageTableSchema::ColumnInfo info;
      ASSIGN_OR_RETURN(info.name, internal::RequiredString(column, "ColumnName", kSchemaFile,
                                                           path + ".ColumnName"));
      ASSIGN_OR_RETURN(info.type, internal::OptionalString(column, "ColumnType", kSchemaFile,
                                                           path + ".ColumnType"));
      ASSIGN_OR_RETURN(
          const std::string is_pk,
          internal::OptionalString(column, "ColumnIsPk", kSchemaFile, path + ".ColumnIsPk"));
      if (!is_pk.empty() && is_pk != "true" && is_pk != "false") {
        return FieldError(kSchemaFile, path + ".ColumnIsPk",
                          fmt::format("\"{}\" is not \"true\" or \"false\"", is_pk));
      }
      info.is_key = is_pk == "true";
      out.columns.push_back(std::move(info));
    }
  }
  if (const std::optional<dom::element> total = Member(object, "TableColumnsTotal");
      total.has_value() && !total->is_null()) {
    ASSIGN_OR_RETURN(const uint64_t count, Number(*total, "TableColumnsTotal"));
    if (count != out.columns.size()) {
      return FieldError(
          kSchemaFile, "TableColumnsTotal",
          fmt::format("says {} columns, TableColumns has {}", count, out.columns.size()));
    }
  }
  return out;
}

absl::StatusOr<Tso> ParseStorageMetadata(std::string_view json) {
  constexpr std::string_view kMetadata = "storage metadata";
  dom::parser parser;
  ASSIGN_OR_RETURN(const dom::element root, internal::ParseJson(parser, json, kMetadata));
  ASSIGN_OR_RETURN(const dom::object object, internal::AsObject(root, kMetadata, "(file)"));
  const std::optional<dom::element> ts = Member(object, "checkpoint-ts");
  if (!ts.has_value()) return FieldError(kMetadata, "checkpoint-ts", "missing");
  return internal::AsTso(*ts, kMetadata, "checkpoint-ts");
}

}  // namespace isowatch::tidb
