// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"

namespace isowatch::checkers::adya {

// "G-single [rr,si,ser] T2,T1 k=1": testing::Summarize with the levels the finding violates after
// its name, for compact assertions.
inline std::string Summarize(const history::History& h, const verdict::Violation& v) {
  std::string out = testing::Summarize(h, v);
  std::vector<std::string> levels;
  for (verdict::IsolationLevel level : v.levels) levels.emplace_back(IsolationLevelName(level));
  out.insert(out.find(' ') == std::string::npos ? out.size() : out.find(' '),
             fmt::format(" [{}]", fmt::join(levels, ",")));
  return out;
}

inline std::vector<std::string> SummarizeAll(const history::History& h,
                                             const std::vector<verdict::Violation>& vs) {
  std::vector<std::string> out(vs.size());
  std::transform(vs.begin(), vs.end(), out.begin(),
                 [&h](const verdict::Violation& v) { return Summarize(h, v); });
  return out;
}

}  // namespace isowatch::checkers::adya
