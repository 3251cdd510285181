// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::testing {

// A violation as every checker must name it: anomaly, kind, transaction ids in report order,
// key, expected and observed values. Comparable across checkers and runs.
using ViolationEntry = std::tuple<std::string, std::string, std::vector<std::string>, std::string,
                                  std::string, std::string>;

// The entries of `vs`, sorted.
inline std::vector<ViolationEntry> Entries(const history::History& h,
                                           const std::vector<verdict::Violation>& vs) {
  std::vector<ViolationEntry> out;
  for (const verdict::Violation& v : vs) {
    std::vector<std::string> txns;
    for (TxnId t : v.txns) txns.emplace_back(h.txn_name(t));
    out.emplace_back(verdict::AnomalyName(v.anomaly), verdict::ExtKindName(v.ext_kind),
                     std::move(txns), v.key.valid() ? h.KeyToString(v.key) : "-", v.expected,
                     v.observed);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The first `limit` entries, one a line, for failure messages.
inline std::string Show(const std::vector<ViolationEntry>& entries, size_t limit = 10) {
  std::string out;
  for (size_t i = 0; i < entries.size() && i < limit; ++i) {
    const auto& [anomaly, kind, txns, key, expected, observed] = entries[i];
    out += fmt::format("  {} {} [{}] key {} expected {} observed {}\n", anomaly, kind,
                       fmt::join(txns, ","), key, expected, observed);
  }
  if (entries.size() > limit) out += fmt::format("  ... {} more\n", entries.size() - limit);
  return out;
}

// The entries of sorted `a` that are not in sorted `b`.
inline std::vector<ViolationEntry> Minus(const std::vector<ViolationEntry>& a,
                                         const std::vector<ViolationEntry>& b) {
  std::vector<ViolationEntry> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace isowatch::testing
