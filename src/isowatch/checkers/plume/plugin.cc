// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/plume/plugin.h"

#include <charconv>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>

#include "isowatch/checkers/plume/plume.h"
#include "isowatch/common/status_macros.h"

namespace isowatch::checkers {
namespace {

using history::History;
using verdict::Anomaly;
using verdict::IsolationLevel;

constexpr std::string_view kName = "plume";

// Whether a window may trust a finding (docs/checkers/plume.md, "Windows"). The window's initial
// state is the stream's state at its base in commit order, not a causal cut: a read of a value
// written before the window looks thin-air (or, for lists, no prefix of the others), and a read
// of the initial state is not a read of what precedes everything. Those findings are left to the
// whole history; every other finding is a fact about transactions the window holds.
bool TrustedInWindow(const verdict::Violation& v) {
  switch (v.anomaly) {
    case Anomaly::kTapA:
    case Anomaly::kIncompatibleOrder:
      return false;
    case Anomaly::kTapH:
    case Anomaly::kTapI:
    case Anomaly::kTapK:
    case Anomaly::kTapL:
    case Anomaly::kTapM:
    case Anomaly::kTapN:
      return v.txns.size() == 3;  // two: the value read was the initial one
    default:
      return true;
  }
}

class PlumeChecker final : public Checker {
 public:
  PlumeChecker(std::vector<IsolationLevel> levels, uint32_t max_explained_cycles)
      : levels_(std::move(levels)), max_explained_cycles_(max_explained_cycles) {}

  std::string_view name() const override { return kName; }
  const std::vector<IsolationLevel>& levels() const override { return levels_; }

  CheckerResult Check(const History& h, const WindowScope* scope,
                      const CheckLimits& limits) const override {
    const uint32_t first = scope == nullptr ? 0 : scope->first_proper;
    plume::PlumeResult r = plume::CheckPlume(h, {.levels = levels_,
                                                 .max_explained_cycles = max_explained_cycles_,
                                                 .limits = &limits,
                                                 .first_counted = first});
    CheckerResult out;
    out.complete = r.complete;
    out.undecided = std::move(r.undecided);
    if (r.complete || !out.undecided.empty()) out.violations = std::move(r.violations);
    if (scope != nullptr) {
      const size_t before = out.violations.size();
      std::erase_if(out.violations,
                    [](const verdict::Violation& v) { return !TrustedInWindow(v); });
      out.findings_out_of_scope += before - out.violations.size();
    }
    KeepInScope(scope, &out);
    // Judged: the committed transactions and those of unknown outcome someone read from.
    out.transactions_checked = r.stats.counted;
    out.transactions_skipped = h.size() - out.transactions_checked;
    const plume::PlumeStats& s = r.stats;
    out.stats = {{"wr_edges", s.wr_edges},
                 {"ww_edges", s.ww_edges},
                 {"co_components", s.co_components},
                 {"forced_rc", s.forced_rc},
                 {"forced_ra", s.forced_ra},
                 {"forced_tcc", s.forced_tcc},
                 {"unknown_committed", s.unknown_committed},
                 {"unknown_dropped", s.unknown_dropped},
                 {"unobserved_reads", s.unobserved_reads},
                 {"ambiguous_reads", s.ambiguous_reads},
                 {"duplicate_writes", s.duplicate_writes}};
    LeaveRangeReadsUndecided(h, &out);
    return out;
  }

 private:
  std::vector<IsolationLevel> levels_;
  uint32_t max_explained_cycles_;
};

}  // namespace

CheckerInfo PlumePlugin() {
  const uint32_t default_cycles = plume::PlumeOptions{}.max_explained_cycles;
  std::vector<Anomaly> anomalies;
  for (int a = static_cast<int>(Anomaly::kTapA); a <= static_cast<int>(Anomaly::kTapN); ++a) {
    anomalies.push_back(static_cast<Anomaly>(a));
  }
  anomalies.push_back(Anomaly::kIncompatibleOrder);
  anomalies.push_back(Anomaly::kDuplicateElements);
  return {
      .name = std::string(kName),
      .help =
          "Finds the 14 transactional anomalous patterns TAP-a to TAP-n over the causal "
          "order of the reads, without timestamps, and so judges read committed, read atomic "
          "and causal consistency (docs/checkers/plume.md).",
      .levels = {IsolationLevel::kReadCommitted, IsolationLevel::kReadAtomic,
                 IsolationLevel::kCausal},
      .anomalies = std::move(anomalies),
      .requirements = {.commit_timestamps = false, .start_snapshots = false},
      .options = {{.name = "max_explained_cycles",
                   .type = "integer",
                   .default_value = std::to_string(default_cycles),
                   .help = "commit-order findings whose explanation walks the cycle; later ones "
                           "name their transactions only"}},
      .create = [](std::vector<IsolationLevel> levels,
                   const CheckerOptions& options) -> absl::StatusOr<std::unique_ptr<Checker>> {
        uint32_t cycles = plume::PlumeOptions{}.max_explained_cycles;
        if (auto it = options.find("max_explained_cycles"); it != options.end()) {
          ASSIGN_OR_RETURN(uint64_t value,
                           ParseIntegerOption(kName, it->first, it->second, 0, UINT32_MAX));
          cycles = static_cast<uint32_t>(value);
        }
        return std::make_unique<PlumeChecker>(std::move(levels), cycles);
      },
  };
}

}  // namespace isowatch::checkers
