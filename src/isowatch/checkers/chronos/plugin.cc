// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/chronos/plugin.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/common/status_macros.h"

namespace isowatch::checkers {
namespace {

using history::History;
using history::Transaction;
using verdict::Anomaly;
using verdict::IsolationLevel;
using verdict::Violation;

constexpr std::string_view kName = "chronos";

// Whether a window may trust an SI finding: only if the transaction whose snapshot it judges
// started at or after the window's base (with a PostgreSQL snapshot: if its xmin is above the
// xid of every writer of the window's initial state), since the window's initial state is the state
// at the base, not at that transaction's start (docs/checkers/plugins.md). SESSION and EXT judge
// the snapshot of their first transaction, NOCONFLICT that of the later committer (its second); INT
// judges no snapshot.
bool TrustedAtSnapshotIsolation(const History& h, const WindowScope& scope, const Violation& v) {
  size_t judged = 0;
  switch (v.anomaly) {
    case Anomaly::kInt:
      return true;
    case Anomaly::kSession:
    case Anomaly::kExt:
      judged = 0;
      break;
    case Anomaly::kNoConflict:
      judged = 1;
      break;
    default:
      return true;
  }
  if (judged >= v.txns.size()) return true;
  const Transaction& t = h.txn(v.txns[judged]);
  if (h.has_snapshot(t)) {
    // A snapshot sees every xid below its xmin: if every writer of the initial state is one, the
    // initial state is what the snapshot sees of them.
    return !scope.base_without_xid && h.snapshot(t).xmin >= scope.base_xid_end;
  }
  return t.has_start && t.start >= scope.base;
}

class ChronosChecker final : public Checker {
 public:
  ChronosChecker(std::vector<IsolationLevel> levels, uint32_t threads)
      : levels_(std::move(levels)), threads_(threads) {}

  std::string_view name() const override { return kName; }
  const std::vector<IsolationLevel>& levels() const override { return levels_; }

  CheckerResult Check(const History& h, const WindowScope* scope,
                      const CheckLimits& limits) const override {
    CheckerResult out;
    size_t external_reads = 0;
    size_t internal_reads = 0;
    size_t peak_ongoing = 0;
    for (IsolationLevel level : levels_) {
      ChronosResult r = RunChronos(h, {.level = level, .limits = &limits, .threads = threads_});
      external_reads = std::max(external_reads, r.stats.external_reads);
      internal_reads = std::max(internal_reads, r.stats.internal_reads);
      peak_ongoing = std::max(peak_ongoing, r.stats.peak_ongoing);
      if (!r.complete) {
        out.complete = false;
        break;
      }
      for (Violation& v : r.violations) {
        if (scope != nullptr && level == IsolationLevel::kSnapshotIsolation &&
            !TrustedAtSnapshotIsolation(h, *scope, v)) {
          ++out.findings_out_of_scope;
          continue;
        }
        v.checker = std::string(kName);
        out.violations.push_back(std::move(v));
      }
    }
    if (!out.complete) out.violations.clear();
    KeepInScope(scope, &out);
    CountTransactions(h, scope, &out);
    out.stats = {{"external_reads", external_reads},
                 {"internal_reads", internal_reads},
                 {"peak_ongoing", peak_ongoing}};
    LeaveRangeReadsUndecided(h, &out);
    return out;
  }

 private:
  // A window's own transaction is checked if some configured level replays it: committed, with
  // a commit timestamp, and for si alone a start timestamp too.
  void CountTransactions(const History& h, const WindowScope* scope, CheckerResult* out) const {
    const bool ser =
        std::find(levels_.begin(), levels_.end(), IsolationLevel::kSerializable) != levels_.end();
    const uint32_t first = scope == nullptr ? 0 : scope->first_proper;
    for (uint32_t i = first; i < h.size(); ++i) {
      const Transaction& t = h.txn(TxnId(i));
      if (t.committed() && t.has_commit && (ser || t.has_start || h.has_snapshot(t))) {
        ++out->transactions_checked;
      }
    }
    out->transactions_skipped = h.size() - out->transactions_checked;
  }

  std::vector<IsolationLevel> levels_;
  uint32_t threads_;
};

}  // namespace

CheckerInfo ChronosPlugin() {
  return {
      .name = std::string(kName),
      .help =
          "Replays the history in timestamp order and checks SI's axioms (SESSION, INT, EXT, "
          "NOCONFLICT) or SER's commit-order replay (docs/checkers/chronos.md).",
      .levels = {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable},
      .anomalies = {Anomaly::kSession, Anomaly::kInt, Anomaly::kExt, Anomaly::kNoConflict},
      .requirements = {.commit_timestamps = true, .start_snapshots = true},
      .options = {{.name = "threads",
                   .type = "integer",
                   .default_value = "0",
                   .help = fmt::format("threads one check replays on, each judging a share of "
                                       "the keys; 0: one below {} transactions, else one per "
                                       "core, at most {}",
                                       kParallelMinTxns, kMaxAutoThreads)}},
      .create = [](std::vector<IsolationLevel> levels,
                   const CheckerOptions& options) -> absl::StatusOr<std::unique_ptr<Checker>> {
        uint32_t threads = ChronosOptions{}.threads;
        if (auto it = options.find("threads"); it != options.end()) {
          ASSIGN_OR_RETURN(uint64_t value,
                           ParseIntegerOption(kName, it->first, it->second, 0, kMaxThreads));
          threads = static_cast<uint32_t>(value);
        }
        return std::make_unique<ChronosChecker>(std::move(levels), threads);
      },
  };
}

}  // namespace isowatch::checkers
