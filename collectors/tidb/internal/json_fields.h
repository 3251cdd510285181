// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <simdjson.h>

#include "collectors/tidb/cdc_event.h"

// Field access on a parsed JSON message for the TiCDC decoders. Every error is
// INVALID_ARGUMENT and names the protocol and the field path ("canal-json: _tidb.commitTs: ...").

namespace isowatch::tidb::internal {

// Parses `text` as one JSON document with `parser`; the element lives as long as the parser's
// next parse. `protocol` prefixes the error.
absl::StatusOr<simdjson::dom::element> ParseJson(simdjson::dom::parser& parser,
                                                 std::string_view text, std::string_view protocol);

// An error "<protocol>: <path>: <what>".
absl::Status FieldError(std::string_view protocol, std::string_view path, std::string_view what);

// The type of `element` as a word for messages ("string", "object", ...).
const char* JsonTypeName(const simdjson::dom::element& element);

// Member `key` of `object`, or std::nullopt when it is missing. A member that is JSON null is
// returned as an element of type null.
std::optional<simdjson::dom::element> Member(const simdjson::dom::object& object,
                                             std::string_view key);

// `element` as an object; an error naming `path` otherwise.
absl::StatusOr<simdjson::dom::object> AsObject(const simdjson::dom::element& element,
                                               std::string_view protocol, std::string_view path);

// Member `key` of `object` as a string. Missing, or not a string: an error.
absl::StatusOr<std::string> RequiredString(const simdjson::dom::object& object,
                                           std::string_view key, std::string_view protocol,
                                           std::string_view path);

// Member `key` as a string; missing or null gives "". Another type: an error.
absl::StatusOr<std::string> OptionalString(const simdjson::dom::object& object,
                                           std::string_view key, std::string_view protocol,
                                           std::string_view path);

// `element` as a TSO: a non-negative integer below 2^64 (a JSON number, or a string of decimal
// digits, as some encoders write 64-bit numbers). 0 is refused.
absl::StatusOr<Tso> AsTso(const simdjson::dom::element& element, std::string_view protocol,
                          std::string_view path);

// Member `key` of `object` as a boolean; missing or null gives `fallback`.
absl::StatusOr<bool> OptionalBool(const simdjson::dom::object& object, std::string_view key,
                                  bool fallback, std::string_view protocol, std::string_view path);

// The strings of array member `key` of `object`; missing or null gives none. Another type,
// or an element that is not a string: an error naming `path`.
absl::StatusOr<std::vector<std::string>> StringArray(const simdjson::dom::object& object,
                                                     std::string_view key,
                                                     std::string_view protocol,
                                                     std::string_view path);

// UNIMPLEMENTED when the message says its row is not in it: boolean member `handle_key_only`
// is true (large-message-handle-option=handle-key-only), or string member `claim_check` is
// not empty (the claim-check option's external storage). OK otherwise; INVALID_ARGUMENT when
// either member has another type.
absl::Status RefuseAbsentRow(const simdjson::dom::object& object, std::string_view handle_key_only,
                             std::string_view claim_check, std::string_view protocol,
                             std::string_view path_prefix);

// A column value: null is std::nullopt; a string its bytes; a number its JSON text as
// simdjson reads it (integers exactly, floats shortest round-trip); a boolean "1" or "0".
// Arrays and objects are an error.
absl::StatusOr<std::optional<std::string>> ColumnValue(const simdjson::dom::element& element,
                                                       std::string_view protocol,
                                                       std::string_view path);

}  // namespace isowatch::tidb::internal
