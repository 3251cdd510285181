// SPDX-License-Identifier: Apache-2.0
// Reading TimeKiller JSON from memory: parse + intern + build, no checking.
#include <cstdlib>
#include <sstream>

#include <benchmark/benchmark.h>

#include "isowatch/formats/timekiller.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

void BM_ReadTimeKiller(benchmark::State& state) {
  sim::WorkloadOptions o;
  o.txns = static_cast<uint64_t>(state.range(0));
  o.keys = 10000;
  o.seed = 7;
  auto r = sim::Simulate(o);
  if (!r.ok()) std::abort();
  std::ostringstream out;
  if (!formats::WriteTimeKiller(r->history, out).ok()) std::abort();
  std::string json = out.str();
  for (auto _ : state) {
    auto h = formats::ReadTimeKillerString(json, {}, "bench");
    if (!h.ok()) std::abort();
    benchmark::DoNotOptimize(h->size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * r->history.size()));
}
BENCHMARK(BM_ReadTimeKiller)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace isowatch
