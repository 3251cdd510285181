// SPDX-License-Identifier: Apache-2.0
// Simulated streams for the window cutter's tests: a simulated history and the order in which its
// transactions arrive, with jitter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <gtest/gtest.h>

#include "isowatch/history/history.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/sim/simulator.h"

namespace isowatch::windows {

inline history::Timestamp Ts(int64_t t) { return history::Timestamp{t, 0}; }

// A simulated history of 400 transactions and the order they arrive in: each at its placement
// key (commit, else start) plus up to kJitter, drawn from `rng`.
inline constexpr int64_t kJitter = 15;
struct Arrivals {
  sim::SimResult sim;
  std::vector<std::pair<int64_t, TxnId>> order;  // (arrival time, transaction)
};
inline Arrivals SimulatedArrivals(history::DataModel data, uint64_t seed, std::mt19937_64& rng) {
  sim::WorkloadOptions o;
  o.sessions = 6;
  o.txns = 400;
  o.ops_per_txn = 5;
  o.keys = 30;
  o.data = data;
  o.seed = seed;
  absl::StatusOr<sim::SimResult> r = sim::Simulate(o);
  EXPECT_TRUE(r.ok()) << r.status();
  Arrivals out{.sim = r.ok() ? *std::move(r) : sim::SimResult{}, .order = {}};
  const history::History& src = out.sim.history;
  for (uint32_t i = 0; i < src.size(); ++i) {
    const history::Transaction& t = src.txn(TxnId(i));
    EXPECT_TRUE(t.has_start);
    const int64_t key = t.has_commit ? t.commit.physical : t.start.physical;
    out.order.emplace_back(key + static_cast<int64_t>(rng() % (kJitter + 1)), TxnId(i));
  }
  std::stable_sort(out.order.begin(), out.order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace isowatch::windows
