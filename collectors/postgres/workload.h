// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/history/history.h"
#include "isowatch/v1/history.pb.h"

#include "collectors/common/workload_shape.h"

namespace isowatch::pg {

enum class Isolation : uint8_t { kReadCommitted, kRepeatableRead, kSerializable };

// "read-committed", "repeatable-read", "serializable".
const char* IsolationName(Isolation isolation);
std::optional<Isolation> ParseIsolation(std::string_view name);

// pg_current_snapshot()'s text, "xmin:xmax:xip,xip,...", as a snapshot. Errors: InvalidArgument.
absl::StatusOr<v1::Snapshot> ParseSnapshotText(std::string_view text);

// The workload a collector drives (docs/collectors/postgres.md, "Workload"): `sessions`
// connections, each running transactions of `ops_per_txn` reads and writes (key-value) or reads
// and appends (list) on keys drawn from `dist`, at `isolation`.
struct WorkloadOptions {
  std::string dsn;
  Isolation isolation = Isolation::kRepeatableRead;
  history::DataModel data = history::DataModel::kKeyValue;
  // Its max_retries counts the retries of a transaction aborted by a serialization failure or a
  // deadlock.
  collectors::WorkloadShape shape;
  // The table is `<table_prefix>kv` or `<table_prefix>list`.
  std::string table_prefix = "isowatch_";
  // Prefix of the logical message each transaction emits before it commits.
  std::string message_prefix = "isowatch";
  // Record the transactions (snapshot and xid first, the logical message last). Off, the
  // workload runs bare, as the application would without a collector: for measuring the
  // collector's overhead (bench/); nothing reaches the sink.
  bool record = true;
};

// The name of the workload's table.
std::string TableName(const WorkloadOptions& options);

// One transaction as its session saw it. `txn` has id_str = its tag, the session and its position,
// the status (COMMITTED: COMMIT succeeded, or the outcome was looked up after the connection
// broke; ABORTED; UNKNOWN: the outcome could not be learnt), xid, snapshot and the operations run;
// no commit timestamp (logical decoding gives it).
struct ClientTxn {
  v1::Transaction txn;
  std::string tag;  // the content of its logical message: "<run>:<session>:<seq>"
};

struct WorkloadStats {
  std::atomic<uint64_t> attempted{0};
  std::atomic<uint64_t> committed{0};
  std::atomic<uint64_t> aborted_conflict{0};  // serialization failures and deadlocks
  std::atomic<uint64_t> aborted_other{0};     // other errors, lost connections before COMMIT
  std::atomic<uint64_t> unknown{0};           // COMMIT's outcome could not be learnt
  std::atomic<uint64_t> reconnects{0};
};

// Runs the workload on its own threads, handing each finished transaction to `sink` (from the
// session threads; `sink` must be thread-safe). Sessions ride out a restart of the server: a
// transaction whose connection broke before COMMIT is aborted, one whose COMMIT got no answer is
// looked up with pg_xact_status() once the session has reconnected.
class Workload {
 public:
  Workload(WorkloadOptions options, std::function<void(ClientTxn)> sink);
  ~Workload();
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  // Creates the table if missing; with `reset`, empties it (before replication starts, so that
  // the empty table is the initial state).
  absl::Status Prepare(bool reset);
  void Start();
  // Asks the sessions to stop after their current transaction.
  void Stop();
  // Waits for every session to end (their transactions are done, or Stop).
  void Wait();

  const WorkloadStats& stats() const { return stats_; }

 private:
  class Session;

  WorkloadOptions options_;
  std::function<void(ClientTxn)> sink_;
  WorkloadStats stats_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_txn_{0};
  std::vector<std::thread> threads_;
};

}  // namespace isowatch::pg
