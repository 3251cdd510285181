// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "isowatch/history/history.h"
#include "isowatch/report/violation.h"

namespace isowatch::checkers::adya {

// "G-single [rr,si,ser] T2,T1 k=1": an adya finding in one line, for compact assertions.
inline std::string Summarize(const history::History& h, const report::Violation& v) {
  std::string out = fmt::format("{} [", report::AnomalyName(v.anomaly));
  for (size_t i = 0; i < v.levels.size(); ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : ",", report::IsolationLevelName(v.levels[i]));
  }
  out += "]";
  for (size_t i = 0; i < v.txns.size(); ++i) {
    out += fmt::format("{}{}", i == 0 ? " " : ",", h.txn_name(v.txns[i]));
  }
  if (v.key.valid()) out += fmt::format(" k={}", h.KeyToString(v.key));
  return out;
}

inline std::vector<std::string> SummarizeAll(const history::History& h,
                                             const std::vector<report::Violation>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(Summarize(h, v));
  return out;
}

}  // namespace isowatch::checkers::adya
