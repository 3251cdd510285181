// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/internal/request_target.h"

#include <optional>

#include "absl/status/status.h"
#include <fmt/format.h>

namespace isowatch::server::internal {

namespace {

std::optional<int> HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::string> PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      std::optional<int> hi = i + 1 < in.size() ? HexValue(in[i + 1]) : std::nullopt;
      std::optional<int> lo = i + 2 < in.size() ? HexValue(in[i + 2]) : std::nullopt;
      if (!hi || !lo) {
        return absl::InvalidArgumentError(fmt::format("bad percent escape at offset {}", i));
      }
      out.push_back(static_cast<char>(*hi * 16 + *lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<RequestTarget> ParseRequestTarget(std::string_view target) {
  if (target.empty() || target.front() != '/') {
    return absl::InvalidArgumentError("request target must be a path starting with '/'");
  }
  if (size_t hash = target.find('#'); hash != std::string_view::npos) {
    target = target.substr(0, hash);
  }
  RequestTarget result;
  std::string_view path = target;
  std::string_view query;
  if (size_t q = target.find('?'); q != std::string_view::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
  }
  absl::StatusOr<std::string> decoded_path = PercentDecode(path, /*plus_is_space=*/false);
  if (!decoded_path.ok()) return decoded_path.status();
  result.path = *std::move(decoded_path);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view segment = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (segment.empty()) continue;
    size_t eq = segment.find('=');
    std::string_view name = segment.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : segment.substr(eq + 1);
    absl::StatusOr<std::string> decoded_name = PercentDecode(name, /*plus_is_space=*/true);
    if (!decoded_name.ok()) return decoded_name.status();
    absl::StatusOr<std::string> decoded_value = PercentDecode(value, /*plus_is_space=*/true);
    if (!decoded_value.ok()) return decoded_value.status();
    result.query.emplace_back(*std::move(decoded_name), *std::move(decoded_value));
  }
  return result;
}

}  // namespace isowatch::server::internal
