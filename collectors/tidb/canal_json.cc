// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/canal_json.h"

#include <optional>
#include <string>
#include <string_view>
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

constexpr std::string_view kProtocol = "canal-json";

absl::StatusOr<std::vector<Column>> DecodeRow(const dom::element& element, std::string_view path) {
  ASSIGN_OR_RETURN(const dom::object object, internal::AsObject(element, kProtocol, path));
  std::vector<Column> columns;
  for (const dom::key_value_pair field : object) {
    const std::string field_path = fmt::format("{}.{}", path, field.key);
    ASSIGN_OR_RETURN(std::optional<std::string> value,
                     internal::ColumnValue(field.value, kProtocol, field_path));
    columns.push_back(Column{std::string(field.key), std::move(value)});
  }
  return columns;
}

// `data` or `old`: an array of row objects; missing or null is an empty list.
absl::StatusOr<std::vector<std::vector<Column>>> DecodeRows(const dom::object& message,
                                                            std::string_view key) {
  std::vector<std::vector<Column>> rows;
  const std::optional<dom::element> member = Member(message, key);
  if (!member.has_value() || member->is_null()) return rows;
  dom::array array;
  if (member->get(array) != simdjson::SUCCESS) {
    return FieldError(kProtocol, key,
                      fmt::format("expected an array, found {}", internal::JsonTypeName(*member)));
  }
  for (const dom::element element : array) {
    ASSIGN_OR_RETURN(std::vector<Column> row,
                     DecodeRow(element, fmt::format("{}[{}]", key, rows.size())));
    rows.push_back(std::move(row));
  }
  return rows;
}

// The `_tidb` object, or std::nullopt when the message has none (or null).
absl::StatusOr<std::optional<dom::object>> Extension(const dom::object& message) {
  const std::optional<dom::element> member = Member(message, "_tidb");
  if (!member.has_value() || member->is_null()) return std::nullopt;
  ASSIGN_OR_RETURN(const dom::object extension, internal::AsObject(*member, kProtocol, "_tidb"));
  return extension;
}

// The TSO in `_tidb.<field>`; FAILED_PRECONDITION naming `what` when it is absent.
absl::StatusOr<Tso> ExtensionTso(const std::optional<dom::object>& extension,
                                 std::string_view field, std::string_view what) {
  std::optional<dom::element> member;
  if (extension.has_value()) member = Member(*extension, field);
  if (!member.has_value() || member->is_null()) {
    return absl::FailedPreconditionError(fmt::format(
        "canal-json: {} without _tidb.{}: the changefeed must set enable-tidb-extension=true "
        "(\"es\" is only the physical part of the commit ts, not the commit ts)",
        what, field));
  }
  return internal::AsTso(*member, kProtocol, fmt::format("_tidb.{}", field));
}

absl::StatusOr<std::vector<CdcEvent>> DecodeRowMessage(const dom::object& message, RowOp op,
                                                       const std::optional<dom::object>& ext) {
  ASSIGN_OR_RETURN(const std::string schema,
                   internal::RequiredString(message, "database", kProtocol, "database"));
  ASSIGN_OR_RETURN(const std::string table,
                   internal::RequiredString(message, "table", kProtocol, "table"));
  ASSIGN_OR_RETURN(
      const Tso commit_ts,
      ExtensionTso(ext, "commitTs", fmt::format("{} of {}.{}", RowOpName(op), schema, table)));
  if (ext.has_value()) {
    RETURN_IF_ERROR(internal::RefuseAbsentRow(*ext, "onlyHandleKey", "claimCheckLocation",
                                              kProtocol, "_tidb."));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> key_columns,
                   internal::StringArray(message, "pkNames", kProtocol, "pkNames"));
  ASSIGN_OR_RETURN(std::vector<std::vector<Column>> data, DecodeRows(message, "data"));
  ASSIGN_OR_RETURN(std::vector<std::vector<Column>> old, DecodeRows(message, "old"));
  if (data.empty()) return FieldError(kProtocol, "data", "a row change without a row");
  if (op == RowOp::kUpdate ? !old.empty() && old.size() != data.size() : !old.empty()) {
    return FieldError(kProtocol, "old",
                      fmt::format("{} rows in old for {} in data of an {}", old.size(), data.size(),
                                  RowOpName(op)));
  }
  std::vector<CdcEvent> events;
  for (size_t i = 0; i < data.size(); ++i) {
    RowChange row{.schema = schema,
                  .table = table,
                  .op = op,
                  .commit_ts = commit_ts,
                  .key_columns = key_columns,
                  .columns = std::move(data[i])};
    if (!old.empty()) row.old_columns = std::move(old[i]);
    events.emplace_back(std::move(row));
  }
  return events;
}

}  // namespace

absl::StatusOr<std::vector<CdcEvent>> DecodeCanalJson(std::string_view message) {
  thread_local dom::parser parser;
  ASSIGN_OR_RETURN(const dom::element root, internal::ParseJson(parser, message, kProtocol));
  ASSIGN_OR_RETURN(const dom::object object, internal::AsObject(root, kProtocol, "(message)"));
  ASSIGN_OR_RETURN(const std::string type,
                   internal::RequiredString(object, "type", kProtocol, "type"));
  ASSIGN_OR_RETURN(const bool is_ddl,
                   internal::OptionalBool(object, "isDdl", false, kProtocol, "isDdl"));
  ASSIGN_OR_RETURN(const std::optional<dom::object> ext, Extension(object));
  std::vector<CdcEvent> events;
  if (type == "TIDB_WATERMARK") {
    ASSIGN_OR_RETURN(const Tso ts, ExtensionTso(ext, "watermarkTs", "a TIDB_WATERMARK"));
    events.emplace_back(Watermark{ts});
    return events;
  }
  if (is_ddl) {
    SchemaChange change;
    ASSIGN_OR_RETURN(change.schema,
                     internal::OptionalString(object, "database", kProtocol, "database"));
    ASSIGN_OR_RETURN(change.table, internal::OptionalString(object, "table", kProtocol, "table"));
    ASSIGN_OR_RETURN(change.query, internal::OptionalString(object, "sql", kProtocol, "sql"));
    ASSIGN_OR_RETURN(change.commit_ts,
                     ExtensionTso(ext, "commitTs", fmt::format("a DDL ({})", type)));
    events.emplace_back(std::move(change));
    return events;
  }
  if (const std::optional<RowOp> op = type.size() > 1 ? RowOpFromName(type) : std::nullopt) {
    return DecodeRowMessage(object, *op, ext);
  }
  return FieldError(kProtocol, "type",
                    fmt::format("\"{}\" is not INSERT, UPDATE, DELETE, TIDB_WATERMARK or a DDL "
                                "(isDdl: true)",
                                type));
}

}  // namespace isowatch::tidb
