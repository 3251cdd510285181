// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/common/clock.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/monitor/violation_reporter.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/windows/check_pool.h"

namespace isowatch::monitor {

// How the daemon core (Monitor and its parts) runs.
struct MonitorOptions {
  LiveOptions live;
  // The RocksDB spill behind `live.engine.spill`, when it is one (not owned): the monitor reports
  // its memory with the store's, and snapshots it with each checkpoint.
  engine::RocksVersionSpill* rocks_spill = nullptr;
  // Checkpoints (docs/operations.md, "Checkpoints"): how often to save one (0: never), the
  // directory the spill's snapshots go under (the data directory), and the checkpoint the store
  // held at start, parsed, which Open restores before it replays the log after it (null: none;
  // its spill snapshot is already behind `live.engine.spill`).
  int64_t checkpoint_interval_ms = 0;
  std::string data_dir;
  std::shared_ptr<const v1::DaemonCheckpoint> checkpoint;
  // Batches taken (being appended, waiting for their sync, or durable but not yet applied by
  // the engine thread); when full, Submit and SubmitAsync wait and TrySubmit answers
  // ResourceExhausted.
  size_t queue_batches = 64;
  // How often the engine thread finalises timed-out verdicts and refreshes gauges and status.
  int64_t tick_ms = 100;
  // Transaction ids remembered per stream to recognise transactions sent again: at least the
  // newest this many, at most twice as many (ingest::MemoryIdRegistry); 0: every id.
  size_t remembered_ids = 0;
  std::string version;
  // How much of the violations is logged (the store's bounds are the store's options).
  FindingsLogOptions findings_log;
  // Plug-in checkers (checkers/registry.h) run on the windows `live.windows` cuts, by name with
  // their options; empty: no windows are checked.
  std::vector<std::pair<std::string, checkers::CheckerOptions>> window_checkers;
  windows::PoolOptions pool;
  // Every reading of time the core makes (not owned; it outlives the monitor),
  // `live.engine.clock`'s too when that is not set. nullptr: the system clock.
  const common::Clock* clock = nullptr;
};

}  // namespace isowatch::monitor
