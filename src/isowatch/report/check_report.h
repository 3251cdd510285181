// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::report {

// What an online check (the engine fed through simulated asynchrony) adds to a report.
struct OnlineCounts {
  // How the history was delivered.
  double mean_ms = 0;
  double sigma_ms = 0;
  uint64_t batch = 0;
  uint64_t seed = 0;
  double rate_tps = 0;
  bool watermarks = true;
  int64_t timeout_ms = 0;
  int64_t retention = 0;
  uint64_t batches = 0;
  double max_disorder_ms = 0;
  // What the engine saw.
  uint64_t flip_flops = 0;     // provisional EXT verdicts that changed
  uint64_t late_arrivals = 0;  // transactions delivered below an already-passed watermark
  uint64_t duplicates = 0;
  uint64_t horizon_misses = 0;
  uint64_t repeated_reports = 0;  // violations reported more than once (0 when correct)
  uint64_t max_provisional_reads = 0;
  uint64_t max_retained_versions = 0;
  uint64_t max_retained_txns = 0;
};

// What one plug-in checker made of a history (`isowatch check --checker`), over all its windows
// when the history was cut into windows.
struct CheckerOutcome {
  std::string name;
  std::vector<verdict::IsolationLevel> levels;  // judged
  // False: it ran out of time (in some window), could not decide everything (`undecided`) or
  // was skipped (`skipped`); its verdict is UNKNOWN unless it found violations.
  bool complete = true;
  std::string undecided;  // what it could not decide (the first window's reason when cut)
  std::string skipped;    // why it did not run: what the history lacks
  double seconds = 0;
  size_t violations = 0;
  size_t transactions_checked = 0;
  size_t transactions_skipped = 0;
  size_t findings_out_of_scope = 0;  // left out by the windows' trust rules
  size_t windows = 0;                // checked (1 for a whole history)
  size_t incomplete_windows = 0;
  std::vector<std::pair<std::string, uint64_t>> stats;  // summed over the windows
};

// The outcome of checking one history: what was checked, what was found, how long it took.
struct CheckReport {
  std::string source;               // file name
  std::string format;               // "timekiller", "native", ...
  std::string checker = "chronos";  // for plug-ins, their names joined by commas
  // How the checker was chosen when none was asked for: "" or a sentence.
  std::string picked;
  // The level judged; none when plug-ins judged each its own levels.
  std::optional<verdict::IsolationLevel> level = verdict::IsolationLevel::kSnapshotIsolation;
  size_t transactions_checked = 0;
  size_t transactions_skipped = 0;
  std::vector<verdict::Violation> violations;
  double read_seconds = 0;
  double check_seconds = 0;
  // Set by an online check.
  std::optional<OnlineCounts> online;
  // Set by a check with plug-ins: one per plug-in, in the order they ran.
  std::vector<CheckerOutcome> checkers;
  // Set when the history was cut into windows (`check --window N --window-overlap M`).
  size_t window_transactions = 0;
  size_t window_overlap = 0;

  // Every checker finished (otherwise the verdict is UNKNOWN unless violations were found).
  bool complete() const {
    for (const CheckerOutcome& c : checkers) {
      if (!c.complete) return false;
    }
    return true;
  }
  // No violation found, and every checker finished: an incomplete check is never valid.
  bool valid() const { return violations.empty() && complete(); }
};

// Renders `report` for a person: each violation with the transactions involved (id, session,
// timestamps, the operations on the key), the key, expected and observed values and the
// explanation; then a summary (with one line of online counts for an online check, one line per
// plug-in for a check with plug-ins) and the result: VALID, INVALID, or UNKNOWN when no violation
// was found but some checker did not finish. At most `max_detailed` violations are shown in full
// (0 = all).
void WriteTextReport(const history::History& h, const CheckReport& report, std::ostream& out,
                     size_t max_detailed = 0);

// Renders `report` as one JSON object: valid, result ("valid", "invalid", "unknown"), level (null
// when each plug-in judged its own levels), checker, source, format, transactions, counts (per
// anomaly, and per EXT kind), violations (anomaly, ext_kind, read_fault and cycle_kind when
// set, txns with ids as in the input, key, expected, observed, explanation, and checker when
// plug-ins ran), timing; for an online check
// also flip_flops, late_arrivals and an "online" object with every OnlineCounts field; for a
// check with plug-ins a "checkers" array with every CheckerOutcome field (result per checker:
// "valid", "invalid" or "unknown"), and "window" when the history was cut into windows.
void WriteJsonReport(const history::History& h, const CheckReport& report, std::ostream& out);

// One violation as the JSON object WriteJsonReport writes for it: anomaly, ext_kind (EXT only),
// read_fault and cycle_kind (when set), txns (ids as in the source), key, expected, observed,
// explanation, levels (when several), and with `with_checker` the checker that found it.
std::string ViolationToJson(const history::History& h, const verdict::Violation& v,
                            bool with_checker = false);

}  // namespace isowatch::report
