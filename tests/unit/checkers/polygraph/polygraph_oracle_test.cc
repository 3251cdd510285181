// SPDX-License-Identifier: Apache-2.0
// The polygraph checker against brute-force oracles on thousands of random tiny histories. The
// oracles know nothing of polygraphs: for serializability they try every serial order of the
// committed transactions; for snapshot isolation every interleaving of their begins and commits,
// where a transaction reads the state at its begin (and its own writes), installs its writes at
// its commit, and no two writers of one key overlap. Generalized SI also wants each transaction
// to commit after those that completed before it was invoked, strong SI to begin after them, and
// strong session SI (generalized SI here, the histories having real time) to begin after its
// session predecessor committed; with a clock drift δ (0 to 3 ticks by seed), "before" means
// more than δ before. The checker's verdict at each
// level must be the oracle's, with pruning and without. Seeds are fixed, and a disagreement
// prints the seed and the history.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"
#include "tests/unit/checkers/polygraph/polygraph_testing.h"

namespace isowatch::checkers::polygraph {
namespace {

using isowatch::testing::TestHistory;
using verdict::IsolationLevel;

// A write, or a read of a register (`value`) or of a list (`list`); in a list history a write
// appends `value`.
struct TinyOp {
  bool write = false;
  int64_t key = 0;
  int64_t value = 0;
  std::vector<int64_t> list;
};

struct TinyTxn {
  int session = 0;
  bool committed = true;
  std::vector<TinyOp> ops;
  int64_t invoke = 0;  // the client's real-time interval
  int64_t complete = 0;
};

struct Tiny {
  bool lists = false;
  std::vector<TinyTxn> txns;
};

// Per key: a register's value as one element (absent: 0), or a list's elements (absent: empty).
using State = std::map<int64_t, std::vector<int64_t>>;

std::string Format(const Tiny& tiny) {
  std::string out = tiny.lists ? "lists: " : "";
  for (size_t i = 0; i < tiny.txns.size(); ++i) {
    const TinyTxn& t = tiny.txns[i];
    out += fmt::format("T{}{}@s{}[{},{}]:", i, t.committed ? "" : "!", t.session, t.invoke,
                       t.complete);
    for (const TinyOp& op : t.ops) {
      if (!op.write && tiny.lists) {
        out += fmt::format(" r({},[{}])", op.key, fmt::join(op.list, ","));
      } else {
        out += fmt::format(" {}({},{})", op.write ? 'w' : 'r', op.key, op.value);
      }
    }
    out += "; ";
  }
  return out;
}

// What a read of `key` returns in state `s`: the list, or the register's value as one element.
std::vector<int64_t> Get(const State& s, int64_t key, bool lists) {
  auto it = s.find(key);
  if (it != s.end()) return it->second;
  return lists ? std::vector<int64_t>{} : std::vector<int64_t>{0};
}

void Apply(const TinyOp& op, State& s, bool lists) {
  if (lists) {
    std::vector<int64_t> list = Get(s, op.key, true);
    list.push_back(op.value);
    s[op.key] = std::move(list);
  } else {
    s[op.key] = {op.value};
  }
}

// What `op`, a read, returned, in the form Get gives.
std::vector<int64_t> Seen(const TinyOp& op, bool lists) {
  return lists ? op.list : std::vector<int64_t>{op.value};
}

// Whether transaction `t`'s reads are what a snapshot `snap` and its own writes give.
bool ReadsMatch(const TinyTxn& t, const State& snap, bool lists) {
  State view = snap;
  for (const TinyOp& op : t.ops) {
    if (op.write) {
      Apply(op, view, lists);
    } else if (Seen(op, lists) != Get(view, op.key, lists)) {
      return false;
    }
  }
  return true;
}

void Install(const TinyTxn& t, State& s, bool lists) {
  for (const TinyOp& op : t.ops) {
    if (op.write) Apply(op, s, lists);
  }
}

bool SharesWrittenKey(const TinyTxn& a, const TinyTxn& b) {
  for (const TinyOp& x : a.ops) {
    for (const TinyOp& y : b.ops) {
      if (x.write && y.write && x.key == y.key) return true;
    }
  }
  return false;
}

class Oracle {
 public:
  explicit Oracle(const Tiny& all) : lists_(all.lists) {
    for (const TinyTxn& t : all.txns) {
      if (t.committed) txns_.push_back(t);
    }
  }

