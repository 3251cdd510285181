// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

namespace isowatch::formats::internal {

// Whether `name` is a ViperBench JSON log: ^J[0-9]+\.log$.
inline bool IsViperLogName(std::string_view name) {
  if (name.size() < 6 || name.front() != 'J' || !name.ends_with(".log")) return false;
  const std::string_view digits = name.substr(1, name.size() - 5);
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Whether `name` is ViperBench's pseudo-EDN log, Jep<...>.log (not read).
inline bool IsJepLogName(std::string_view name) {
  return name.starts_with("Jep") && name.ends_with(".log");
}

// The order of a directory's J<digits>.log files (and sessions): by the number, so that J2 comes
// before J10, then by name (J01 before J1). REQUIRES: both names are IsViperLogName, or both
// J<digits> without the suffix.
inline bool ViperNameLess(std::string_view a, std::string_view b) {
  auto digits = [](std::string_view n) {
    n.remove_prefix(1);
    n = n.substr(0, n.find('.'));
    const size_t nonzero = n.find_first_not_of('0');
    return nonzero == std::string_view::npos ? std::string_view() : n.substr(nonzero);
  };
  const std::string_view x = digits(a);
  const std::string_view y = digits(b);
  if (x.size() != y.size()) return x.size() < y.size();
  if (x != y) return x < y;
  return a < b;
}

}  // namespace isowatch::formats::internal
