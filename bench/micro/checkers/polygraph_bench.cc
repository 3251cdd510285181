// SPDX-License-Identifier: Apache-2.0
// The polygraph checker on in-memory histories without timestamps: checking only, no parsing.
// Two workloads: BlindW-RW as Viper's benchmark has it (half read-only, half write-only
// transactions of 8 operations on uniform keys), and simulator histories (mixed reads and
// writes, zipfian keys) with their timestamps removed. Both come from snapshot-isolated
// executions, so every run must find them valid; a run that does not says so in its counters.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <sys/resource.h>
#include <tuple>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/without_timestamps.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

using verdict::IsolationLevel;

// BlindW-RW: `txns` transactions in 24 sessions, each 8 reads or 8 writes (half and half) of
// uniform keys out of `keys`, executed under snapshot isolation: a transaction begins at one
// tick and commits a few ticks later, reads the state at its begin, and aborts (and is left out)
// if a writer of a common key committed in between.
history::History BlindW(uint64_t txns, uint64_t keys, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> key(0, keys - 1);
  struct Pending {
    uint64_t commit_at = 0;
    uint64_t begin_at = 0;
    uint32_t session = 0;
    bool reads = false;
    std::vector<std::pair<int64_t, int64_t>> ops;  // (key, value)
  };
  std::map<int64_t, std::pair<int64_t, uint64_t>> state;  // key -> (value, commit tick)
  std::vector<Pending> pending;
  history::HistoryBuilder b;
  b.SetDefaultInitialValue(history::Value::Int(0));
  int64_t next_value = 0;
  uint64_t committed = 0;
  uint64_t tick = 0;
  auto commit = [&](Pending& p) {
    for (const auto& [k, v] : p.ops) {
      auto it = state.find(k);
      if (!p.reads && it != state.end() && it->second.second > p.begin_at) return;  // conflict
    }
    const std::string id = fmt::format("t{}", committed);
    const std::string session = fmt::format("s{}", p.session);
    if (!b.BeginTxn({.id = id, .session = session}).ok()) std::abort();
    for (const auto& [k, v] : p.ops) {
      if (p.reads) {
        b.Read(b.IntKey(k), history::Value::Int(v));
      } else {
        b.Write(b.IntKey(k), history::Value::Int(v));
        state[k] = {v, tick};
      }
    }
    b.EndTxn();
    ++committed;
  };
  while (committed < txns) {
    ++tick;
    for (uint32_t s = 0; s < 24; ++s) {
      if (std::any_of(pending.begin(), pending.end(),
                      [&](const Pending& p) { return p.session == s; })) {
        continue;
      }
      Pending p{.commit_at = tick + 1 + rng() % 4, .begin_at = tick, .session = s};
      p.reads = rng() % 2 == 0;
      for (int i = 0; i < 8; ++i) {
        const int64_t k = static_cast<int64_t>(key(rng));
        if (p.reads) {
          auto it = state.find(k);
          p.ops.emplace_back(k, it == state.end() ? 0 : it->second.first);
        } else {
          if (std::any_of(p.ops.begin(), p.ops.end(),
                          [&](const auto& op) { return op.first == k; })) {
            continue;
          }
          p.ops.emplace_back(k, ++next_value);
        }
      }
      pending.push_back(std::move(p));
    }
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->commit_at > tick) {
        ++it;
        continue;
      }
      if (committed < txns) commit(*it);
      it = pending.erase(it);
    }
  }
  auto h = std::move(b).Finish();
  if (!h.ok()) std::abort();
  return *std::move(h);
}

// A snapshot-isolated simulator history, 24 sessions, `keys` zipfian keys, without timestamps.
history::History Simulated(uint64_t txns, uint64_t keys) {
  sim::WorkloadOptions o;
  o.txns = txns;
  o.keys = keys;
  o.seed = 42;
  o.sessions = 24;
  auto r = sim::Simulate(o);
  if (!r.ok()) std::abort();
  auto h = history::WithoutTimestamps(r->history);
  if (!h.ok()) std::abort();
  return *std::move(h);
}

const history::History& Cached(bool blindw, uint64_t txns, uint64_t keys) {
  static auto* cache =
      new std::map<std::tuple<bool, uint64_t, uint64_t>, std::unique_ptr<history::History>>();
  auto& slot = (*cache)[{blindw, txns, keys}];
  if (slot == nullptr) {
    slot =
        std::make_unique<history::History>(blindw ? BlindW(txns, keys, 42) : Simulated(txns, keys));
  }
  return *slot;
}

double PeakRssMb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

