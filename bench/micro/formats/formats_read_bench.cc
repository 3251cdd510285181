// SPDX-License-Identifier: Apache-2.0
// Reading every history format from a file: detection skipped (the format is given), parse +
// intern + build, no checking. One simulator history (10,000 keys, its committed transactions
// only, as a TimeKiller file holds them), written once per format into a temporary directory,
// without its timestamps for the formats that have none. dbcop cannot say a read of no value (its
// keys start at 0): it gets the history with those reads made reads of 0.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdlib.h>
#include <string>
#include <system_error>

#include <benchmark/benchmark.h>

#include "isowatch/formats/history_file.h"
#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/without_timestamps.h"
#include "isowatch/sim/simulator.h"

namespace isowatch {
namespace {

using formats::FileFormat;
using history::Value;

// `h` (key-value, integer keys and values) with the initial value 0 and every read of no value a
// read of 0, which is how dbcop, whose keys all start at 0, says it.
absl::StatusOr<history::History> AbsentReadsAsZero(const history::History& h) {
  history::HistoryBuilder b;
  b.SetDefaultInitialValue(Value::Int(0));
  for (TxnId id : h.HeldTxns()) {
    const history::Transaction& t = h.txn(id);
    history::TxnHeader header;
    header.id = h.txn_name(id);
    header.session = h.session_name(t.session);
    header.seq = t.seq;
    header.status = t.status;
    if (absl::Status s = b.BeginTxn(header); !s.ok()) return s;
    for (const history::Op& op : h.ops(t)) {
      const KeyId key = b.IntKey(h.key(op.key()).payload);
      const Value v = op.value().absent() ? Value::Int(0) : op.value();
      if (op.kind() == history::OpKind::kWrite) {
        b.Write(key, v);
      } else {
        b.Read(key, v);
      }
    }
    b.EndTxn();
  }
  return std::move(b).Finish();
}

// The history file of `txns` transactions in `format`, written on first use and kept for the
// process (removed at exit).
class BenchFiles {
 public:
  ~BenchFiles() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Written without timestamps where the format cannot say them (a black-box format); empty if
  // the format cannot express the history even so.
  const std::string& Get(FileFormat format, uint64_t txns) {
    const std::string name =
        std::string(formats::FileFormatName(format)) + "-" + std::to_string(txns);
    auto it = paths_.find(name);
    if (it != paths_.end()) return it->second;
    if (dir_.empty()) {
      std::string pattern =
          (std::filesystem::temp_directory_path() / "isowatch-bench-XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) std::abort();
      dir_ = pattern;
    }
    const history::History& h = Base(txns);
    std::string path = (std::filesystem::path(dir_) / name).string();
    if (!formats::WriteHistoryFile(h, path, format).ok()) {
      absl::StatusOr<history::History> bare = history::WithoutTimestamps(h);
      if (bare.ok() && format == FileFormat::kDbcopBincode) bare = AbsentReadsAsZero(*bare);
      if (!bare.ok() || !formats::WriteHistoryFile(*bare, path, format).ok()) path.clear();
    }
    return paths_.emplace(name, path).first->second;
  }

 private:
  // The simulator's history of `txns` committed transactions, through a TimeKiller file.
  const history::History& Base(uint64_t txns) {
    if (base_txns_ == txns) return base_;
    sim::WorkloadOptions o;
    o.txns = txns;
    o.keys = 10000;
    o.seed = 7;
    o.count_committed = true;
    auto r = sim::Simulate(o);
    if (!r.ok()) std::abort();
    const std::string path = (std::filesystem::path(dir_) / "base.json").string();
    if (!formats::WriteHistoryFile(r->history, path, FileFormat::kTimeKiller).ok()) std::abort();
    auto h = formats::ReadHistoryFile(path, FileFormat::kTimeKiller, {});
    if (!h.ok()) std::abort();
    base_ = *std::move(h);
    base_txns_ = txns;
    return base_;
  }

  std::string dir_;
  std::map<std::string, std::string> paths_;
  history::History base_;
  uint64_t base_txns_ = 0;
};

// A static object, not a leaked one: its destructor removes the files (about 1 GB) at exit.
BenchFiles& Files() {
  static BenchFiles files;
  return files;
}

uint64_t SizeOf(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    uint64_t total = 0;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) total += e.file_size(ec);
    return total;
  }
  return std::filesystem::file_size(path, ec);
}

// state.range(0): the format (FileFormat); state.range(1): transactions.
void BM_ReadFormat(benchmark::State& state) {
  const auto format = static_cast<FileFormat>(state.range(0));
  const std::string& path = Files().Get(format, static_cast<uint64_t>(state.range(1)));
  if (path.empty()) {
    state.SkipWithError("the format cannot express the history");
    return;
  }
  const uint64_t bytes = SizeOf(path);
  size_t txns = 0;
  for (auto _ : state) {
    auto h = formats::ReadHistoryFile(path, format, {});
    if (!h.ok()) {
      state.SkipWithError(std::string(h.status().message()).c_str());
      return;
    }
    txns = h->size();
    benchmark::DoNotOptimize(txns);
  }
  state.SetLabel(formats::FileFormatName(format));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * txns));
}

void Formats(benchmark::internal::Benchmark* b) {
  for (FileFormat f :
       {FileFormat::kNative, FileFormat::kTimeKiller, FileFormat::kEdn, FileFormat::kElleJson,
        FileFormat::kText, FileFormat::kCobra, FileFormat::kDbcopBincode, FileFormat::kViper}) {
    b->Args({static_cast<int64_t>(f), 1000000});
  }
}
BENCHMARK(BM_ReadFormat)
    ->ArgNames({"format", "txns"})
    ->Apply(Formats)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace isowatch
