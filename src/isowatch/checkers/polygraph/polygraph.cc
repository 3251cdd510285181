// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/polygraph.h"

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
    case SiVariant::kStrongSession:
      return "strong-session";
  }
  return "?";
}

PolygraphResult CheckPolygraph(const history::History& h, const PolygraphOptions& options) {
  PolygraphResult out;
  const bool sessions = options.si_variant == SiVariant::kStrongSession;
  const Model plain = BuildModel(h, false, options.limits);
  const ModelStats& ms = plain.stats;
  out.stats = {{"transactions", ms.transactions},
               {"unknown_committed", ms.unknown_committed},
               {"unknown_dropped", ms.unknown_dropped},
               {"unobserved_reads", ms.unobserved_reads},
               {"duplicate_writes", ms.duplicate_writes},
               {"constraints_raw", ms.raw_constraints},
               {"write_chains", ms.chains}};
  if (plain.stopped) {
    out.complete = false;
    return out;
  }
  if (!plain.unjudgeable.empty()) {
    out.complete = false;
    out.undecided = plain.unjudgeable;
    return out;
  }
  for (const verdict::Violation& f : plain.findings) {
    verdict::Violation v = f;
    v.checker = "polygraph";
    v.level = options.levels.front();
    if (options.levels.size() > 1) v.levels = options.levels;
    out.violations.push_back(std::move(v));
  }
  for (IsolationLevel level : options.levels) {
    const bool si = level == IsolationLevel::kSnapshotIsolation;
    Model with_sessions;
    if (si && sessions) with_sessions = BuildModel(h, true, options.limits);
    const Model& m = si && sessions ? with_sessions : plain;
    const Mode mode = si ? Mode::kSnapshot : Mode::kSerializable;
    if (m.stopped || (options.limits != nullptr && options.limits->expired())) {
      out.complete = false;
      out.violations.clear();
      return out;
    }
    const SearchResult r =
        Search(m, {.mode = mode, .prune = options.prune, .limits = options.limits});
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
