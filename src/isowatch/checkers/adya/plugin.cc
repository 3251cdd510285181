// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/adya/plugin.h"

#include <charconv>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/common/status_macros.h"

namespace isowatch::checkers {
namespace {

using history::History;
using verdict::IsolationLevel;

constexpr std::string_view kName = "adya";

class AdyaChecker final : public Checker {
 public:
  AdyaChecker(std::vector<IsolationLevel> levels, uint64_t max_search_steps)
      : levels_(std::move(levels)), max_search_steps_(max_search_steps) {}

  std::string_view name() const override { return kName; }
  const std::vector<IsolationLevel>& levels() const override { return levels_; }

  // The window rule is KeepInScope alone: every edge and every G-SIa/G-SIb judgement is a fact
  // about transactions the window holds, whatever their start (docs/checkers/plugins.md).
  CheckerResult Check(const History& h, const WindowScope* scope,
                      const CheckLimits& limits) const override {
    adya::AdyaResult r = adya::CheckAdya(
        h, {.levels = levels_, .max_search_steps = max_search_steps_, .limits = &limits});
    CheckerResult out;
    out.complete = r.complete;
    out.undecided = std::move(r.undecided);
    // Out of time, nothing stands; undecided, what was found does.
    if (r.complete || !out.undecided.empty()) out.violations = std::move(r.violations);
    if (scope != nullptr) {
      // A window's initial state is the stream's state at its base in commit order; a read
      // taken before the base may see an older version (or list) than that, so a read the
      // window's versions cannot explain is no finding there (the whole history judges it).
      const auto before = out.violations.size();
      std::erase_if(out.violations, [](const verdict::Violation& v) {
        return v.anomaly == verdict::Anomaly::kThinAir ||
               v.anomaly == verdict::Anomaly::kIncompatibleOrder;
      });
      out.findings_out_of_scope += before - out.violations.size();
    }
    KeepInScope(scope, &out);
    const uint32_t first = scope == nullptr ? 0 : scope->first_proper;
    for (uint32_t i = first; i < h.size(); ++i) {
      if (h.txn(TxnId(i)).committed()) ++out.transactions_checked;
    }
    out.transactions_skipped = h.size() - out.transactions_checked;
    const adya::AdyaStats& s = r.stats;
    out.stats = {{"ww_edges", s.ww_edges},
                 {"wr_edges", s.wr_edges},
                 {"rw_edges", s.rw_edges},
                 {"sccs", s.sccs},
                 {"largest_scc", s.largest_scc},
                 {"truncated_searches", s.truncated_searches},
                 {"garbage_reads", s.garbage_reads},
                 {"unknown_reads", s.unknown_reads},
                 {"unordered_writers", s.unordered_writers},
                 {"inferred_keys", s.inferred_keys},
                 {"undetermined_keys", s.undetermined_keys},
                 {"unobserved_appends", s.unobserved_appends}};
    LeaveRangeReadsUndecided(h, &out);
    return out;
  }

 private:
  std::vector<IsolationLevel> levels_;
  uint64_t max_search_steps_;
};

}  // namespace

CheckerInfo AdyaPlugin() {
  const uint64_t default_steps = adya::AdyaOptions{}.max_search_steps;
  return {
      .name = std::string(kName),
      .help =
          "Builds Adya's dependency graph, with the version order from commit timestamps or "
          "inferred from the reads, and names its anomalies, G0 to G2-item, G-SIa/G-SIb, "
          "reads no order explains and reads the transaction's own writes contradict "
          "(docs/checkers/adya.md).",
      .levels = {IsolationLevel::kReadCommitted, IsolationLevel::kRepeatableRead,
                 IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable},
      .anomalies = {verdict::Anomaly::kG0, verdict::Anomaly::kG1a, verdict::Anomaly::kG1b,
                    verdict::Anomaly::kG1c, verdict::Anomaly::kGSingle, verdict::Anomaly::kG2Item,
                    verdict::Anomaly::kGSIa, verdict::Anomaly::kGSIb, verdict::Anomaly::kThinAir,
                    verdict::Anomaly::kIncompatibleOrder, verdict::Anomaly::kDuplicateElements,
                    verdict::Anomaly::kInt},
      .requirements = {.commit_timestamps = false,
                       .start_snapshots = false,
                       .decides_black_box_registers = false},
      .options = {{.name = "max_search_steps",
                   .type = "integer",
                   .default_value = std::to_string(default_steps),
                   .help = "edges a cycle search may examine per component and cycle class "
                           "before it settles for the shortest cycle found so far"}},
      .create = [](std::vector<IsolationLevel> levels,
                   const CheckerOptions& options) -> absl::StatusOr<std::unique_ptr<Checker>> {
        uint64_t steps = adya::AdyaOptions{}.max_search_steps;
        if (auto it = options.find("max_search_steps"); it != options.end()) {
          ASSIGN_OR_RETURN(steps, ParseIntegerOption(kName, it->first, it->second, 1, UINT64_MAX));
        }
        return std::make_unique<AdyaChecker>(std::move(levels), steps);
      },
  };
}

}  // namespace isowatch::checkers
