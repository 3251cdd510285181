// SPDX-License-Identifier: Apache-2.0
#include "isowatch/config/units.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fmt/format.h"

namespace isowatch::config {
namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool AllDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

absl::StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text) {
  absl::Duration d;
  const bool parsed = absl::ParseDuration(absl::string_view(text.data(), text.size()), &d);
  if (!parsed || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        fmt::format(R"(expected a duration such as "5s" or "250ms", got "{}"{})", text,
                    AllDigits(text) ? " (a unit is needed)" : ""));
  }
  if (d > absl::Hours(24 * 365 * 100)) {
    return absl::InvalidArgumentError(
        fmt::format(R"(expected a duration of at most 100 years, got "{}")", text));
  }
  return absl::ToChronoNanoseconds(d);
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  return absl::FormatDuration(absl::Milliseconds(duration.count()));
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  auto bad = [text] {
    return absl::InvalidArgumentError(
        fmt::format(R"(expected a size such as "16MiB" or "65536", got "{}")", text));
  };
  const auto digits_end = std::find_if(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) == 0;
  });
  const std::string_view number(text.data(), static_cast<size_t>(digits_end - text.begin()));
  if (number.empty()) return bad();
  uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return absl::InvalidArgumentError(fmt::format(R"(size "{}" does not fit in 64 bits)", text));
  }
  if (ec != std::errc()) return bad();

  std::string_view unit = text.substr(number.size());
  if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  static constexpr std::array<std::pair<std::string_view, uint64_t>, 10> kUnits = {{
      {"B", 1},
      {"kB", 1000},
      {"MB", 1000 * 1000},
      {"GB", 1000 * 1000 * 1000},
      {"TB", 1000ull * 1000 * 1000 * 1000},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40},
      {"", 1},
  }};
  if (unit.empty() && number.size() != text.size()) return bad();  // a lone trailing space
  for (const auto& [name, factor] : kUnits) {
    if (!EqualsIgnoringCase(unit, name)) continue;
    if (value > UINT64_MAX / factor) {
      return absl::InvalidArgumentError(fmt::format(R"(size "{}" does not fit in 64 bits)", text));
    }
    return value * factor;
  }
  return bad();
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr std::array<std::pair<std::string_view, int>, 4> kUnits = {
      {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}}};
  if (bytes != 0) {
    for (const auto& [name, shift] : kUnits) {
      if (bytes % (1ull << shift) == 0) return fmt::format("{}{}", bytes >> shift, name);
    }
  }
  return fmt::format("{}", bytes);
}

}  // namespace isowatch::config
