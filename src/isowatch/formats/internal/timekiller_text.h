// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the TimeKiller reader: checks of text and the pieces of its error messages.

#include <cstdint>
#include <string>
#include <string_view>

namespace isowatch::formats::internal {

// ASCII case-insensitive equality with a lower-case `lower`.
bool EqualsLower(std::string_view s, std::string_view lower);

// Parses a decimal int64 (optional '-', digits only) into `*out`; false if `s` is not one.
bool ParseDecimal(std::string_view s, int64_t* out);

// `s` without its trailing spaces, tabs and line ends.
std::string_view TrimTrailingSpace(std::string_view s);

// Shows text from the input in a message: printable ASCII as is, other bytes as \xHH, at most
// 40 bytes (then "...").
std::string Shown(std::string_view s);

// The first byte of [p, end) that does not start a valid UTF-8 sequence, or nullptr.
const char* FindInvalidUtf8(const char* p, const char* end);

// The first control character inside a string in [p, end), or nullptr.
const char* FindUnescapedControl(const char* p, const char* end);

// "line:column" (1-based; the column counts bytes) of `where` in a document held whole from
// `begin`. REQUIRES: begin <= where.
std::string LineColumnIn(const char* begin, const char* where);

}  // namespace isowatch::formats::internal
