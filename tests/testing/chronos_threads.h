// SPDX-License-Identifier: Apache-2.0
#pragma once

// Chronos run on several threads against its run on one.

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::testing {

// Everything a run reports, one line per violation (every field, in report order) and one for
// the statistics.
inline std::vector<std::string> ChronosReport(const history::History& h,
                                              const checkers::ChronosResult& r) {
  std::vector<std::string> out;
  for (const verdict::Violation& v : r.violations) {
    std::vector<uint64_t> txns;
    for (TxnId t : v.txns) txns.push_back(t.value());
    out.push_back(fmt::format("{} {} {} {} txns {} key {} expected '{}' observed '{}': {}",
                              verdict::IsolationLevelName(v.level), verdict::AnomalyName(v.anomaly),
                              verdict::ExtKindName(v.ext_kind), static_cast<int>(v.read_fault),
                              txns, v.key.valid() ? h.KeyToString(v.key) : "-", v.expected,
                              v.observed, v.explanation));
  }
  const checkers::ChronosStats& s = r.stats;
  out.push_back(
      fmt::format("complete {} checked {} skipped {} external {} internal {} peak {} "
                  "unjudged {}",
                  r.complete, s.transactions_checked, s.transactions_skipped, s.external_reads,
                  s.internal_reads, s.peak_ongoing, s.snapshot_unjudged));
  return out;
}

// Expects Chronos on 2 and 3 threads to report exactly what it reports on one.
inline void ExpectSameOnEveryThreadCount(const history::History& h, verdict::IsolationLevel level) {
  const std::vector<std::string> one =
      ChronosReport(h, checkers::RunChronos(h, {.level = level, .threads = 1}));
  for (uint32_t threads : {2u, 3u}) {
    EXPECT_EQ(ChronosReport(h, checkers::RunChronos(h, {.level = level, .threads = threads})), one)
        << threads << " threads";
  }
}

}  // namespace isowatch::testing
