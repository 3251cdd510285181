// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/timekiller_text.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

namespace isowatch::formats::internal {

// ASCII case-insensitive equality with a lower-case `lower`.
bool EqualsLower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// Parses a decimal int64 (optional '-', digits only).
bool ParseDecimal(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out, 10);
  return ec == std::errc() && ptr == end;
}

std::string_view TrimTrailingSpace(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Shows text from the input in a message: printable ASCII as is, other bytes as \xHH, at most
// 40 bytes.
std::string Shown(std::string_view s) {
  std::string out;
  const size_t n = std::min<size_t>(s.size(), 40);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (n < s.size()) out += "...";
  return out;
}

// The first byte of [p, end) that does not start a valid UTF-8 sequence, or nullptr.
const char* FindInvalidUtf8(const char* p, const char* end) {
  const auto* s = reinterpret_cast<const unsigned char*>(p);
  const auto* e = reinterpret_cast<const unsigned char*>(end);
  while (s < e) {
    const unsigned char c = *s;
    size_t n = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;
    if (c < 0x80) {
      ++s;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return reinterpret_cast<const char*>(s);
    }
    if (static_cast<size_t>(e - s) <= n) return reinterpret_cast<const char*>(s);
    if (s[1] < lo || s[1] > hi) return reinterpret_cast<const char*>(s);
    for (size_t i = 2; i <= n; ++i) {
      if (s[i] < 0x80 || s[i] > 0xbf) return reinterpret_cast<const char*>(s);
    }
    s += n + 1;
  }
  return nullptr;
}

// The first control character inside a string in [p, end), or nullptr.
const char* FindUnescapedControl(const char* p, const char* end) {
  bool in_string = false;
  for (; p < end; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (in_string) {
      if (c == '\\') {
        ++p;
      } else if (c == '"') {
        in_string = false;
      } else if (c < 0x20) {
        return p;
      }
    } else if (c == '"') {
      in_string = true;
    }
  }
  return nullptr;
}

// "line:column" of `where` in a document held whole from `begin`.
std::string LineColumnIn(const char* begin, const char* where) {
  uint64_t line = 1;
  const char* line_start = begin;
  for (const char* p = begin; p < where; ++p) {
    if (*p == '\n') {
      ++line;
      line_start = p + 1;
    }
  }
  return fmt::format("{}:{}", line, where - line_start + 1);
}

}  // namespace isowatch::formats::internal
