// SPDX-License-Identifier: Apache-2.0
// Chronos on in-memory simulator histories: checking only, no parsing.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include <benchmark/benchmark.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

// The shape of the benchmark of record: 24 sessions, 8 operations, half reads, 10K zipfian keys.
sim::WorkloadOptions Workload(uint64_t txns, history::DataModel data, uint64_t seed) {
  sim::WorkloadOptions o;
  o.sessions = 24;
  o.txns = txns;
  o.ops_per_txn = 8;
  o.read_ratio = 0.5;
  o.keys = 10000;
  o.dist = workload::Distribution::kZipfian;
  o.data = data;
  o.seed = seed;
  return o;
}

sim::SimResult MakeHistory(uint64_t txns, history::DataModel data) {
  auto r = sim::Simulate(Workload(txns, data, 42));
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

// The list-append history of the 1M-transaction read-and-check bench (bench/README.md, "Offline
// Chronos on a list-append history"), checked alone, on 1 and 2 threads. It goes through a
// TimeKiller file, so that it is held as `isowatch check` holds it: a history read from a file
// stores its list reads more compactly than the simulator's.
void BM_ChronosSiListAppend1M(benchmark::State& state) {
  static const history::History* h = [] {
    sim::WorkloadOptions o = Workload(1000000, history::DataModel::kList, 1);
    o.count_committed = true;
    o.max_appends_per_key = 32;
    auto sim = sim::Simulate(o);
    if (!sim.ok()) std::abort();
    std::string dir = (std::filesystem::temp_directory_path() / "isowatch-bench-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) std::abort();
    const std::string path = dir + "/l1m.json";
    if (!formats::WriteHistoryFile(sim->history, path, formats::FileFormat::kTimeKiller).ok()) {
      std::abort();
    }
    auto read = formats::ReadHistoryFile(path, formats::FileFormat::kTimeKiller, {});
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!read.ok()) std::abort();
    return new history::History(*std::move(read));
  }();
  for (auto _ : state) {
    auto result = checkers::RunChronos(*h, {.level = verdict::IsolationLevel::kSnapshotIsolation,
                                            .threads = static_cast<uint32_t>(state.range(0))});
    benchmark::DoNotOptimize(result.violations.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * h->size()));
}
BENCHMARK(BM_ChronosSiListAppend1M)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace isowatch
