// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the daemon's checkpoint restore (docs/operations.md, "Checkpoints"):
// what parses as a LiveCheckpoint is restored into a live checker (with a one-byte memory budget
// over an in-memory spill, so that evicted keys are allowed); a checkpoint it takes must then
// check a batch and render its violations (and cut its windows) like any other. A refusal is fine,
// a crash is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "isowatch/common/clock.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/v1/ingest.pb.h"

namespace {

isowatch::v1::IngestBatch ProbeBatch(const std::string& stream) {
  isowatch::v1::IngestBatch b;
  b.set_stream(stream);
  b.set_seq(1'000'000);
  for (int i = 0; i < 4; ++i) {
    isowatch::v1::Transaction* t = b.add_txns();
    t->set_id_str("probe-" + std::to_string(i));
    t->set_session_str("probe");
    t->set_status(isowatch::v1::Transaction::COMMITTED);
    t->mutable_start()->set_physical(1'000'000'000 + 10 * i);
    t->mutable_commit()->set_physical(1'000'000'000 + 10 * i + 5);
    for (int k = 0; k < 3; ++k) {
      isowatch::v1::Operation* op = t->add_ops();
      op->set_kind(k == i % 3 ? isowatch::v1::Operation::WRITE : isowatch::v1::Operation::READ);
      op->mutable_key()->set_int_(k);
      op->mutable_value()->set_int_(i);
    }
  }
  b.mutable_watermark()->set_physical(2'000'000'000);
  b.set_end_of_stream(true);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  isowatch::v1::LiveCheckpoint checkpoint;
  if (!checkpoint.ParseFromArray(data, static_cast<int>(size))) return 0;
  isowatch::common::ManualClock clock;
  isowatch::engine::MemoryVersionSpill spill;
  isowatch::monitor::LiveOptions options{.engine = {.clock = &clock}};
  options.engine.spill = &spill;
  options.engine.memory_budget = 1;
  // A checkpoint with a window cutter is restored by a checker cutting windows the way it did
  // (when that way is a valid one), so that the cutter's restore is fed too.
  if (checkpoint.has_cutter()) {
    const isowatch::v1::CutterCheckpoint& c = checkpoint.cutter();
    const bool by_span = c.span() > 0 && c.transactions() == 0;
    const bool by_count = c.span() == 0 && c.transactions() > 0 && c.transactions() < (1u << 20);
    if ((by_span || by_count) && c.overlap() >= 0) {
      options.windows = isowatch::windows::WindowOptions{
          .span = c.span(), .transactions = c.transactions(), .overlap = c.overlap()};
    }
  }
  isowatch::monitor::LiveChecker live(options);
  if (!live.RestoreCheckpoint(checkpoint, 0).ok()) return 0;
  const std::string stream =
      checkpoint.streams_size() > 0 ? checkpoint.streams(0).name() : std::string("probe");
  const isowatch::v1::IngestBatch batch = ProbeBatch(stream);
  std::vector<uint32_t> all = {0, 1, 2, 3};
  live.Apply(batch, all, 1);
  live.Tick();
  live.TakeViolations(2);
  live.TakeSealedWindows();
  return 0;
}
