// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "isowatch/history/history.h"
#include "isowatch/report/violation.h"

namespace isowatch::report {

// The outcome of checking one history: what was checked, what was found, how long it took.
struct CheckReport {
  std::string source;  // file name
  std::string format;  // "timekiller", "native", ...
  std::string checker = "chronos";
  IsolationLevel level = IsolationLevel::kSnapshotIsolation;
  size_t transactions_checked = 0;
  size_t transactions_skipped = 0;
  std::vector<Violation> violations;
  double read_seconds = 0;
  double check_seconds = 0;

  bool valid() const { return violations.empty(); }
};

// Renders `report` for a person: each violation with the transactions involved (id, session,
// timestamps, the operations on the key), the key, expected and observed values and the
// explanation; then a summary. At most `max_detailed` violations are shown in full (0 = all).
void WriteTextReport(const history::History& h, const CheckReport& report, std::ostream& out,
                     size_t max_detailed = 0);

// Renders `report` as one JSON object: valid, level, checker, source, format, transactions,
// counts (per anomaly, and per EXT kind), violations (anomaly, ext_kind, txns with ids as in the
// input, key, expected, observed, explanation), timing.
void WriteJsonReport(const history::History& h, const CheckReport& report, std::ostream& out);

}  // namespace isowatch::report
