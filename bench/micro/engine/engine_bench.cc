// SPDX-License-Identifier: Apache-2.0
// The online engine in-process, one thread: a simulator history delivered out of order in
// batches with watermarks (sim::RunOnline), as a collector would deliver it.
//
// Workload: sim::WorkloadOptions defaults (24 sessions, 8 operations, half reads, zipfian 0.99)
// with 10,000 keys, counting committed transactions: `txns` is the number committed; aborted ones
// (about as many again under this contention) are in the history and delivered too.
//
// Delivery (sim::BuildDeliverySchedule): transactions are collected in commit order at
// `rate_tps` of simulated time, each delayed by N(100 ms, sigma), then delivered in batches of
// 500 with a watermark each. The disorder in transactions is sigma x rate: at 10,000 tps (a busy
// database of the seed's experiments, and the CLI's default) sigma = 100 ms moves a transaction
// by about 1,000 places (up to ~3,000); at 100,000 tps by ~10,000 (up to ~30,000), a stress case
// in which a large share of a 100K stream is in flight at once. sigma = 0 is the in-order
// baseline. Generating the history and building the schedule are not timed; engine
// construction, delivery, Tick, Finish and taking the violations are.
//
// Items are delivered transactions (committed and aborted). Counters: the largest retained
// versions, retained transactions and provisional reads seen after any batch, flip-flops and
// horizon misses of the run, the schedule's largest disorder in ms.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "isowatch/engine/version_spill.h"
#include "isowatch/sim/delivery.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

using verdict::IsolationLevel;

// Resident set size of this process, from /proc/self/statm.
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0;
  uint64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

struct Fixture {
  sim::SimResult sim;
  sim::DeliverySchedule schedule;
};

// Histories and schedules are built once per configuration and kept.
// `cdc`: the history holds only the committed transactions, as a CDC stream carries them.
const Fixture& GetFixture(uint64_t txns, IsolationLevel level, double sigma_ms, double rate_tps,
                          bool cdc) {
  static auto* cache = new std::map<std::tuple<uint64_t, IsolationLevel, double, double, bool>,
                                    std::unique_ptr<Fixture>>();
  auto& slot = (*cache)[{txns, level, sigma_ms, rate_tps, cdc}];
  if (slot == nullptr) {
    sim::WorkloadOptions o;
    o.txns = txns;
    o.count_committed = true;
    o.keys = 10000;
    o.level = level;
    o.seed = 42;
    o.record_aborted = !cdc;
    auto r = sim::Simulate(o);
    if (!r.ok()) std::abort();
    slot = std::make_unique<Fixture>();
    slot->sim = *std::move(r);
    slot->schedule = sim::BuildDeliverySchedule(slot->sim.history, {.mean_ms = 100,
                                                                    .sigma_ms = sigma_ms,
                                                                    .batch = 500,
                                                                    .seed = 7,
                                                                    .rate_tps = rate_tps,
                                                                    .watermarks = true});
  }
  return *slot;
}

// How RunEngine runs the engine.
struct RunConfig {
  // Collected versions go to a RocksDB spill in a temporary directory (opened, and so cleared,
  // before each iteration, untimed).
  bool spill = false;
  uint64_t budget = 0;           // EngineOptions::memory_budget in bytes
  bool spill_collected = false;  // EngineOptions::spill_collected
  bool cdc = false;              // only committed transactions are delivered (GetFixture)
  int64_t spill_retention = 0;   // EngineOptions::spill_retention (0: never pruned)
};