constexpr int64_t kDefaultHot = -2;  // the default lazy_chains
constexpr int64_t kNoHot = -1;       // no key is hot

size_t LazyChains(const benchmark::State& state) {
  if (state.range(4) == kDefaultHot) return checkers::polygraph::PolygraphOptions().lazy_chains;
  return state.range(4) == kNoHot ? SIZE_MAX : static_cast<size_t>(state.range(4));
}

// Arguments: transactions, keys, level (0 si, 1 ser), the solver (0 CaDiCaL, the default;
// 1 CryptoMiniSat), and the chains past which a key is hot (PolygraphOptions::lazy_chains;
// kNoHot: no key is; kDefaultHot: the default).
void Run(benchmark::State& state, bool blindw) {
  const history::History& h =
      Cached(blindw, static_cast<uint64_t>(state.range(0)), static_cast<uint64_t>(state.range(1)));
  const IsolationLevel level =
      state.range(2) == 0 ? IsolationLevel::kSnapshotIsolation : IsolationLevel::kSerializable;
  checkers::polygraph::PolygraphResult result;
  for (auto _ : state) {
    // A run that does not finish in two minutes reports complete = 0.
    const checkers::CheckLimits limits(checkers::CheckLimits::Clock::now() +
                                       std::chrono::seconds(120));
    result = checkers::polygraph::CheckPolygraph(
        h, {.levels = {level},
            .solver = state.range(3) == 0 ? checkers::polygraph::SatBackend::kCadical
                                          : checkers::polygraph::SatBackend::kCryptoMiniSat,
            .limits = &limits,
            .lazy_chains = LazyChains(state)});
    benchmark::DoNotOptimize(result.violations.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * h.size()));
  state.counters["complete"] = result.complete ? 1 : 0;
  state.counters["violations"] = static_cast<double>(result.violations.size());
  for (const auto& [name, value] : result.stats) {
    if (name.ends_with("constraints") || name.ends_with("constraints_solved") ||
        name.ends_with("solver_calls") || name.ends_with("cycle_clauses") ||
        name.ends_with("hot_key_rounds") || name.ends_with("hot_key_pairs") ||
        name == "constraints_raw" || name == "hot_keys") {
      state.counters[name] = static_cast<double>(value);
    }
  }
  state.counters["peak_rss_mb"] = PeakRssMb();
}

void BM_PolygraphBlindW(benchmark::State& state) { Run(state, true); }
void BM_PolygraphSimulated(benchmark::State& state) { Run(state, false); }

// Size (transactions at a fixed 2K keys, as Viper's BlindW-RW) and contention (keys at 10K
// transactions).
BENCHMARK(BM_PolygraphBlindW)
    ->Args({1000, 2000, 0, 0, kDefaultHot})
    ->Args({2500, 2000, 0, 0, kDefaultHot})
    ->Args({5000, 2000, 0, 0, kDefaultHot})
    ->Args({10000, 2000, 0, 0, kDefaultHot})
    ->Args({10000, 2000, 1, 0, kDefaultHot})
    ->Args({10000, 500, 0, 0, kDefaultHot})
    ->Args({10000, 10000, 0, 0, kDefaultHot})
    // The same with CryptoMiniSat behind the search.
    ->Args({1000, 2000, 0, 1, kDefaultHot})
    ->Args({10000, 2000, 0, 1, kDefaultHot})
    ->Args({10000, 2000, 1, 1, kDefaultHot})
    ->Args({10000, 500, 0, 1, kDefaultHot})
    // Hot keys A/B: no key hot, and keys hot past 64 chains.
    ->Args({10000, 2000, 0, 0, kNoHot})
    ->Args({10000, 2000, 1, 0, kNoHot})
    ->Args({10000, 500, 0, 0, kNoHot})
    ->Args({10000, 500, 0, 0, 64})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BM_PolygraphSimulated)
    ->Args({10000, 1000, 0, 0, kDefaultHot})
    ->Args({10000, 1000, 1, 0, kDefaultHot})
    ->Args({10000, 1000, 0, 1, kDefaultHot})
    ->Args({100000, 10000, 0, 0, kDefaultHot})
    ->Args({100000, 10000, 1, 0, kDefaultHot})
    // Hot keys A/B: every key's constraints up front, and keys hot past 64 chains.
    ->Args({10000, 1000, 0, 0, kNoHot})
    ->Args({10000, 1000, 1, 0, kNoHot})
    ->Args({10000, 1000, 0, 0, 64})
    ->Args({100000, 10000, 0, 0, 64})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace isowatch
