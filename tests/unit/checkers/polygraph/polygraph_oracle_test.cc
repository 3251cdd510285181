// SPDX-License-Identifier: Apache-2.0
// The polygraph checker against brute-force oracles on thousands of random tiny histories. The
// oracles know nothing of polygraphs: for serializability they try every serial order of the
// committed transactions; for snapshot isolation every interleaving of their begins and commits,
// where a transaction reads the state at its begin (and its own writes), installs its writes at
// its commit, and no two writers of one key overlap; strong session SI also wants each
// transaction to begin after its session predecessor committed. The checker's verdict at each
// level must be the oracle's, with pruning and without. Seeds are fixed, and a disagreement
// prints the seed and the history.
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

struct TinyOp {
  bool write = false;
  int64_t key = 0;
  int64_t value = 0;
};

struct TinyTxn {
  int session = 0;
  bool committed = true;
  std::vector<TinyOp> ops;
};

using Tiny = std::vector<TinyTxn>;
using State = std::map<int64_t, int64_t>;  // key -> value; absent keys hold 0

std::string Format(const Tiny& txns) {
  std::string out;
  for (size_t i = 0; i < txns.size(); ++i) {
    out += fmt::format("T{}{}@s{}:", i, txns[i].committed ? "" : "!", txns[i].session);
    for (const TinyOp& op : txns[i].ops) {
      out += fmt::format(" {}({},{})", op.write ? 'w' : 'r', op.key, op.value);
    }
    out += "; ";
  }
  return out;
}

int64_t Get(const State& s, int64_t key) {
  auto it = s.find(key);
  return it == s.end() ? 0 : it->second;
}

// Whether transaction `t`'s reads are what a snapshot `snap` and its own writes give.
bool ReadsMatch(const TinyTxn& t, const State& snap) {
  State own;
  for (const TinyOp& op : t.ops) {
    if (op.write) {
      own[op.key] = op.value;
    } else if (op.value != (own.contains(op.key) ? own[op.key] : Get(snap, op.key))) {
      return false;
    }
  }
  return true;
}

