// SPDX-License-Identifier: Apache-2.0
#include "tests/unit/checkers/polygraph/polygraph_testing.h"

#include <algorithm>
#include <string>

namespace isowatch::checkers::polygraph::testing {

bool Violates(const PolygraphResult& r, verdict::IsolationLevel level) {
  return std::any_of(r.violations.begin(), r.violations.end(), [&](const verdict::Violation& v) {
    return v.level == level || std::find(v.levels.begin(), v.levels.end(), level) != v.levels.end();
  });
}

std::string Show(const PolygraphResult& r) {
  std::string out;
  for (const verdict::Violation& v : r.violations) {
    out += std::string(verdict::AnomalyName(v.anomaly)) + " at " +
           verdict::IsolationLevelName(v.level) + ": " + v.explanation + "\n";
  }
  return out;
}

}  // namespace isowatch::checkers::polygraph::testing
