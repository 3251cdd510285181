// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/history/timestamp.h"

namespace isowatch::server {

// One ingest stream as /api/v1/status shows it.
struct StreamStatus {
  std::string name;
  std::optional<history::Timestamp> watermark;  // none before the stream sent one
  std::optional<double> lag_seconds;            // none where the daemon cannot tell
  bool closed = false;                          // the stream sent its end-of-stream mark
  uint64_t pending_transactions = 0;            // received, not yet final
  uint64_t ingested_transactions = 0;
  uint64_t committed_transactions = 0;  // of which committed
  uint64_t acked_sequence = 0;          // highest batch sequence number made durable
};

// Counters since the daemon's store was created (kept across restarts, as the metrics of the
// same name), and two gauges: queued_batches and provisional_verdicts.
struct StatusCounts {
  uint64_t ingested_transactions = 0;
  uint64_t refused_transactions = 0;
  uint64_t duplicate_batches = 0;
  uint64_t queued_batches = 0;
  uint64_t violations = 0;             // final: every one found, stored in full or summarised
  uint64_t violations_stored = 0;      // of which stored in full
  uint64_t violations_summarised = 0;  // of which counted in summaries
  uint64_t provisional_verdicts = 0;
  uint64_t flip_flops = 0;           // of provisional verdicts, never reported
  uint64_t reported_flip_flops = 0;  // an upper bound of reported verdicts reversed
  uint64_t late_arrivals = 0;
  uint64_t horizon_misses = 0;
};

// The memory RocksDB holds for one of the daemon's databases, as RocksDB counts it.
struct RocksDbMemoryStatus {
  std::string db;              // "store" or "spill"
  uint64_t memtables = 0;      // every memtable, those waiting for their flush included
  uint64_t table_readers = 0;  // SST table readers outside the block cache
  uint64_t block_cache = 0;    // blocks cached (the room reserved for memtables not counted)

  uint64_t total() const { return memtables + table_readers + block_cache; }
};

struct MemoryStatus {
  uint64_t resident_bytes = 0;  // of the process
  uint64_t engine_bytes = 0;    // the engine's own estimate of its state
  uint64_t history_bytes = 0;   // the live history of transaction contents
  uint64_t spill_bytes = 0;     // written to the version spill on disk
  uint64_t budget_bytes = 0;    // 0: no budget
  uint64_t retained_versions = 0;
  uint64_t retained_transactions = 0;
  uint64_t retained_provisional_reads = 0;
  uint64_t rocksdb_bytes = 0;                // the sum over `rocksdb`
  std::vector<RocksDbMemoryStatus> rocksdb;  // the store, then the spill if there is one
};

// One plug-in checker's work on windows since the daemon started.
struct CheckerStatus {
  std::string name;
  uint64_t checked = 0;     // windows it finished
  uint64_t unknown = 0;     // windows it ran out of time on
  uint64_t violations = 0;  // found for the first time (stored in full or summarised)
  double seconds = 0;       // spent on windows in all
};

// Sealed windows and the plug-in checkers (docs/windows.md).
struct WindowsStatus {
  bool enabled = false;            // some plug-in runs on windows
  uint64_t sealed = 0;             // windows sealed since the daemon started (recovery included)
  uint64_t done = 0;               // windows numbered below it are done (checked or dropped), ever
  uint64_t dropped = 0;            // dropped unchecked since the daemon started
  uint64_t queued = 0;             // waiting for a worker
  uint64_t running = 0;            // being checked
  uint64_t late_transactions = 0;  // arrived after their window was sealed
  std::vector<CheckerStatus> checkers;
};

// What the daemon keeps of the violations it finds (docs/operations.md, "Bounded findings").
struct FindingsStatus {
  // "complete": every violation is stored in full; "summarising": some are counted in summaries
  // (the bounds per key and per transaction); "store_limit_reached": the store's limit is
  // reached, and violations are no longer stored in full.
  std::string state = "complete";
  uint64_t summaries = 0;        // that count at least one violation
  uint64_t store_bytes = 0;      // of the stored violations, their ids and the summaries
  uint64_t max_store_bytes = 0;  // 0: no limit
  // "complete": every violation stored in full was logged in full; "rate_limited": some were
  // not (findings.log_per_minute); "budget_spent": findings.max_log_bytes is reached, and none is
  // logged in full any more.
  std::string log_state = "complete";
  uint64_t logged = 0;         // violations logged in full since the daemon started
  uint64_t unlogged = 0;       // not logged in full, since the store was created
  uint64_t log_bytes = 0;      // of the violations logged in full since the daemon started
  uint64_t max_log_bytes = 0;  // 0: no limit
};

// A snapshot of the daemon's state for /api/v1/status. A plain value.
struct DaemonStatus {
  std::string version;
  int64_t start_unix_ms = 0;
  double uptime_seconds = 0;
  std::vector<StreamStatus> streams;
  StatusCounts counts;
  MemoryStatus memory;
  WindowsStatus windows;
  FindingsStatus findings;
};

// Where the HTTP API reads the daemon's status from; the daemon implements it.
//
// Thread-safety: implementations must be thread-safe; the HTTP server may call GetStatus() from
// several threads at once.
class StatusSource {
 public:
  virtual ~StatusSource() = default;

  // A consistent-enough snapshot: each field is current when read, the fields need not be from
  // one instant. Errors: Unavailable when the status cannot be gathered right now.
  virtual absl::StatusOr<DaemonStatus> GetStatus() = 0;
};

}  // namespace isowatch::server