void RunEngine(benchmark::State& state, IsolationLevel level, const RunConfig& run = {}) {
  const auto txns = static_cast<uint64_t>(state.range(0));
  const auto sigma_ms = static_cast<double>(state.range(1));
  const auto rate_tps = static_cast<double>(state.range(2));
  const Fixture& f = GetFixture(txns, level, sigma_ms, rate_tps, run.cdc);
  const std::string spill_dir =
      fmt::format("{}/isowatch-engine-bench-spill-{}",
                  std::filesystem::temp_directory_path().string(), getpid());
  sim::OnlineResult last;
  uint64_t spill_bytes = 0;
  std::vector<double> pauses;   // each write to the spill, seconds (last iteration)
  std::vector<double> reloads;  // each check that read the spill, seconds (last iteration)
  for (auto _ : state) {
    std::unique_ptr<engine::RocksVersionSpill> rocks;
    if (run.spill) {
      state.PauseTiming();
      auto opened = engine::RocksVersionSpill::Open(spill_dir);
      if (!opened.ok()) std::abort();
      rocks = *std::move(opened);
      state.ResumeTiming();
    }
    pauses.clear();
    reloads.clear();
    last =
        sim::RunOnline(f.sim.history, f.schedule,
                       {.engine = {.level = level,
                                   .spill = rocks.get(),
                                   .spill_collected = run.spill_collected,
                                   .memory_budget = run.budget,
                                   .spill_retention = run.spill_retention,
                                   .on_spill_pause = [&pauses](double s) { pauses.push_back(s); },
                                   .on_reload = [&reloads](double s) { reloads.push_back(s); }}});
    benchmark::DoNotOptimize(last.violations.data());
    if (rocks != nullptr) {
      // What the spill holds once its pruning has run (untimed).
      state.PauseTiming();
      if (!rocks->Compact().ok()) std::abort();
      spill_bytes = rocks->bytes();
      state.ResumeTiming();
    }
  }
  if (run.spill) std::filesystem::remove_all(spill_dir);
  state.counters["spilled"] = static_cast<double>(last.stats.spilled_versions);
  state.counters["reloads"] = static_cast<double>(last.stats.reloads);
  // Reads of the spill per second of the run (the last iteration's count over the mean time).
  state.counters["reloads_per_second"] = benchmark::Counter(
      static_cast<double>(state.iterations() * last.stats.reloads), benchmark::Counter::kIsRate);
  state.counters["pruned"] = static_cast<double>(last.stats.spill_pruned);
  state.counters["spill_mib"] = static_cast<double>(spill_bytes) / (1 << 20);
  if (!pauses.empty()) {
    // The pauses the spill's writes added to deliveries: count, p99 and largest, in ms.
    std::sort(pauses.begin(), pauses.end());
    state.counters["spill_writes"] = static_cast<double>(pauses.size());
    state.counters["pause_p99_ms"] = 1000 * pauses[(pauses.size() - 1) * 99 / 100];
    state.counters["pause_max_ms"] = 1000 * pauses.back();
  }
  if (!reloads.empty()) {
    // How long the checks that read the spill took: p99 and largest, in ms.
    std::sort(reloads.begin(), reloads.end());
    state.counters["reload_p99_ms"] = 1000 * reloads[(reloads.size() - 1) * 99 / 100];
    state.counters["reload_max_ms"] = 1000 * reloads.back();
  }
  state.counters["max_engine_mib"] = static_cast<double>(last.max_memory_bytes) / (1 << 20);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * f.sim.history.size()));
  state.counters["committed"] = static_cast<double>(f.sim.committed);
  // Committed transactions per second: a CDC source delivers only these.
  state.counters["committed_per_second"] = benchmark::Counter(
      static_cast<double>(state.iterations() * f.sim.committed), benchmark::Counter::kIsRate);
  state.counters["violations"] = static_cast<double>(last.violations.size());
  state.counters["max_versions"] = static_cast<double>(last.max_retained_versions);
  state.counters["max_txns"] = static_cast<double>(last.max_retained_txns);
  state.counters["max_prov_reads"] = static_cast<double>(last.max_provisional_reads);
  state.counters["flip_flops"] = static_cast<double>(last.stats.flip_flops);
  state.counters["horizon_misses"] = static_cast<double>(last.stats.horizon_misses);
  state.counters["max_disorder_ms"] = f.schedule.max_disorder_ms;
  // Process memory after the run: the input history (held for the whole run, as the fixture)
  // plus the engine. The history's own share is reported apart.
  state.counters["rss_mib"] = static_cast<double>(ResidentBytes()) / (1 << 20);
  state.counters["history_mib"] = static_cast<double>(f.sim.history.MemoryUsage()) / (1 << 20);
}

