// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/plugin.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>

#include "isowatch/checkers/polygraph/polygraph.h"

namespace isowatch::checkers {
namespace {

using history::History;
using polygraph::SiVariant;
using verdict::Anomaly;
using verdict::IsolationLevel;

constexpr std::string_view kName = "polygraph";

class PolygraphChecker final : public Checker {
 public:
  PolygraphChecker(std::vector<IsolationLevel> levels, SiVariant variant)
      : levels_(std::move(levels)), variant_(variant) {}

  std::string_view name() const override { return kName; }
  const std::vector<IsolationLevel>& levels() const override { return levels_; }

  CheckerResult Check(const History& h, const WindowScope* scope,
                      const CheckLimits& limits) const override {
    polygraph::PolygraphResult r = polygraph::CheckPolygraph(
        h, {.levels = levels_, .si_variant = variant_, .limits = &limits});
    CheckerResult out;
    out.complete = r.complete;
    out.undecided = std::move(r.undecided);
    out.violations = std::move(r.violations);
    out.stats = std::move(r.stats);
    KeepInScope(scope, &out);
    const uint32_t first = scope == nullptr ? 0 : scope->first_proper;
    for (uint64_t i = first; i < h.size(); ++i) {
      if (h.has_txn(TxnId(i)) && h.txn(TxnId(i)).committed()) ++out.transactions_checked;
    }
    out.transactions_skipped = h.size() - out.transactions_checked;
    LeaveRangeReadsUndecided(h, &out);
    return out;
  }

 private:
  std::vector<IsolationLevel> levels_;
  SiVariant variant_;
};

absl::StatusOr<SiVariant> ParseVariant(std::string_view text) {
  for (SiVariant v : {SiVariant::kAdya, SiVariant::kStrongSession}) {
    if (text == polygraph::SiVariantName(v)) return v;
  }
  return absl::InvalidArgumentError(
      fmt::format("{}.si_variant: '{}' is no variant (adya or strong-session)", kName, text));
}

}  // namespace

CheckerInfo PolygraphPlugin() {
  return {
      .name = std::string(kName),
      .help =
          "Decides serializability and snapshot isolation without timestamps by solving "
          "for a write order that explains every read, with a SAT solver over a polygraph "
          "(docs/checkers/polygraph.md).",
      .levels = {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable},
      .anomalies = {Anomaly::kInt, Anomaly::kG1a, Anomaly::kG1b, Anomaly::kThinAir, Anomaly::kG0,
                    Anomaly::kG1c, Anomaly::kGSingle, Anomaly::kGSIb, Anomaly::kG2Item,
                    Anomaly::kSession},
      .requirements = {.commit_timestamps = false, .start_snapshots = false, .lists = false},
      .options = {{.name = "si_variant",
                   .type = "adya|strong-session",
                   .default_value = "adya",
                   .help = "which snapshot isolation si means: Adya's, or strong session SI "
                           "(each transaction also sees its session's earlier commits)"}},
      .create = [](std::vector<IsolationLevel> levels,
                   const CheckerOptions& options) -> absl::StatusOr<std::unique_ptr<Checker>> {
        SiVariant variant = SiVariant::kAdya;
        if (auto it = options.find("si_variant"); it != options.end()) {
          absl::StatusOr<SiVariant> parsed = ParseVariant(it->second);
          if (!parsed.ok()) return parsed.status();
          variant = *parsed;
        }
        return std::make_unique<PolygraphChecker>(std::move(levels), variant);
      },
  };
}

}  // namespace isowatch::checkers
