// SPDX-License-Identifier: Apache-2.0
// plume against a brute-force oracle on thousands of random small histories: the oracle tries
// every commit order against the axioms of read committed, read atomic and causal consistency
// (plume_testing.h); plume's verdict at each level must be the oracle's. Seeds are fixed, and a
// disagreement prints the seed and the history.
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/checkers/plume/plume.h"
#include "isowatch/verdict/violation.h"

#include "tests/unit/checkers/plume/plume_testing.h"

namespace isowatch::checkers::plume {
namespace {

using testing::TextOp;
using verdict::IsolationLevel;

// A random history of 2 to 6 committed transactions in up to 3 sessions over up to 3 keys, each
// written value unique per key. Transactions run one at a time in text order; a read returns
// what that serial run gives (so many histories are valid), or else any value written to the
// key (by anyone, earlier or later, the reader itself included), the initial value, an aborted
// write, or a value nobody wrote.
std::vector<TextOp> RandomHistory(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const int txns = pick(2, 6);
  const int sessions = pick(1, 3);
  const int keys = pick(1, 3);
  std::map<int64_t, int64_t> next_value;  // per key
  std::vector<TextOp> ops;
  std::map<int64_t, std::vector<int64_t>> aborted;  // per key
  if (chance(0.3)) {
    const int s = pick(1, sessions);
    for (int i = pick(1, 2); i > 0; --i) {
      const int64_t k = pick(1, keys);
      const int64_t v = ++next_value[k];
      ops.push_back({.write = true, .key = k, .value = v, .session = s, .txn = -1});
      aborted[k].push_back(v);
    }
  }
  // Plan every transaction's operations; values of writes are fixed first, so that a read may
  // return a write that comes later.
  struct Planned {
    bool write;
    int64_t key;
    int64_t value;
  };
  std::vector<std::vector<Planned>> plan(txns);
  std::map<int64_t, std::vector<int64_t>> written;  // per key, committed values
  for (int t = 0; t < txns; ++t) {
    for (int i = pick(1, 4); i > 0; --i) {
      const int64_t k = pick(1, keys);
      if (chance(0.5)) {
        const int64_t v = ++next_value[k];
        plan[t].push_back({true, k, v});
        written[k].push_back(v);
      } else {
        plan[t].push_back({false, k, 0});
      }
    }
  }
  std::map<int64_t, int64_t> state;  // the serial run's committed values
  for (int t = 0; t < txns; ++t) {
    const int s = pick(1, sessions);
    std::map<int64_t, int64_t> own;
    for (Planned& p : plan[t]) {
      if (p.write) {
        own[p.key] = p.value;
      } else {
        const double r = std::uniform_real_distribution<double>(0, 1)(rng);
        const std::vector<int64_t>& ws = written[p.key];
        if (r < 0.6 || ws.empty()) {
          p.value = own.contains(p.key) ? own[p.key] : state[p.key];
        } else if (r < 0.88) {
          p.value = chance(0.15) ? 0 : ws[pick(0, static_cast<int>(ws.size()) - 1)];
        } else if (r < 0.95 && !aborted[p.key].empty()) {
          p.value = aborted[p.key].front();
        } else {
          p.value = 99;
        }
      }
      ops.push_back({.write = p.write, .key = p.key, .value = p.value, .session = s, .txn = t + 1});
    }
    for (const auto& [k, v] : own) state[k] = v;
  }
  return ops;
}

void Agree(uint64_t first_seed, int count, bool lists) {
  const IsolationLevel levels[] = {IsolationLevel::kReadCommitted, IsolationLevel::kReadAtomic,
                                   IsolationLevel::kCausal};
  int valid[3] = {0, 0, 0};
  int disagreements = 0;
  for (uint64_t seed = first_seed; seed < first_seed + static_cast<uint64_t>(count); ++seed) {
    const std::vector<TextOp> ops = RandomHistory(seed);
    const history::History h = lists ? testing::BuildList(ops) : testing::BuildKv(ops);
    const PlumeResult r = CheckPlume(h);
    ASSERT_TRUE(r.complete) << "seed " << seed << ": " << r.undecided;
    const testing::OracleVerdict o = testing::Oracle(ops, lists);
    const bool oracle[] = {o.rc, o.ra, o.tcc};
    for (int i = 0; i < 3; ++i) {
      const std::string found = testing::Labels(r, levels[i]);
      valid[i] += oracle[i] ? 1 : 0;
      if (oracle[i] != found.empty() && ++disagreements <= 10) {
        ADD_FAILURE() << "seed " << seed << (lists ? " (lists)" : "") << " at "
                      << verdict::IsolationLevelName(levels[i]) << ": oracle "
                      << (oracle[i] ? "valid" : "invalid") << ", plume found '" << found << "' in "
                      << testing::FormatOps(ops);
      }
    }
  }
  // Both verdicts must be common, or agreeing would prove little.
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(valid[i], count / 10) << verdict::IsolationLevelName(levels[i]);
    EXPECT_LT(valid[i], count - count / 10) << verdict::IsolationLevelName(levels[i]);
  }
  // The levels are nested: tcc valid implies ra valid implies rc valid, in the oracle too.
  EXPECT_LE(valid[2], valid[1]);
  EXPECT_LE(valid[1], valid[0]);
}

TEST(PlumeOracleTest, RegistersAgreeWithTheAxiomsOnRandomHistories) { Agree(1, 2000, false); }

TEST(PlumeOracleTest, ListsAgreeWithTheAxiomsOnRandomHistories) { Agree(100001, 1000, true); }

}  // namespace
}  // namespace isowatch::checkers::plume
