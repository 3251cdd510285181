// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/simple_protocol.h"

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

constexpr std::string_view kProtocol = "simple";
constexpr std::array<std::string_view, 8> kDdlTypes = {"CREATE",   "ALTER",  "ERASE",  "RENAME",
                                                       "TRUNCATE", "CINDEX", "DINDEX", "QUERY"};

// An array member as elements; missing or null is empty.
absl::StatusOr<std::vector<dom::element>> ArrayMember(const dom::object& object,
                                                      std::string_view key, std::string_view path) {
  std::vector<dom::element> elements;
  const std::optional<dom::element> member = Member(object, key);
  if (!member.has_value() || member->is_null()) return elements;
  dom::array array;
  if (member->get(array) != simdjson::SUCCESS) {
    return FieldError(kProtocol, path,
                      fmt::format("expected an array, found {}", internal::JsonTypeName(*member)));
  }
  for (const dom::element element : array) elements.push_back(element);
  return elements;
}

struct TableKey {
  std::string schema;
  std::string table;
  std::vector<std::string> key_columns;
};

// The table and key columns a `tableSchema` object describes.
absl::StatusOr<TableKey> DecodeTableSchema(const dom::element& element) {
  ASSIGN_OR_RETURN(const dom::object object, internal::AsObject(element, kProtocol, "tableSchema"));
  TableKey out;
  // The JSON encoding names the database `schema`; the Avro schema names it `database`.
  const std::string_view db_field = Member(object, "schema").has_value() ? "schema" : "database";
  ASSIGN_OR_RETURN(out.schema, internal::RequiredString(object, db_field, kProtocol,
                                                        fmt::format("tableSchema.{}", db_field)));
  ASSIGN_OR_RETURN(out.table,
                   internal::RequiredString(object, "table", kProtocol, "tableSchema.table"));
  ASSIGN_OR_RETURN(const std::vector<dom::element> indexes,
                   ArrayMember(object, "indexes", "tableSchema.indexes"));
  std::optional<std::vector<std::string>> unique_key;
  for (size_t i = 0; i < indexes.size(); ++i) {
    const std::string path = fmt::format("tableSchema.indexes[{}]", i);
    ASSIGN_OR_RETURN(const dom::object index, internal::AsObject(indexes[i], kProtocol, path));
    ASSIGN_OR_RETURN(const bool primary,
                     internal::OptionalBool(index, "primary", false, kProtocol, path + ".primary"));
    ASSIGN_OR_RETURN(const bool unique,
                     internal::OptionalBool(index, "unique", false, kProtocol, path + ".unique"));
    ASSIGN_OR_RETURN(const bool nullable, internal::OptionalBool(index, "nullable", false,
                                                                 kProtocol, path + ".nullable"));
    ASSIGN_OR_RETURN(std::vector<std::string> names,
                     internal::StringArray(index, "columns", kProtocol, path + ".columns"));
    if (primary) {
      out.key_columns = std::move(names);
      return out;
    }
    if (unique && !nullable && !unique_key.has_value()) unique_key = std::move(names);
  }
  if (unique_key.has_value()) out.key_columns = std::move(*unique_key);
  return out;
}

absl::StatusOr<std::vector<Column>> DecodeRowMap(const dom::object& message, std::string_view key) {
  std::vector<Column> columns;
  const std::optional<dom::element> member = Member(message, key);
  if (!member.has_value() || member->is_null()) return columns;
  ASSIGN_OR_RETURN(const dom::object row, internal::AsObject(*member, kProtocol, key));
  for (const dom::key_value_pair field : row) {
    ASSIGN_OR_RETURN(
        std::optional<std::string> value,
        internal::ColumnValue(field.value, kProtocol, fmt::format("{}.{}", key, field.key)));
    columns.push_back(Column{std::string(field.key), std::move(value)});
  }
  return columns;
}

absl::StatusOr<Tso> CommitTs(const dom::object& message) {
  const std::optional<dom::element> member = Member(message, "commitTs");
  if (!member.has_value()) return FieldError(kProtocol, "commitTs", "missing");
  return internal::AsTso(*member, kProtocol, "commitTs");
}

}  // namespace

