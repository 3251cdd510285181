// SPDX-License-Identifier: Apache-2.0
// Chronos on in-memory simulator histories: checking only, no parsing.
#include <cstdlib>

#include <benchmark/benchmark.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

sim::SimResult MakeHistory(uint64_t txns, history::DataModel data) {
  sim::WorkloadOptions o;
  o.sessions = 24;
  o.txns = txns;
  o.ops_per_txn = 8;
  o.read_ratio = 0.5;
  o.keys = 10000;
  o.dist = workload::Distribution::kZipfian;
  o.data = data;
  o.seed = 42;
  auto r = sim::Simulate(o);
  if (!r.ok()) std::abort();
  return *std::move(r);
}

void BM_ChronosSi(benchmark::State& state) {
  auto r = MakeHistory(static_cast<uint64_t>(state.range(0)), history::DataModel::kKeyValue);
  for (auto _ : state) {
    auto result =
        checkers::RunChronos(r.history, {.level = verdict::IsolationLevel::kSnapshotIsolation});
    benchmark::DoNotOptimize(result.violations.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * r.history.size()));
}
BENCHMARK(BM_ChronosSi)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_ChronosSer(benchmark::State& state) {
  auto r = MakeHistory(static_cast<uint64_t>(state.range(0)), history::DataModel::kKeyValue);
  for (auto _ : state) {
    auto result =
        checkers::RunChronos(r.history, {.level = verdict::IsolationLevel::kSerializable});
    benchmark::DoNotOptimize(result.violations.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * r.history.size()));
}
BENCHMARK(BM_ChronosSer)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_ChronosSiList(benchmark::State& state) {
  auto r = MakeHistory(static_cast<uint64_t>(state.range(0)), history::DataModel::kList);
  for (auto _ : state) {
    auto result =
        checkers::RunChronos(r.history, {.level = verdict::IsolationLevel::kSnapshotIsolation});
    benchmark::DoNotOptimize(result.violations.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * r.history.size()));
}
BENCHMARK(BM_ChronosSiList)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace isowatch
