// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/internal/json_fields.h"

#include <charconv>
#include <cstdint>
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

namespace isowatch::tidb::internal {

namespace dom = simdjson::dom;

absl::StatusOr<dom::element> ParseJson(dom::parser& parser, std::string_view text,
                                       std::string_view protocol) {
  dom::element element;
  if (const simdjson::error_code error = parser.parse(text.data(), text.size()).get(element);
      error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: not a JSON document ({} bytes): {}",
                                                  protocol, text.size(),
                                                  simdjson::error_message(error)));
  }
  return element;
}

absl::Status FieldError(std::string_view protocol, std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}: {}", protocol, path, what));
}

const char* JsonTypeName(const dom::element& element) {
  switch (element.type()) {
    case dom::element_type::ARRAY:
      return "array";
    case dom::element_type::OBJECT:
      return "object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return "number";
    case dom::element_type::STRING:
      return "string";
    case dom::element_type::BOOL:
      return "boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "?";
}

std::optional<dom::element> Member(const dom::object& object, std::string_view key) {
  dom::element element;
  if (object.at_key(key).get(element) != simdjson::SUCCESS) return std::nullopt;
  return element;
}

absl::StatusOr<dom::object> AsObject(const dom::element& element, std::string_view protocol,
                                     std::string_view path) {
  dom::object object;
  if (element.get(object) != simdjson::SUCCESS) {
    return FieldError(protocol, path,
                      fmt::format("expected an object, found {}", JsonTypeName(element)));
  }
  return object;
}

absl::StatusOr<std::string> RequiredString(const dom::object& object, std::string_view key,
                                           std::string_view protocol, std::string_view path) {
  const std::optional<dom::element> member = Member(object, key);
  if (!member.has_value()) return FieldError(protocol, path, "missing");
  std::string_view text;
  if (member->get(text) != simdjson::SUCCESS) {
    return FieldError(protocol, path,
                      fmt::format("expected a string, found {}", JsonTypeName(*member)));
  }
  return std::string(text);
}

absl::StatusOr<std::string> OptionalString(const dom::object& object, std::string_view key,
                                           std::string_view protocol, std::string_view path) {
  const std::optional<dom::element> member = Member(object, key);
  if (!member.has_value() || member->is_null()) return std::string();
  return RequiredString(object, key, protocol, path);
}

absl::StatusOr<Tso> AsTso(const dom::element& element, std::string_view protocol,
                          std::string_view path) {
  uint64_t ts = 0;
  std::string_view text;
  if (element.get(text) == simdjson::SUCCESS) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ts);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
      return FieldError(protocol, path,
                        fmt::format("\"{}\" is not a TSO (decimal digits below 2^64)", text));
    }
  } else if (element.get(ts) != simdjson::SUCCESS) {
    return FieldError(protocol, path,
                      fmt::format("expected a TSO (a non-negative integer), found {}",
                                  element.is_number() ? "another number" : JsonTypeName(element)));
  }
  if (ts == 0) return FieldError(protocol, path, "a TSO of 0 is not a timestamp");
  return ts;
}

absl::StatusOr<bool> OptionalBool(const dom::object& object, std::string_view key, bool fallback,
                                  std::string_view protocol, std::string_view path) {
  const std::optional<dom::element> member = Member(object, key);
  if (!member.has_value() || member->is_null()) return fallback;
  bool value = false;
  if (member->get(value) != simdjson::SUCCESS) {
    return FieldError(protocol, path,
                      fmt::format("expected a boolean, found {}", JsonTypeName(*member)));
  }
  return value;
}

absl::StatusOr<std::vector<std::string>> StringArray(const dom::object& object,
                                                     std::string_view key,
                                                     std::string_view protocol,
                                                     std::string_view path) {
  std::vector<std::string> strings;
  const std::optional<dom::element> member = Member(object, key);
  if (!member.has_value() || member->is_null()) return strings;
  dom::array array;
  if (member->get(array) != simdjson::SUCCESS) {
    return FieldError(protocol, path,
                      fmt::format("expected an array, found {}", JsonTypeName(*member)));
  }
  for (const dom::element element : array) {
    std::string_view text;
    if (element.get(text) != simdjson::SUCCESS) {
      return FieldError(protocol, fmt::format("{}[{}]", path, strings.size()),
                        fmt::format("expected a string, found {}", JsonTypeName(element)));
    }
    strings.emplace_back(text);
  }
  return strings;
}

absl::Status RefuseAbsentRow(const dom::object& object, std::string_view handle_key_only,
                             std::string_view claim_check, std::string_view protocol,
                             std::string_view path_prefix) {
  ASSIGN_OR_RETURN(const bool only_key,
                   OptionalBool(object, handle_key_only, false, protocol,
                                fmt::format("{}{}", path_prefix, handle_key_only)));
  if (only_key) {
    return absl::UnimplementedError(
        fmt::format("{}: the message carries only the row's handle key ({}{}: "
                    "large-message-handle-option=handle-key-only); set the option to none or raise "
                    "max-message-bytes",
                    protocol, path_prefix, handle_key_only));
  }
  ASSIGN_OR_RETURN(
      const std::string location,
      OptionalString(object, claim_check, protocol, fmt::format("{}{}", path_prefix, claim_check)));
  if (!location.empty()) {
    return absl::UnimplementedError(
        fmt::format("{}: the row is in external storage at \"{}\" (claim-check), which is not read",
                    protocol, location));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> ColumnValue(const dom::element& element,
                                                       std::string_view protocol,
                                                       std::string_view path) {
  switch (element.type()) {
    case dom::element_type::NULL_VALUE:
      return std::nullopt;
    case dom::element_type::STRING:
      return std::string(element.get_string().value_unsafe());
    case dom::element_type::INT64:
      return std::to_string(element.get_int64().value_unsafe());
    case dom::element_type::UINT64:
      return std::to_string(element.get_uint64().value_unsafe());
    case dom::element_type::DOUBLE:
      return fmt::format("{}", element.get_double().value_unsafe());
    case dom::element_type::BOOL:
      return std::string(element.get_bool().value_unsafe() ? "1" : "0");
    case dom::element_type::ARRAY:
    case dom::element_type::OBJECT:
      break;
  }
  return FieldError(protocol, path,
                    fmt::format("expected a column value, found {}", JsonTypeName(element)));
}

}  // namespace isowatch::tidb::internal
