// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/plugin.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include <fmt/format.h>

#include "isowatch/checkers/polygraph/polygraph.h"

namespace isowatch::checkers {
namespace {

using history::History;
using polygraph::SatBackend;
using polygraph::SiVariant;
using verdict::Anomaly;
using verdict::IsolationLevel;

constexpr std::string_view kName = "polygraph";

// The length of one tick of a history's real-time intervals; nullopt for a unit not known.
std::optional<absl::Duration> TimeUnitLength(std::string_view unit) {
  if (unit == "ns") return absl::Nanoseconds(1);
  if (unit == "us" || unit == "\u00b5s") return absl::Microseconds(1);
  if (unit == "ms") return absl::Milliseconds(1);
  if (unit == "s") return absl::Seconds(1);
  return std::nullopt;
}

class PolygraphChecker final : public Checker {
 public:
  PolygraphChecker(std::vector<IsolationLevel> levels, SiVariant variant, SatBackend solver,
                   absl::Duration clock_drift)
      : levels_(std::move(levels)), variant_(variant), solver_(solver), clock_drift_(clock_drift) {}

  std::string_view name() const override { return kName; }
  const std::vector<IsolationLevel>& levels() const override { return levels_; }

  CheckerResult Check(const History& h, const WindowScope* scope,
                      const CheckLimits& limits) const override {
    CheckerResult out;
    const std::optional<absl::Duration> tick = TimeUnitLength(h.info().time_unit);
    if (clock_drift_ > absl::ZeroDuration() && variant_ != SiVariant::kAdya && h.has_real_time() &&
        !tick.has_value()) {
      out.complete = false;
      out.undecided = fmt::format(
          "{}.clock_drift is {}, and the history's real-time unit '{}' is none of ns, us, ms "
          "and s",
          kName, absl::FormatDuration(clock_drift_), h.info().time_unit);
      out.transactions_skipped = h.size();
      return out;
    }
    // Rounded down: δ never grows into a unit the user did not allow.
    absl::Duration rest;
    const int64_t drift = tick.has_value() ? absl::IDivDuration(clock_drift_, *tick, &rest) : 0;
    polygraph::PolygraphResult r =
        polygraph::CheckPolygraph(h, {.levels = levels_,
                                      .si_variant = variant_,
                                      .solver = solver_,
                                      .clock_drift = drift,
                                      .limits = &limits,
                                      .first_counted = scope == nullptr ? 0 : scope->first_proper});
    out.complete = r.complete;
    out.undecided = std::move(r.undecided);
    out.violations = std::move(r.violations);
    out.stats = std::move(r.stats);
    if (scope != nullptr) {
      // A long transaction that began before the window's base reads a version older than the
      // window's initial state, which no transaction of the window wrote.
      const size_t before = out.violations.size();
      std::erase_if(out.violations,
                    [](const verdict::Violation& v) { return v.anomaly == Anomaly::kThinAir; });
      out.findings_out_of_scope += before - out.violations.size();
    }
    KeepInScope(scope, &out);
    // Judged: the committed transactions and those of unknown outcome a read saw.
    out.transactions_checked = r.counted;
    out.transactions_skipped = h.size() - out.transactions_checked;
    return out;
  }

 private:
  std::vector<IsolationLevel> levels_;
  SiVariant variant_;
  SatBackend solver_;
  absl::Duration clock_drift_;
};

absl::StatusOr<SiVariant> ParseVariant(std::string_view text) {
  for (SiVariant v :
       {SiVariant::kAdya, SiVariant::kGeneralized, SiVariant::kStrongSession, SiVariant::kStrong}) {
    if (text == polygraph::SiVariantName(v)) return v;
  }
  return absl::InvalidArgumentError(
      fmt::format("{}.si_variant: '{}' is no variant (adya, generalized, strong-session or "
                  "strong)",
                  kName, text));
}

absl::StatusOr<absl::Duration> ParseDrift(std::string_view text) {
  absl::Duration d;
  if (!absl::ParseDuration(absl::string_view(text.data(), text.size()), &d) ||
      d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}.clock_drift: '{}' is no duration of zero or more (e.g. 0, 250us, 5ms)", kName, text));
  }
  return d;
}

absl::StatusOr<SatBackend> ParseSolver(std::string_view text) {
  for (SatBackend b : {SatBackend::kCadical, SatBackend::kCryptoMiniSat}) {
    if (text == polygraph::SatBackendName(b)) return b;
  }
  return absl::InvalidArgumentError(
      fmt::format("{}.solver: '{}' is no solver (cadical or cryptominisat)", kName, text));
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
                    Anomaly::kSession, Anomaly::kIncompatibleOrder, Anomaly::kDuplicateElements},
      .requirements = {.commit_timestamps = false, .start_snapshots = false},
      .options = {{.name = "si_variant",
                   .type = "adya|generalized|strong-session|strong",
                   .default_value = "adya",
                   .help = "which snapshot isolation si means: Adya's; generalized (commits in "
                           "real-time order); strong session (and each transaction sees its "
                           "session's earlier commits); strong (and the latest snapshot)"},
                  {.name = "solver",
                   .type = "cadical|cryptominisat",
                   .default_value = "cadical",
                   .help = "the SAT solver behind the search; both decide alike "
                           "(docs/checkers/polygraph.md, \"The solver\")"},
                  {.name = "clock_drift",
                   .type = "duration",
                   .default_value = "0",
                   .help = "the clients' clock error: under the real-time variants a transaction "
                           "precedes another only if it completed more than this before the "
                           "other was invoked"}},
      .create = [](std::vector<IsolationLevel> levels,
                   const CheckerOptions& options) -> absl::StatusOr<std::unique_ptr<Checker>> {
        SiVariant variant = SiVariant::kAdya;
        if (auto it = options.find("si_variant"); it != options.end()) {
          absl::StatusOr<SiVariant> parsed = ParseVariant(it->second);
          if (!parsed.ok()) return parsed.status();
          variant = *parsed;
        }
        SatBackend solver = SatBackend::kCadical;
        if (auto it = options.find("solver"); it != options.end()) {
          absl::StatusOr<SatBackend> parsed = ParseSolver(it->second);
          if (!parsed.ok()) return parsed.status();
          solver = *parsed;
        }
        absl::Duration drift = absl::ZeroDuration();
        if (auto it = options.find("clock_drift"); it != options.end()) {
          absl::StatusOr<absl::Duration> parsed = ParseDrift(it->second);
          if (!parsed.ok()) return parsed.status();
          drift = *parsed;
        }
        return std::make_unique<PolygraphChecker>(std::move(levels), variant, solver, drift);
      },
  };
}

}  // namespace isowatch::checkers
