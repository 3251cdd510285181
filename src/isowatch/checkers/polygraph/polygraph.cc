// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/polygraph.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/checkers/polygraph/internal/explain.h"
#include "isowatch/checkers/polygraph/internal/model.h"
#include "isowatch/checkers/polygraph/internal/search.h"

namespace isowatch::checkers::polygraph {
namespace {

using verdict::IsolationLevel;

void AddStats(const std::string& prefix, const SearchStats& s,
              std::vector<std::pair<std::string, uint64_t>>& out) {
  const std::pair<const char*, size_t> rows[] = {
      {"hot_key_rounds", s.hot_key_rounds},
      {"hot_key_pairs", s.hot_key_pairs},
      {"nodes", s.nodes},
      {"known_edges", s.known_edges},
      {"constraints", s.constraints},
      {"constraints_forced", s.forced},
      {"constraints_free", s.free},
      {"constraints_solved", s.solved},
      {"components", s.components},
      {"solver_calls", s.solver_calls},
      {"cycle_clauses", s.cycle_clauses},
  };
  for (const auto& [name, value] : rows) out.emplace_back(prefix + name, value);
}

}  // namespace

const char* SiVariantName(SiVariant variant) {
  switch (variant) {
    case SiVariant::kAdya:
      return "adya";
    case SiVariant::kGeneralized:
      return "generalized";
    case SiVariant::kStrongSession:
      return "strong-session";
    case SiVariant::kStrong:
      return "strong";
  }
  return "?";
}

const char* SatBackendName(SatBackend backend) {
  switch (backend) {
    case SatBackend::kCadical:
      return "cadical";
    case SatBackend::kCryptoMiniSat:
      return "cryptominisat";
  }
  return "?";
}

PolygraphResult CheckPolygraph(const history::History& h, const PolygraphOptions& options) {
  PolygraphResult out;
  const SiVariant variant = options.si_variant;
  Model m = BuildModel(h, options.limits, options.max_constraint_edges, options.lazy_chains);
  const ModelStats& ms = m.stats;
  for (TxnId t : m.txns) out.counted += t.value() >= options.first_counted ? 1 : 0;
  out.stats = {{"transactions", ms.transactions},
               {"unknown_committed", ms.unknown_committed},
               {"unknown_dropped", ms.unknown_dropped},
               {"unobserved_reads", ms.unobserved_reads},
               {"duplicate_writes", ms.duplicate_writes},
               {"constraints_raw", ms.raw_constraints},
               {"write_chains", ms.chains},
               {"hot_keys", ms.lazy_keys}};
  if (variant != SiVariant::kAdya && h.has_real_time()) {
    // δ goes with every verdict it shaped, in the history's time unit.
    out.stats.emplace_back("clock_drift",
                           static_cast<uint64_t>(std::max<int64_t>(options.clock_drift, 0)));
  }
  if (m.stopped) {
    out.complete = false;
    return out;
  }
  const bool si_wanted = std::find(options.levels.begin(), options.levels.end(),
                                   IsolationLevel::kSnapshotIsolation) != options.levels.end();
  if (m.unjudgeable.empty() && si_wanted && !h.has_real_time() &&
      (variant == SiVariant::kGeneralized || variant == SiVariant::kStrong)) {
    m.unjudgeable = fmt::format(
        "{} snapshot isolation orders transactions by real time, and the "
        "history has no real-time intervals",
        variant == SiVariant::kStrong ? "strong" : "generalized");
  }
  if (!m.unjudgeable.empty()) {
    out.complete = false;
    out.undecided = m.unjudgeable;
    return out;
  }
  for (const verdict::Violation& f : m.findings) {
    verdict::Violation v = f;
    v.checker = "polygraph";
    if (f.anomaly == verdict::Anomaly::kGSingle) {
      // A lost update, whose cycle (one rw edge and one ww edge) is G-single in the graph of
      // transactions and G-SIb in that of begins and commits: one finding per level.
      for (IsolationLevel level : options.levels) {
        v.level = level;
        v.anomaly = level == IsolationLevel::kSnapshotIsolation ? verdict::Anomaly::kGSIb
                                                                : verdict::Anomaly::kGSingle;
        out.violations.push_back(v);
      }
      continue;
    }
    v.level = options.levels.front();
    if (options.levels.size() > 1) v.levels = options.levels;
    out.violations.push_back(std::move(v));
  }
  // Serializability first: the order edges snapshot isolation's variants add are not its own.
  std::vector<IsolationLevel> levels = options.levels;
  std::sort(levels.begin(), levels.end(), [](IsolationLevel a, IsolationLevel b) {
    return (a == IsolationLevel::kSerializable) > (b == IsolationLevel::kSerializable);
  });
  for (IsolationLevel level : levels) {
    const bool si = level == IsolationLevel::kSnapshotIsolation;
    if (si) {
      AddOrderEdges(h, variant == SiVariant::kStrongSession || variant == SiVariant::kStrong,
                    variant != SiVariant::kAdya, std::max<int64_t>(options.clock_drift, 0), m);
    }
    const Mode mode = si ? Mode::kSnapshot : Mode::kSerializable;
    if (options.limits != nullptr && options.limits->expired()) {
      out.complete = false;
      out.violations.clear();
      return out;
    }
    const SearchOptions so = {.mode = mode,
                              .real_time_to_begin = si && variant == SiVariant::kStrong,
                              .prune = options.prune,
                              .solver = options.solver,
                              .max_constraint_edges = options.max_constraint_edges,
                              .limits = options.limits};
    SearchResult r = Search(m, so);
    if (r.verdict == SearchResult::Verdict::kTooLarge) {
      out.complete = false;
      out.undecided = fmt::format(
          "the hot keys' write orders needed more than {} constraint edges, more than the "
          "checker holds in memory",
          options.max_constraint_edges);
      out.violations.clear();
      return out;
    }
    AddStats(fmt::format("{}_", verdict::IsolationLevelName(level)), r.stats, out.stats);
    if (r.verdict == SearchResult::Verdict::kStopped) {
      out.complete = false;
      out.violations.clear();
      return out;
    }
    for (const Refutation& ref : r.refutations) {
      verdict::Violation v = Explain(h, m, ref, mode);
      v.checker = "polygraph";
      v.level = level;
      out.violations.push_back(std::move(v));
    }
  }
  verdict::SortViolations(out.violations);
  return out;
}

}  // namespace isowatch::checkers::polygraph
