// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/plugin.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <system_error>

#include <fmt/format.h>

namespace isowatch::checkers {

absl::StatusOr<uint64_t> ParseIntegerOption(std::string_view checker, std::string_view option,
                                            std::string_view text, uint64_t min, uint64_t max) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < min || value > max) {
    return absl::InvalidArgumentError(
        min == 1 && max == UINT64_MAX
            ? fmt::format("{}.{}: '{}' is not a positive integer", checker, option, text)
            : fmt::format("{}.{}: '{}' is not an integer from {} to {}", checker, option, text, min,
                          max));
  }
  return value;
}

void KeepInScope(const WindowScope* scope, CheckerResult* result) {
  if (scope == nullptr) return;
  const uint32_t first_proper = scope->first_proper;
  auto lead_in_only = [first_proper](const verdict::Violation& v) {
    return !v.txns.empty() && std::all_of(v.txns.begin(), v.txns.end(),
                                          [&](TxnId t) { return t.value() < first_proper; });
  };
  auto& violations = result->violations;
  auto kept = std::remove_if(violations.begin(), violations.end(), lead_in_only);
  result->findings_out_of_scope += static_cast<size_t>(violations.end() - kept);
  violations.erase(kept, violations.end());
}

void LeaveRangeReadsUndecided(const history::History& h, CheckerResult* result) {
  const size_t n = h.range_read_count();
  if (n == 0) return;
  result->stats.emplace_back("range_reads_unjudged", n);
  if (!result->complete && result->undecided.empty()) return;  // out of time
  result->complete = false;
  std::string sentence =
      fmt::format("{} range read{} not judged (this checker weighs point and list reads only)", n,
                  n == 1 ? " is" : "s are");
  result->undecided =
      result->undecided.empty() ? sentence : fmt::format("{}; {}", result->undecided, sentence);
}

}  // namespace isowatch::checkers