void Install(const TinyTxn& t, State& s) {
  for (const TinyOp& op : t.ops) {
    if (op.write) s[op.key] = op.value;
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
  explicit Oracle(const Tiny& all) {
    for (const TinyTxn& t : all) {
      if (t.committed) txns_.push_back(t);
    }
  }

  bool Serializable() {
    std::vector<bool> done(txns_.size(), false);
    return Serial(State{}, done, 0);
  }

  // Snapshot isolation; `sessions`: strong session SI.
  bool Snapshot(bool sessions) {
    sessions_ = sessions;
    begun_.assign(txns_.size(), -1);
    committed_at_.assign(txns_.size(), -1);
    return Interleave(State{}, 0);
  }

 private:
  bool Serial(const State& s, std::vector<bool>& done, size_t count) {
    if (count == txns_.size()) return true;
    for (size_t i = 0; i < txns_.size(); ++i) {
      if (done[i] || !ReadsMatch(txns_[i], s)) continue;
      State next = s;
      Install(txns_[i], next);
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
        if (!ReadsMatch(txns_[i], s) || !SessionReady(i)) continue;
        begun_[i] = step;
        const bool ok = Interleave(s, step + 1);
        begun_[i] = -1;
        if (ok) return true;
        continue;
      }
      // Commit i: no writer of a common key may have committed since i began.
      bool conflict = false;
      for (size_t j = 0; j < txns_.size(); ++j) {
        if (j != i && committed_at_[j] > begun_[i] && SharesWrittenKey(txns_[i], txns_[j])) {
          conflict = true;
        }
      }
      if (conflict) continue;
      State next = s;
      Install(txns_[i], next);
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

  std::vector<TinyTxn> txns_;
  bool sessions_ = false;
  std::vector<int> begun_;
  std::vector<int> committed_at_;
};

// A random history of 2 to 5 transactions (one of them maybe aborted) in up to 3 sessions over
// up to 3 keys, every written value unique per key. Reads return what a random interleaving of
// begins and commits gives at the reader's begin (so many histories are SI, some SER), or now
// and then any value written to the key, the initial 0, or a value nobody wrote.
Tiny RandomHistory(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const int n = pick(2, 5);
  const int sessions = pick(1, 3);
  const int keys = pick(1, 3);
  Tiny txns(n);
  std::map<int64_t, int64_t> next_value;
  std::map<int64_t, std::vector<int64_t>> written;
  for (TinyTxn& t : txns) {
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
  for (int i : order) {
    TinyTxn& t = txns[i];
    if (begun[i]) {
      if (t.committed) Install(t, state);
      continue;
    }
    begun[i] = true;
    State own;
    for (TinyOp& op : t.ops) {
      if (op.write) {
        own[op.key] = op.value;
        continue;
      }
      op.value = own.contains(op.key) ? own[op.key] : Get(state, op.key);
      if (!chance(0.12)) continue;
      const std::vector<int64_t>& ws = written[op.key];
      const int r = pick(0, 9);
      if (r < 7 && !ws.empty()) {
        op.value = ws[pick(0, static_cast<int>(ws.size()) - 1)];
      } else if (r < 9) {
        op.value = 0;
      } else {
        op.value = 99;
      }
    }
  }
  return txns;
}

history::History Build(const Tiny& txns) {
  TestHistory t;
  t.DefaultInitial(0);
  for (size_t i = 0; i < txns.size(); ++i) {
    t.Untimed(fmt::format("T{}", i), fmt::format("s{}", txns[i].session),
              txns[i].committed ? history::TxnStatus::kCommitted : history::TxnStatus::kAborted);
    for (const TinyOp& op : txns[i].ops) {
      if (op.write) {
        t.W(op.key, op.value);
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

void Agree(uint64_t first_seed, int count) {
  // ser, si (Adya), si (strong session).
  Tally tally[3];
  for (uint64_t seed = first_seed; seed < first_seed + static_cast<uint64_t>(count); ++seed) {
    const Tiny tiny = RandomHistory(seed);
    const history::History h = Build(tiny);
    Oracle oracle(tiny);
    const bool expected[3] = {oracle.Serializable(), oracle.Snapshot(false), oracle.Snapshot(true)};
    const IsolationLevel levels[3] = {IsolationLevel::kSerializable,
                                      IsolationLevel::kSnapshotIsolation,
                                      IsolationLevel::kSnapshotIsolation};
    const SiVariant variants[3] = {SiVariant::kAdya, SiVariant::kAdya, SiVariant::kStrongSession};
    const char* names[3] = {"ser", "si", "strong session si"};
    for (int i = 0; i < 3; ++i) {
      (expected[i] ? tally[i].valid : tally[i].invalid) += 1;
      for (bool prune : {true, false}) {
        const PolygraphResult r =
            CheckPolygraph(h, {.levels = {levels[i]}, .si_variant = variants[i], .prune = prune});
        ASSERT_TRUE(r.complete) << "seed " << seed << ": " << r.undecided;
        const bool found_valid = !testing::Violates(r, levels[i]);
        if (found_valid != expected[i] && ++tally[i].disagreements <= 10) {
          ADD_FAILURE() << "seed " << seed << " at " << names[i] << (prune ? "" : " unpruned")
                        << ": oracle " << (expected[i] ? "valid" : "invalid") << ", polygraph "
                        << (found_valid ? "valid" : "invalid") << " in " << Format(tiny) << "\n"
                        << testing::Show(r);
        }
      }
    }
  }
  // Both verdicts must be common at every level, or agreeing would prove little.
  for (int i = 0; i < 3; ++i) {
    EXPECT_GE(tally[i].valid, count / 10) << i;
    EXPECT_GE(tally[i].invalid, count / 10) << i;
  }
}

TEST(PolygraphOracleTest, AgreesOnRandomTinyHistories) { Agree(1, 2000); }

}  // namespace
}  // namespace isowatch::checkers::polygraph
