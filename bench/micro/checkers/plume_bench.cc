// SPDX-License-Identifier: Apache-2.0
// plume on in-memory simulator histories: checking only, no parsing. Peak RSS of the process
// (which holds the history too) is reported beside the time.
#include <cstdlib>
#include <map>
#include <memory>
#include <sys/resource.h>
#include <utility>

#include <benchmark/benchmark.h>

#include "isowatch/checkers/plume/plume.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

using verdict::IsolationLevel;

// The published shapes: 100 sessions of up to 10K transactions (8 operations each, zipfian
// keys), and the paper's default workload, 25 sessions x 200 transactions x 20 operations on
// 10K uniform keys (5K transactions, 100K operations).
const history::History& History(uint64_t txns, bool paper_default) {
  static auto* cache = new std::map<std::pair<uint64_t, bool>, std::unique_ptr<sim::SimResult>>();
  auto& slot = (*cache)[{txns, paper_default}];
  if (slot == nullptr) {
    sim::WorkloadOptions o;
    o.txns = txns;
    o.seed = 42;
    o.keys = 10000;
    if (paper_default) {
      o.sessions = 25;
      o.ops_per_txn = 20;
      o.dist = workload::Distribution::kUniform;
    } else {
      o.sessions = 100;
      o.ops_per_txn = 8;
      o.dist = workload::Distribution::kZipfian;
    }
    auto r = sim::Simulate(o);
    if (!r.ok()) std::abort();
    slot = std::make_unique<sim::SimResult>(*std::move(r));
  }
  return slot->history;
}

double PeakRssMb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void Run(benchmark::State& state, const history::History& h, IsolationLevel level) {
  size_t violations = 0;
  for (auto _ : state) {
    auto result = checkers::plume::CheckPlume(h, {.levels = {level}});
    violations = result.violations.size();
    benchmark::DoNotOptimize(result.violations.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * h.size()));
  state.counters["violations"] = static_cast<double>(violations);
  state.counters["peak_rss_mb"] = PeakRssMb();
}

IsolationLevel LevelArg(int64_t i) {
  return i == 0 ? IsolationLevel::kReadCommitted
                : (i == 1 ? IsolationLevel::kReadAtomic : IsolationLevel::kCausal);
}

// Arguments: transactions, level (0 rc, 1 ra, 2 tcc).
void BM_Plume(benchmark::State& state) {
  Run(state, History(static_cast<uint64_t>(state.range(0)), false), LevelArg(state.range(1)));
}
BENCHMARK(BM_Plume)
    ->Args({100000, 0})
    ->Args({100000, 1})
    ->Args({100000, 2})
    ->Args({1000000, 0})
    ->Args({1000000, 1})
    ->Args({1000000, 2})
    ->Unit(benchmark::kMillisecond);

void BM_PlumePaperDefault(benchmark::State& state) {
  Run(state, History(5000, true), LevelArg(state.range(0)));
}
BENCHMARK(BM_PlumePaperDefault)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace isowatch
