// SPDX-License-Identifier: Apache-2.0
// Reading TimeKiller JSON from memory: parse + intern + build, no checking.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>

#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

std::string SimulatedHistoryJson(uint64_t txns) {
  sim::WorkloadOptions o;
  o.txns = txns;
  o.keys = 10000;
  o.seed = 7;
  auto r = sim::Simulate(o);
  if (!r.ok()) std::abort();
  std::ostringstream out;
  if (!formats::WriteTimeKiller(r->history, out).ok()) std::abort();
  return out.str();
}

// state.range(0) transactions; state.range(1): 1 = only the general transaction parser.
void BM_ReadTimeKiller(benchmark::State& state) {
  const std::string json = SimulatedHistoryJson(static_cast<uint64_t>(state.range(0)));
  const auto parsers = state.range(1) != 0 ? formats::internal::TxnParsers::kGeneralOnly
                                           : formats::internal::TxnParsers::kUsualFirst;
  size_t txns = 0;
  for (auto _ : state) {
    auto h = formats::internal::ReadTimeKillerStringChunked(
        json, {}, "bench", {}, formats::internal::ChunkedJsonArray::kDefaultChunkSize, parsers);
    if (!h.ok()) std::abort();
    txns = h->size();
    benchmark::DoNotOptimize(txns);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * txns));
}
BENCHMARK(BM_ReadTimeKiller)
    ->ArgNames({"txns", "general_only"})
    ->Args({100000, 0})
    ->Args({100000, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace isowatch