void BM_EngineSi(benchmark::State& state) { RunEngine(state, IsolationLevel::kSnapshotIsolation); }
BENCHMARK(BM_EngineSi)
    ->ArgNames({"txns", "sigma_ms", "rate_tps"})
    ->Args({100000, 0, 10000})
    ->Args({100000, 100, 10000})
    ->Args({1000000, 100, 10000})
    ->Args({100000, 100, 100000})
    ->Unit(benchmark::kMillisecond);

// As a CDC source feeds the daemon: the history and the delivery hold only the committed
// transactions (the simulator does not record aborted ones), so every delivered transaction is
// a committed one and `rate_tps` counts committed transactions: at 10,000 tps, sigma = 100 ms
// moves a transaction by about 1,000 committed places, twice the committed disorder of
// BM_EngineSi at the same rate.
void BM_EngineSiCdc(benchmark::State& state) {
  RunEngine(state, IsolationLevel::kSnapshotIsolation, {.cdc = true});
}
BENCHMARK(BM_EngineSiCdc)
    ->ArgNames({"txns", "sigma_ms", "rate_tps"})
    ->Args({100000, 0, 10000})
    ->Args({100000, 100, 10000})
    ->Args({1000000, 100, 10000})
    ->Unit(benchmark::kMillisecond);

void BM_EngineSerCdc(benchmark::State& state) {
  RunEngine(state, IsolationLevel::kSerializable, {.cdc = true});
}
BENCHMARK(BM_EngineSerCdc)
    ->ArgNames({"txns", "sigma_ms", "rate_tps"})
    ->Args({1000000, 100, 10000})
    ->Unit(benchmark::kMillisecond);

// Long streams: retained state and memory at 1M, 5M and 10M committed transactions (one
// iteration each; generating the 10M history takes minutes and some 8 GB).
void BM_EngineSiLong(benchmark::State& state) {
  RunEngine(state, IsolationLevel::kSnapshotIsolation);
}
BENCHMARK(BM_EngineSiLong)
    ->ArgNames({"txns", "sigma_ms", "rate_tps"})
    ->Args({1000000, 100, 10000})
    ->Args({5000000, 100, 10000})
    ->Args({10000000, 100, 10000})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// The version spill: state.range(3) is the memory budget in KiB (0 = none), state.range(4)
// whether everything collected is spilled (EngineOptions::spill_collected), state.range(5) the
// spill's retention in timestamp units (EngineOptions::spill_retention; the simulator's
// timestamps count commits of writers, so 100,000 keeps the versions of about the last 100,000
// writers, some 30 times the largest disorder). 1 KiB keeps the engine over budget at every
// collection: everything at or below the final point leaves memory, and transactions reload
// what they read from RocksDB. 256 MiB is never reached here: the cost of having a spill at all.
// `spill_mib` is what the spill holds at the end, after a compaction that applies the pruning.
void BM_EngineSiSpill(benchmark::State& state) {
  RunEngine(state, IsolationLevel::kSnapshotIsolation,
            {.spill = true,
             .budget = static_cast<uint64_t>(state.range(3)) << 10,
             .spill_collected = state.range(4) != 0,
             .spill_retention = state.range(5)});
}
BENCHMARK(BM_EngineSiSpill)
    ->ArgNames({"txns", "sigma_ms", "rate_tps", "budget_kib", "collected", "spill_retention"})
    ->Args({1000000, 100, 10000, 262144, 0, 0})
    ->Args({1000000, 100, 10000, 1, 0, 0})
    ->Args({1000000, 100, 10000, 0, 1, 0})
    ->Args({1000000, 100, 10000, 0, 1, 100000})
    // Heavy disorder: σ = 1 s moves a transaction by some 10,000 places.
    ->Args({1000000, 1000, 10000, 262144, 0, 0})
    ->Args({1000000, 1000, 10000, 1, 0, 0})
    ->Unit(benchmark::kMillisecond);

void BM_EngineSer(benchmark::State& state) { RunEngine(state, IsolationLevel::kSerializable); }
BENCHMARK(BM_EngineSer)
    ->ArgNames({"txns", "sigma_ms", "rate_tps"})
    ->Args({100000, 0, 10000})
    ->Args({100000, 100, 10000})
    ->Args({1000000, 100, 10000})
    ->Args({100000, 100, 100000})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace isowatch