const std::vector<std::string>* SimpleProtocolDecoder::KeyColumns(const std::string& schema,
                                                                  const std::string& table) const {
  const auto it = keys_.find(std::make_pair(schema, table));
  return it == keys_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::vector<CdcEvent>> SimpleProtocolDecoder::Decode(std::string_view message) {
  thread_local dom::parser parser;
  ASSIGN_OR_RETURN(const dom::element root, internal::ParseJson(parser, message, kProtocol));
  ASSIGN_OR_RETURN(const dom::object object, internal::AsObject(root, kProtocol, "(message)"));
  int64_t version = 0;
  if (const auto v = Member(object, "version");
      !v.has_value() || v->get(version) != simdjson::SUCCESS) {
    return FieldError(kProtocol, "version", "missing, or not an integer");
  }
  if (version != 1) {
    return FieldError(kProtocol, "version", fmt::format("version {} is not supported", version));
  }
  ASSIGN_OR_RETURN(const std::string type,
                   internal::RequiredString(object, "type", kProtocol, "type"));
  std::vector<CdcEvent> events;
  if (type == "WATERMARK") {
    ASSIGN_OR_RETURN(const Tso ts, CommitTs(object));
    events.emplace_back(Watermark{ts});
    return events;
  }
  const std::optional<dom::element> table_schema = Member(object, "tableSchema");
  std::optional<TableKey> table_key;
  if (table_schema.has_value() && !table_schema->is_null()) {
    ASSIGN_OR_RETURN(table_key, DecodeTableSchema(*table_schema));
  }
  if (type == "BOOTSTRAP") {
    if (!table_key.has_value()) return FieldError(kProtocol, "tableSchema", "missing");
    keys_[std::make_pair(table_key->schema, table_key->table)] = table_key->key_columns;
    ++bootstraps_;
    return events;
  }
  for (const std::string_view ddl : kDdlTypes) {
    if (type != ddl) continue;
    SchemaChange change;
    ASSIGN_OR_RETURN(change.commit_ts, CommitTs(object));
    ASSIGN_OR_RETURN(change.query, internal::OptionalString(object, "sql", kProtocol, "sql"));
    if (table_key.has_value()) {
      change.schema = table_key->schema;
      change.table = table_key->table;
      keys_[std::make_pair(table_key->schema, table_key->table)] = table_key->key_columns;
    }
    events.emplace_back(std::move(change));
    return events;
  }
  const std::optional<RowOp> op = type.size() > 1 ? RowOpFromName(type) : std::nullopt;
  if (!op.has_value()) {
    return FieldError(kProtocol, "type", fmt::format("unknown message type \"{}\"", type));
  }
  RowChange row;
  row.op = *op;
  ASSIGN_OR_RETURN(row.schema, internal::RequiredString(object, "database", kProtocol, "database"));
  ASSIGN_OR_RETURN(row.table, internal::RequiredString(object, "table", kProtocol, "table"));
  ASSIGN_OR_RETURN(row.commit_ts, CommitTs(object));
  RETURN_IF_ERROR(
      internal::RefuseAbsentRow(object, "handleKeyOnly", "claimCheckLocation", kProtocol, ""));
  ASSIGN_OR_RETURN(std::vector<Column> data, DecodeRowMap(object, "data"));
  ASSIGN_OR_RETURN(std::vector<Column> old, DecodeRowMap(object, "old"));
  if (row.op != RowOp::kUpdate && !data.empty() && !old.empty()) {
    return FieldError(kProtocol, row.op == RowOp::kDelete ? "data" : "old",
                      fmt::format("{} carries one row, not both data and old", type));
  }
  if (row.op == RowOp::kDelete) {
    if (old.empty()) return FieldError(kProtocol, "old", "a DELETE without the deleted row");
    row.columns = std::move(old);
  } else {
    if (data.empty()) {
      return FieldError(kProtocol, "data", fmt::format("an {} without its row", type));
    }
    row.columns = std::move(data);
    if (row.op == RowOp::kUpdate) row.old_columns = std::move(old);
  }
  if (const std::vector<std::string>* keys = KeyColumns(row.schema, row.table)) {
    row.key_columns = *keys;
  }
  events.emplace_back(std::move(row));
  return events;
}

}  // namespace isowatch::tidb