  bool Serializable() {
    std::vector<bool> done(txns_.size(), false);
    return Serial(State{}, done, 0);
  }

  // Snapshot isolation: `sessions`, a transaction begins after its session predecessors
  // committed; `commits_in_real_time`, it commits after every transaction that completed before
  // it was invoked (generalized SI); `begins_in_real_time`, it begins after them (strong SI).
  // Real time allows for a clock error of `clock_drift`: j precedes i only if it completed more
  // than that before i was invoked.
  bool Snapshot(bool sessions, bool commits_in_real_time = false, bool begins_in_real_time = false,
                int64_t clock_drift = 0) {
    sessions_ = sessions;
    clock_drift_ = clock_drift;
    commits_in_real_time_ = commits_in_real_time;
    begins_in_real_time_ = begins_in_real_time;
    begun_.assign(txns_.size(), -1);
    committed_at_.assign(txns_.size(), -1);
    return Interleave(State{}, 0);
  }

 private:
  bool Serial(const State& s, std::vector<bool>& done, size_t count) {
    if (count == txns_.size()) return true;
    for (size_t i = 0; i < txns_.size(); ++i) {
      if (done[i] || !ReadsMatch(txns_[i], s, lists_)) continue;
      State next = s;
      Install(txns_[i], next, lists_);
      done[i] = true;
      const bool ok = Serial(next, done, count + 1);
      done[i] = false;
      if (ok) return true;
    }
    return false;
  }

  // Events so far: `step` of them; begun_[i] / committed_at_[i] the step of each, or -1.
  bool Interleave(const State& s, int step) {
    bool all = true;
    for (size_t i = 0; i < txns_.size(); ++i) {
      if (committed_at_[i] >= 0) continue;
      all = false;
      if (begun_[i] < 0) {
        if (!ReadsMatch(txns_[i], s, lists_) || !SessionReady(i) ||
            (begins_in_real_time_ && !PredecessorsCommitted(i))) {
          continue;
        }
        begun_[i] = step;
        const bool ok = Interleave(s, step + 1);
        begun_[i] = -1;
        if (ok) return true;
        continue;
      }
      // Commit i: no writer of a common key may have committed since i began.
      bool conflict = commits_in_real_time_ && !PredecessorsCommitted(i);
      for (size_t j = 0; j < txns_.size(); ++j) {
        if (j != i && committed_at_[j] > begun_[i] && SharesWrittenKey(txns_[i], txns_[j])) {
          conflict = true;
        }
      }
      if (conflict) continue;
      State next = s;
      Install(txns_[i], next, lists_);
      committed_at_[i] = step;
      const bool ok = Interleave(next, step + 1);
      committed_at_[i] = -1;
      if (ok) return true;
    }
    return all;
  }

  // Whether every earlier transaction of i's session has committed.
  bool SessionReady(size_t i) const {
    if (!sessions_) return true;
    for (size_t j = 0; j < i; ++j) {
      if (txns_[j].session == txns_[i].session && committed_at_[j] < 0) return false;
    }
    return true;
  }

  // Whether every transaction that completed more than the drift before i was invoked has
  // committed.
  bool PredecessorsCommitted(size_t i) const {
    for (size_t j = 0; j < txns_.size(); ++j) {
      if (txns_[j].complete + clock_drift_ < txns_[i].invoke && committed_at_[j] < 0) return false;
    }
    return true;
  }

