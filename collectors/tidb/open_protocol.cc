// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/open_protocol.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"

#include "collectors/tidb/internal/json_fields.h"

namespace isowatch::tidb {
namespace {

namespace dom = simdjson::dom;
using internal::FieldError;
using internal::Member;

constexpr std::string_view kProtocol = "open-protocol";
constexpr uint64_t kVersion = 1;
constexpr int64_t kBinaryFlag = 0x01;
constexpr int64_t kHandleKeyFlag = 0x02;

// One event's bytes and where they start in the key or value.
struct Frame {
  size_t offset = 0;
  std::string_view bytes;
};

uint64_t ReadBigEndian64(std::string_view bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  return value;
}

// Splits `bytes` (from `offset` on) into length-prefixed frames. `part` is "key" or "value".
absl::StatusOr<std::vector<Frame>> SplitFrames(std::string_view bytes, size_t offset,
                                               std::string_view part) {
  std::vector<Frame> frames;
  while (offset < bytes.size()) {
    if (bytes.size() - offset < 8) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {} byte {}: {} bytes left, too few for the length of event {}",
                      kProtocol, part, offset, bytes.size() - offset, frames.size()));
    }
    const uint64_t length = ReadBigEndian64(bytes.substr(offset, 8));
    if (length > bytes.size() - offset - 8) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {} byte {}: event {} is {} bytes long, but only {} follow", kProtocol,
                      part, offset, frames.size(), length, bytes.size() - offset - 8));
    }
    frames.push_back(Frame{offset + 8, bytes.substr(offset + 8, length)});
    offset += 8 + length;
  }
  return frames;
}

bool IsStringType(int64_t type) { return type == 15 || (type >= 0xf9 && type <= 0xfe); }

// A column map ("u", "p" or "d"): its columns, in message order, and the names of its key
// columns.
absl::Status DecodeColumns(const dom::element& element, std::string_view path,
                           std::vector<Column>& columns, std::vector<std::string>* key_columns) {
  ASSIGN_OR_RETURN(const dom::object object, internal::AsObject(element, kProtocol, path));
  for (const dom::key_value_pair field : object) {
    const std::string field_path = fmt::format("{}.{}", path, field.key);
    ASSIGN_OR_RETURN(const dom::object column,
                     internal::AsObject(field.value, kProtocol, field_path));
    int64_t type = 0;
    int64_t flags = 0;
    if (const auto t = Member(column, "t"); t.has_value() && t->get(type) != simdjson::SUCCESS) {
      return FieldError(kProtocol, field_path + ".t", "expected an integer type code");
    }
    if (const auto f = Member(column, "f"); f.has_value() && f->get(flags) != simdjson::SUCCESS) {
      return FieldError(kProtocol, field_path + ".f", "expected integer flags");
    }
    ASSIGN_OR_RETURN(const bool handle,
                     internal::OptionalBool(column, "h", false, kProtocol, field_path + ".h"));
    const std::optional<dom::element> v = Member(column, "v");
    if (!v.has_value()) return FieldError(kProtocol, field_path + ".v", "missing");
    ASSIGN_OR_RETURN(std::optional<std::string> value,
                     internal::ColumnValue(*v, kProtocol, field_path + ".v"));
    if (value.has_value() && (flags & kBinaryFlag) != 0 && IsStringType(type)) {
      std::string decoded;
      if (!absl::Base64Unescape(*value, &decoded)) {
        return FieldError(kProtocol, field_path + ".v", "a binary column that is not base64");
      }
      value = std::move(decoded);
    }
    if (key_columns != nullptr && (handle || (flags & kHandleKeyFlag) != 0)) {
      key_columns->emplace_back(field.key);
    }
    columns.push_back(Column{std::string(field.key), std::move(value)});
  }
  return absl::OkStatus();
}

