// SPDX-License-Identifier: Apache-2.0
// The daemon's RocksDB store: how fast batches become durable, and what grouping concurrent
// appends into one synced write buys.
//
// BM_AppendBatch: each benchmark thread appends batches of `bytes` bytes to its own stream of one
// shared store, with and without sync. With sync every append waits for an fsync of RocksDB's
// write-ahead log; appends of concurrent threads are grouped by RocksDB's write thread into one
// write and one fsync, so appends/s should grow with the thread count while a single thread is
// bound by the disk's sync latency. Items are appended batches; bytes are their payload.
// BM_PutViolation: storing violations (id lookup plus one write), unsynced (the default) and
// synced. BM_QueryViolations: a page of 100 from 10,000 stored violations, unfiltered and
// filtered (1 in 10 matches).
//
// The store lives under $ISOWATCH_BENCH_DIR, else the system's temporary directory: run it on the
// file system the daemon would use (a tmpfs makes sync free).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

namespace isowatch::store {
namespace {

std::filesystem::path BenchDir() {
  const char* dir = std::getenv("ISOWATCH_BENCH_DIR");
  const std::filesystem::path root =
      dir != nullptr ? std::filesystem::path(dir) : std::filesystem::temp_directory_path();
  return root / fmt::format("isowatch_store_bench_{}", getpid());
}

std::unique_ptr<Store> OpenFresh(bool sync, bool sync_violations = false) {
  std::filesystem::remove_all(BenchDir());
  auto store =
      Store::Open(BenchDir().string(), {.sync_writes = sync, .sync_violations = sync_violations});
  if (!store.ok()) {
    fmt::print(stderr, "cannot open the store: {}\n", store.status().ToString());
    std::abort();
  }
  return *std::move(store);
}

// Shared by the threads of one run; set up and torn down outside the timed threads.
std::unique_ptr<Store>& SharedStore() {
  static auto* store = new std::unique_ptr<Store>();
  return *store;
}

void SetUpStore(const benchmark::State& state) { SharedStore() = OpenFresh(state.range(0) != 0); }

void TearDownStore(const benchmark::State&) {
  SharedStore().reset();
  std::filesystem::remove_all(BenchDir());
}

void BM_AppendBatch(benchmark::State& state) {
  const std::string stream = fmt::format("stream-{}", state.thread_index());
  const std::string payload(static_cast<size_t>(state.range(1)), 'x');
  Store& store = *SharedStore();
  uint64_t seq = 0;
  for (auto _ : state) {
    ++seq;
    auto pos = store.AppendBatch(stream, seq, history::Timestamp{static_cast<int64_t>(seq), 0},
                                 false, payload);
    if (!pos.ok()) {
      state.SkipWithError("append failed");
      break;
    }
    benchmark::DoNotOptimize(*pos);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * state.range(1));
}
BENCHMARK(BM_AppendBatch)
    ->ArgNames({"sync", "bytes"})
    ->ArgsProduct({{1}, {1024, int64_t{64} << 10}})
    ->Args({0, 1024})
    ->Args({0, int64_t{64} << 10})
    ->Setup(SetUpStore)
    ->Teardown(TearDownStore)
    ->ThreadRange(1, 16)
    ->UseRealTime();

ViolationRecord MakeViolation(uint64_t i) {
  ViolationRecord v;
  v.id = fmt::format("online:si:EXT:{:016x}", i);
  v.checker = "online";
  v.level = i % 2 == 0 ? "si" : "ser";
  v.anomaly = i % 10 == 0 ? "NOCONFLICT" : "EXT";
  v.ext_kind = "never";
  v.streams = {fmt::format("stream-{}", i % 4)};
  v.finalised_unix_ms = static_cast<int64_t>(1'700'000'000'000 + i);
  v.json = std::string(400, 'j');
  return v;
}

void BM_PutViolation(benchmark::State& state) {
  std::unique_ptr<Store> store = OpenFresh(/*sync=*/true, state.range(0) != 0);
  uint64_t i = 0;
  for (auto _ : state) {
    auto stored = store->PutViolation(MakeViolation(i++));
    if (!stored.ok() || !*stored) {
      state.SkipWithError("put failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  store.reset();
  std::filesystem::remove_all(BenchDir());
}
BENCHMARK(BM_PutViolation)->ArgName("sync")->Arg(0)->Arg(1)->UseRealTime();

void BM_QueryViolations(benchmark::State& state) {
  std::unique_ptr<Store> store = OpenFresh(/*sync=*/false);
  constexpr uint64_t kStored = 10'000;
  for (uint64_t i = 0; i < kStored; ++i) {
    if (!store->PutViolation(MakeViolation(i)).ok()) std::abort();
  }
  ViolationFilter filter;
  if (state.range(0) != 0) filter.anomaly = "NOCONFLICT";
  std::string token;
  for (auto _ : state) {
    auto page = store->QueryViolations(filter, 100, token);
    if (!page.ok()) {
      state.SkipWithError("query failed");
      break;
    }
    token = page->next_page_token;  // walk the pages, then start again
    benchmark::DoNotOptimize(page->violations.data());
  }
  state.SetItemsProcessed(state.iterations() * 100);
  store.reset();
  std::filesystem::remove_all(BenchDir());
}
BENCHMARK(BM_QueryViolations)->ArgName("filtered")->Arg(0)->Arg(1);

}  // namespace
}  // namespace isowatch::store