  bool lists_ = false;
  std::vector<TinyTxn> txns_;
  bool sessions_ = false;
  bool commits_in_real_time_ = false;
  bool begins_in_real_time_ = false;
  int64_t clock_drift_ = 0;
  std::vector<int> begun_;
  std::vector<int> committed_at_;
};

// A random history of 2 to 5 transactions (one of them maybe aborted) in up to 3 sessions over
// up to 3 keys, every written value unique per key. Reads return what a random interleaving of
// begins and commits gives at the reader's begin (so many histories are SI, some SER), or now
// and then any value written to the key, the initial 0, or a value nobody wrote.
Tiny RandomHistory(uint64_t seed, bool lists) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const int n = pick(2, 5);
  const int sessions = pick(1, 3);
  const int keys = pick(1, 3);
  Tiny tiny{.lists = lists, .txns = std::vector<TinyTxn>(n)};
  std::map<int64_t, int64_t> next_value;
  std::map<int64_t, std::vector<int64_t>> written;
  for (TinyTxn& t : tiny.txns) {
    t.session = pick(1, sessions);
    t.committed = !chance(0.08);
    for (int i = pick(1, 4); i > 0; --i) {
      TinyOp op{.write = chance(0.5), .key = pick(0, keys - 1)};
      if (op.write) {
        op.value = ++next_value[op.key];
        written[op.key].push_back(op.value);
      }
      t.ops.push_back(op);
    }
  }
  // A random interleaving: each transaction begins at one step and commits at a later one.
  std::vector<int> order;
  for (int i = 0; i < n; ++i) order.insert(order.end(), {i, i});
  std::shuffle(order.begin(), order.end(), rng);
  if (chance(0.3)) std::sort(order.begin(), order.end());  // serial
  State state;
  std::vector<bool> begun(n, false);
  for (size_t step = 0; step < order.size(); ++step) {
    const int i = order[step];
    TinyTxn& t = tiny.txns[i];
    // Real time around the events, now and then off by a step or two.
    const int64_t at = 2 * static_cast<int64_t>(step) + pick(-2, 2);
    if (begun[i]) {
      t.complete = std::max(t.invoke, at);
      if (t.committed) Install(t, state, lists);
      continue;
    }
    t.invoke = at;
    begun[i] = true;
    State view = state;
    for (TinyOp& op : t.ops) {
      if (op.write) {
        Apply(op, view, lists);
        continue;
      }
      std::vector<int64_t> seen = Get(view, op.key, lists);
      if (chance(0.12)) {
        // Another value written to the key, the initial one, or one nobody wrote; for a list,
        // one element more or fewer, or two swapped.
        const std::vector<int64_t>& ws = written[op.key];
        const int r = pick(0, 9);
        if (!lists) {
          seen = {r < 7 && !ws.empty() ? ws[pick(0, static_cast<int>(ws.size()) - 1)]
                                       : (r < 9 ? 0 : 99)};
        } else if (r < 4 && !ws.empty()) {
          seen.push_back(ws[pick(0, static_cast<int>(ws.size()) - 1)]);
        } else if (r < 7 && !seen.empty()) {
          seen.pop_back();
        } else if (r < 9 && seen.size() >= 2) {
          std::swap(seen[0], seen[1]);
        } else {
          seen.push_back(99);
        }
      }
      if (lists) {
        op.list = std::move(seen);
      } else {
        op.value = seen[0];
      }
    }
  }
  return tiny;
}

history::History Build(const Tiny& tiny) {
  TestHistory t;
  t.DefaultInitial(0);
  for (size_t i = 0; i < tiny.txns.size(); ++i) {
    const TinyTxn& txn = tiny.txns[i];
    t.Untimed(fmt::format("T{}", i), fmt::format("s{}", txn.session),
              txn.committed ? history::TxnStatus::kCommitted : history::TxnStatus::kAborted)
        .RealTime(txn.invoke, txn.complete);
    for (const TinyOp& op : txn.ops) {
      if (op.write && tiny.lists) {
        t.A(op.key, op.value);
      } else if (op.write) {
        t.W(op.key, op.value);
      } else if (tiny.lists) {
        t.L(op.key, op.list);
      } else {
        t.R(op.key, op.value);
      }
    }
  }
  return t.Build();
}

struct Tally {
  int valid = 0;
  int invalid = 0;
  int disagreements = 0;
};

void Agree(uint64_t first_seed, int count, bool lists) {
  constexpr int kCases = 5;
  const IsolationLevel levels[kCases] = {
      IsolationLevel::kSerializable, IsolationLevel::kSnapshotIsolation,
      IsolationLevel::kSnapshotIsolation, IsolationLevel::kSnapshotIsolation,
      IsolationLevel::kSnapshotIsolation};
  const SiVariant variants[kCases] = {SiVariant::kAdya, SiVariant::kAdya, SiVariant::kGeneralized,
                                      SiVariant::kStrongSession, SiVariant::kStrong};
  const char* names[kCases] = {"ser", "si", "generalized si", "strong session si", "strong si"};
  Tally tally[kCases];
  for (uint64_t seed = first_seed; seed < first_seed + static_cast<uint64_t>(count); ++seed) {
    const Tiny tiny = RandomHistory(seed, lists);
    const history::History h = Build(tiny);
    Oracle oracle(tiny);
    // Real time events are two ticks apart, give or take two: a drift of up to 3 ticks removes
    // some of its orders and keeps others.
    const int64_t drift = static_cast<int64_t>(seed % 4);
    // Strong session SI is generalized SI with session order (the history has real time).
    const bool expected[kCases] = {
        oracle.Serializable(), oracle.Snapshot(false), oracle.Snapshot(false, true, false, drift),
        oracle.Snapshot(true, true, false, drift), oracle.Snapshot(true, true, true, drift)};
    for (int i = 0; i < kCases; ++i) {
      (expected[i] ? tally[i].valid : tally[i].invalid) += 1;
      // Without pruning on every other seed, and with every key hot (its constraints added as
      // candidate orders need them): neither may change a verdict.
      for (int run = 0; run < 3; ++run) {
        const bool prune = run != 1;
        if (!prune && seed % 2 == 0) continue;
        const PolygraphResult r = CheckPolygraph(h, {.levels = {levels[i]},
                                                     .si_variant = variants[i],
                                                     .clock_drift = drift,
                                                     .prune = prune,
                                                     .lazy_chains = run == 2 ? 0 : SIZE_MAX});
        ASSERT_TRUE(r.complete) << "seed " << seed << ": " << r.undecided;
        const bool found_valid = !testing::Violates(r, levels[i]);
        if (found_valid != expected[i] && ++tally[i].disagreements <= 10) {
          ADD_FAILURE() << "seed " << seed << " at " << names[i]
                        << (run == 0   ? ""
                            : run == 1 ? " unpruned"
                                       : " with hot keys")
                        << ": oracle " << (expected[i] ? "valid" : "invalid") << ", polygraph "
                        << (found_valid ? "valid" : "invalid") << " (clock drift " << drift
                        << ") in " << Format(tiny) << "\n"
                        << testing::Show(r);
        }
      }
    }
  }
  // Both verdicts must be common at every level, or agreeing would prove little.
  for (int i = 0; i < kCases; ++i) {
    EXPECT_GE(tally[i].valid, count / 10) << names[i];
    EXPECT_GE(tally[i].invalid, count / 10) << names[i];
  }
}

TEST(PolygraphOracleTest, AgreesOnRandomTinyRegisterHistories) { Agree(1, 2000, false); }

TEST(PolygraphOracleTest, AgreesOnRandomTinyListHistories) { Agree(1, 2000, true); }

}  // namespace
}  // namespace isowatch::checkers::polygraph