absl::StatusOr<RowChange> DecodeRow(const dom::object& key, Tso ts, std::string_view value_json,
                                    dom::parser& parser) {
  RowChange row;
  row.commit_ts = ts;
  ASSIGN_OR_RETURN(row.schema, internal::RequiredString(key, "scm", kProtocol, "key.scm"));
  ASSIGN_OR_RETURN(row.table, internal::RequiredString(key, "tbl", kProtocol, "key.tbl"));
  RETURN_IF_ERROR(internal::RefuseAbsentRow(key, "ohk", "ccl", kProtocol, "key."));
  ASSIGN_OR_RETURN(const dom::element root, internal::ParseJson(parser, value_json, kProtocol));
  ASSIGN_OR_RETURN(const dom::object value, internal::AsObject(root, kProtocol, "value"));
  const std::optional<dom::element> u = Member(value, "u");
  const std::optional<dom::element> p = Member(value, "p");
  const std::optional<dom::element> d = Member(value, "d");
  if (d.has_value() == u.has_value() || (p.has_value() && !u.has_value())) {
    return FieldError(kProtocol, "value",
                      "a row needs \"u\" (insert, or update with \"p\") or \"d\" (delete)");
  }
  if (d.has_value()) {
    row.op = RowOp::kDelete;
    RETURN_IF_ERROR(DecodeColumns(*d, "value.d", row.columns, &row.key_columns));
    return row;
  }
  row.op = p.has_value() ? RowOp::kUpdate : RowOp::kInsert;
  RETURN_IF_ERROR(DecodeColumns(*u, "value.u", row.columns, &row.key_columns));
  if (p.has_value()) RETURN_IF_ERROR(DecodeColumns(*p, "value.p", row.old_columns, nullptr));
  return row;
}

absl::StatusOr<CdcEvent> DecodeEvent(std::string_view key_json, std::string_view value_json,
                                     dom::parser& key_parser, dom::parser& value_parser) {
  ASSIGN_OR_RETURN(const dom::element root, internal::ParseJson(key_parser, key_json, kProtocol));
  ASSIGN_OR_RETURN(const dom::object key, internal::AsObject(root, kProtocol, "key"));
  const std::optional<dom::element> ts_member = Member(key, "ts");
  if (!ts_member.has_value()) return FieldError(kProtocol, "key.ts", "missing");
  ASSIGN_OR_RETURN(const Tso ts, internal::AsTso(*ts_member, kProtocol, "key.ts"));
  int64_t type = 0;
  const std::optional<dom::element> t = Member(key, "t");
  if (!t.has_value() || t->get(type) != simdjson::SUCCESS) {
    return FieldError(kProtocol, "key.t", "expected the event type 1, 2 or 3");
  }
  switch (type) {
    case 1: {
      ASSIGN_OR_RETURN(RowChange row, DecodeRow(key, ts, value_json, value_parser));
      return CdcEvent(std::move(row));
    }
    case 2: {
      SchemaChange change;
      change.commit_ts = ts;
      ASSIGN_OR_RETURN(change.schema, internal::OptionalString(key, "scm", kProtocol, "key.scm"));
      ASSIGN_OR_RETURN(change.table, internal::OptionalString(key, "tbl", kProtocol, "key.tbl"));
      ASSIGN_OR_RETURN(const dom::element value_root,
                       internal::ParseJson(value_parser, value_json, kProtocol));
      ASSIGN_OR_RETURN(const dom::object value, internal::AsObject(value_root, kProtocol, "value"));
      ASSIGN_OR_RETURN(change.query, internal::RequiredString(value, "q", kProtocol, "value.q"));
      return CdcEvent(std::move(change));
    }
    case 3:
      if (!value_json.empty()) {
        return FieldError(kProtocol, "value",
                          fmt::format("a resolved event with a {}-byte value", value_json.size()));
      }
      return CdcEvent(Watermark{ts});
    default:
      return FieldError(kProtocol, "key.t", fmt::format("unknown event type {}", type));
  }
}

}  // namespace

absl::StatusOr<std::vector<CdcEvent>> DecodeOpenProtocol(std::string_view key,
                                                         std::string_view value) {
  if (key.size() < 8) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: key byte 0: {} bytes, too few for the protocol version", kProtocol, key.size()));
  }
  if (const uint64_t version = ReadBigEndian64(key.substr(0, 8)); version != kVersion) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: key byte 0: protocol version {}, expected {}", kProtocol, version, kVersion));
  }
  ASSIGN_OR_RETURN(const std::vector<Frame> keys, SplitFrames(key, 8, "key"));
  ASSIGN_OR_RETURN(const std::vector<Frame> values, SplitFrames(value, 0, "value"));
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(fmt::format("{}: {} events in the key, {} in the value",
                                                  kProtocol, keys.size(), values.size()));
  }
  thread_local dom::parser key_parser;
  thread_local dom::parser value_parser;
  std::vector<CdcEvent> events;
  events.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<CdcEvent> event =
        DecodeEvent(keys[i].bytes, values[i].bytes, key_parser, value_parser);
    if (!event.ok()) {
      return absl::Status(
          event.status().code(),
          fmt::format("event {} (key byte {}, value byte {}): {}", i, keys[i].offset,
                      values[i].offset, common::StdView(event.status().message())));
    }
    events.push_back(*std::move(event));
  }
  return events;
}

}  // namespace isowatch::tidb
