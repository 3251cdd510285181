// SPDX-License-Identifier: Apache-2.0
// The plug-ins on windows against the plug-ins on the whole history, for simulator histories
// with every fault, key-value and list, delivered out of order:
//  - no false alarm: every finding of chronos on a window is a finding of chronos on the whole
//    history (the same anomaly, transactions at fault and key), and a level adya finds violated
//    on a window is violated in the whole history;
//  - nothing within reach is missed: every whole-history chronos finding whose transactions a
//    single window holds (at least one of them its own) and whose judged snapshot starts at or
//    after that window's base is found on that window.
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/checkers/registry.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/windows/window_cutter.h"

#include "tests/testing/pg_model.h"

namespace isowatch::windows {
namespace {

using history::History;
using verdict::Anomaly;
using verdict::IsolationLevel;

// A finding as both runs can name it: checker level, anomaly, the transactions at fault (for EXT
// the reader alone: the writer it names depends on what the history holds) and the key.
std::string Canonical(const History& h, const verdict::Violation& v) {
  std::vector<std::string> txns;
  const size_t n = v.anomaly == Anomaly::kExt ? std::min<size_t>(1, v.txns.size()) : v.txns.size();
  for (size_t i = 0; i < n; ++i) txns.emplace_back(h.txn_name(v.txns[i]));
  return fmt::format("{} {} [{}] {}", verdict::IsolationLevelName(v.level),
                     verdict::AnomalyName(v.anomaly), fmt::join(txns, ","),
                     v.key.valid() ? h.KeyToString(v.key) : "");
}

// The transaction whose snapshot a chronos finding at SI judges (plug-in trust rule); none for
// INT.
std::optional<size_t> Judged(const verdict::Violation& v) {
  switch (v.anomaly) {
    case Anomaly::kSession:
    case Anomaly::kExt:
      return 0;
    case Anomaly::kNoConflict:
      return 1;
    default:
      return std::nullopt;
  }
}

struct Case {
  uint64_t seed;
  history::DataModel data;
  IsolationLevel level;
  WindowOptions cut;
};

std::string Name(const Case& c) {
  return fmt::format("seed {} {} {} {}", c.seed,
                     c.data == history::DataModel::kList ? "list" : "kv",
                     verdict::IsolationLevelName(c.level),
                     c.cut.span > 0 ? fmt::format("span {}", c.cut.span)
                                    : fmt::format("count {}", c.cut.transactions));
}

// Cuts `h` into windows, adding its transactions in a shuffled order and sealing behind a
// moving point, as a live stream with bounded disorder would.
std::vector<Window> Cut(const History& h, const WindowOptions& options, uint64_t seed) {
  std::vector<TxnId> order;
  for (uint32_t i = 0; i < h.size(); ++i) order.push_back(TxnId(i));
  std::sort(order.begin(), order.end(), [&](TxnId a, TxnId b) {
    const auto& ta = h.txn(a);
    const auto& tb = h.txn(b);
    return (ta.has_commit ? ta.commit : ta.start) < (tb.has_commit ? tb.commit : tb.start);
  });
  // Disorder: swap within blocks of 20.
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 20 <= order.size(); i += 20) {
    std::shuffle(order.begin() + static_cast<ptrdiff_t>(i),
                 order.begin() + static_cast<ptrdiff_t>(i + 20), rng);
  }
  WindowCutter cutter(options);
  std::vector<Window> out;
  for (size_t i = 0; i < order.size(); ++i) {
    cutter.Add(h, order[i]);
    // At each block end, everything still to come is placed at or after the smallest placement
    // key of the next block (blocks are shuffled only within themselves): seal just below it.
    if ((i + 1) % 20 == 0 && i + 1 < order.size()) {
      history::Timestamp point = history::Timestamp::Max();
      for (size_t j = i + 1; j < std::min(order.size(), i + 21); ++j) {
        const auto& next = h.txn(order[j]);
        if (next.has_commit) {
          point = std::min(point, next.commit);
        } else if (next.has_start) {
          point = std::min(point, next.start);
        }
      }
      if (point != history::Timestamp::Max()) {
        point.physical -= 1;
        for (Window& w : cutter.Seal(h, point)) out.push_back(std::move(w));
      }
    }
  }
  for (Window& w : cutter.Flush(h)) out.push_back(std::move(w));
  EXPECT_EQ(cutter.stats().late, 0u);
  return out;
}

TEST(WindowsGroundTruth, PluginsOnWindowsAgreeWithTheWholeHistory) {
  std::vector<Case> cases;
  for (uint64_t seed : {11, 12, 13}) {
    for (history::DataModel data : {history::DataModel::kKeyValue, history::DataModel::kList}) {
      for (IsolationLevel level :
           {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable}) {
        cases.push_back({seed, data, level, WindowOptions{.transactions = 150, .overlap = 40}});
        cases.push_back({seed, data, level, WindowOptions{.span = 400, .overlap = 100}});
        // Windows shorter than many transactions: long transactions reach past the lead-in.
        cases.push_back({seed, data, level, WindowOptions{.transactions = 8, .overlap = 0}});
      }
    }
  }
  size_t total_whole = 0;
  size_t total_reachable = 0;
  size_t total_windows = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(Name(c));
    sim::WorkloadOptions o;
    o.seed = c.seed;
    o.txns = 1500;
    o.sessions = 10;
    o.keys = 40;
    o.level = c.level;
    o.data = c.data;
    if (c.data == history::DataModel::kList) o.max_appends_per_key = 32;
    for (sim::Fault f : sim::kAllFaults) {
      // Appends have no intermediate values.
      if (f == sim::Fault::kIntermediateRead && c.data == history::DataModel::kList) continue;
      o.faults.push_back({f, 0.01, 0});
    }
    absl::StatusOr<sim::SimResult> sim = sim::Simulate(o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    const History& h = sim->history;

    // The whole history.
    const checkers::ChronosResult whole =
        checkers::RunChronos(h, {.level = c.level, .limits = nullptr});
    std::map<std::string, const verdict::Violation*> whole_set;
    for (const verdict::Violation& v : whole.violations) whole_set.emplace(Canonical(h, v), &v);
    const checkers::adya::AdyaResult whole_adya = checkers::adya::CheckAdya(h);
    std::set<IsolationLevel> adya_violated;
    for (const verdict::Violation& v : whole_adya.violations) {
      if (v.levels.empty()) adya_violated.insert(v.level);
      for (IsolationLevel l : v.levels) adya_violated.insert(l);
    }

    auto chronos =
        checkers::CreateChecker("chronos", {{"levels", verdict::IsolationLevelName(c.level)}});
    ASSERT_TRUE(chronos.ok()) << chronos.status();
    auto adya = checkers::CreateChecker("adya", {});
    ASSERT_TRUE(adya.ok()) << adya.status();

    const std::vector<Window> windows = Cut(h, c.cut, c.seed);
    ASSERT_FALSE(windows.empty());
    total_windows += windows.size();
    std::set<std::string> found;
    std::vector<std::set<std::string>> window_names(windows.size());
    for (size_t wi = 0; wi < windows.size(); ++wi) {
      const Window& w = windows[wi];
      for (uint32_t i = 0; i < w.history.size(); ++i) {
        window_names[wi].emplace(w.history.txn_name(TxnId(i)));
      }
      const checkers::CheckerResult r = (*chronos)->Check(w.history, &w.scope, {});
      ASSERT_TRUE(r.complete);
      for (const verdict::Violation& v : r.violations) {
        const std::string key = Canonical(w.history, v);
        EXPECT_TRUE(whole_set.contains(key))
            << "window " << w.scope.index << ": " << key << " is no finding of the whole history";
        found.insert(key);
      }
      const checkers::CheckerResult a = (*adya)->Check(w.history, &w.scope, {});
      ASSERT_TRUE(a.complete);
      for (const verdict::Violation& v : a.violations) {
        std::vector<IsolationLevel> levels = v.levels;
        if (levels.empty()) levels.push_back(v.level);
        for (IsolationLevel l : levels) {
          EXPECT_TRUE(adya_violated.contains(l))
              << "window " << w.scope.index << ": adya finds " << verdict::IsolationLevelName(l)
              << " violated, the whole history does not: " << v.explanation;
        }
      }
    }

    // Every whole-history finding within reach of a window is found.
    for (const auto& [key, v] : whole_set) {
      std::vector<std::string> names;
      for (TxnId id : v->txns) names.emplace_back(h.txn_name(id));
      bool reachable = false;
      for (size_t wi = 0; wi < windows.size() && !reachable; ++wi) {
        const Window& w = windows[wi];
        if (!std::all_of(names.begin(), names.end(),
                         [&](const std::string& n) { return window_names[wi].contains(n); })) {
          continue;
        }
        bool own = false;
        for (uint32_t i = w.scope.first_proper; i < w.history.size() && !own; ++i) {
          own = std::find(names.begin(), names.end(), w.history.txn_name(TxnId(i))) != names.end();
        }
        if (!own) continue;
        if (c.level == IsolationLevel::kSnapshotIsolation) {
          if (std::optional<size_t> j = Judged(*v); j && *j < v->txns.size()) {
            const auto& t = h.txn(v->txns[*j]);
            if (t.has_start && t.start < w.scope.base) continue;
          }
          // A session predecessor the window does not hold is not checked there.
          if (v->anomaly == Anomaly::kSession) {
            const auto& t = h.txn(v->txns[0]);
            if (!t.session_prev.valid() ||
                !window_names[wi].contains(std::string(h.txn_name(t.session_prev)))) {
              continue;
            }
          }
        }
        reachable = true;
      }
      if (!reachable) continue;
      ++total_reachable;
      EXPECT_TRUE(found.contains(key)) << key << " is within a window's reach but not found";
    }
    total_whole += whole_set.size();
  }
  // The histories have faults, and most findings lie within one window.
  EXPECT_GT(total_whole, 100u);
  EXPECT_GT(total_reachable, total_whole / 2);
  std::cout << fmt::format("{} windows; {} whole-history findings, {} within a window's reach\n",
                           total_windows, total_whole, total_reachable);
}

// PostgreSQL snapshot histories (the model MVCC of tests/testing/pg_model.h, with faults): a
// window trusts a snapshot transaction's finding only when every writer of its initial state has
// an xid below the snapshot's xmin, so a window never reports what the whole history does not,
// and still finds some.
TEST(WindowsGroundTruth, SnapshotHistoriesOnWindows) {
  size_t found = 0;
  size_t whole_total = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    int faults = 0;
    const History h =
        testing::PgModel(
            {.seed = seed, .txns = 400, .keys = 12, .stale_read = 0.05, .lost_update = 0.5},
            &faults)
            .Build();
    const checkers::ChronosResult whole =
        checkers::RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation});
    std::set<std::string> whole_set;
    for (const verdict::Violation& v : whole.violations) whole_set.insert(Canonical(h, v));
    whole_total += whole_set.size();
    auto chronos = checkers::CreateChecker("chronos", {{"levels", "si"}});
    ASSERT_TRUE(chronos.ok()) << chronos.status();
    for (const WindowOptions& cut : {WindowOptions{.transactions = 40, .overlap = 10},
                                     WindowOptions{.transactions = 8, .overlap = 0}}) {
      for (const Window& w : Cut(h, cut, seed)) {
        const checkers::CheckerResult r = (*chronos)->Check(w.history, &w.scope, {});
        ASSERT_TRUE(r.complete);
        for (const verdict::Violation& v : r.violations) {
          const std::string key = Canonical(w.history, v);
          EXPECT_TRUE(whole_set.contains(key))
              << "seed " << seed << " window " << w.scope.index << ": " << key;
          ++found;
        }
      }
    }
  }
  EXPECT_GT(whole_total, 0u);
  EXPECT_GT(found, 0u);
}

}  // namespace
}  // namespace isowatch::windows
