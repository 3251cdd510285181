// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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
#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/mysql_conn.h"
#include "collectors/tidb/timestamp_source.h"

namespace isowatch::tidb {

// TiDB's transaction modes (tidb_txn_mode).
enum class TxnMode : uint8_t { kOptimistic, kPessimistic };
const char* TxnModeName(TxnMode mode);  // "optimistic", "pessimistic"
std::optional<TxnMode> ParseTxnMode(std::string_view name);

// The isolation levels TiDB offers: repeatable read (snapshot isolation) and read committed
// (pessimistic mode only: each statement reads at a timestamp of its own).
enum class Isolation : uint8_t { kRepeatableRead, kReadCommitted };
const char* IsolationName(Isolation isolation);  // "repeatable-read", "read-committed"
std::optional<Isolation> ParseIsolation(std::string_view name);

// The workload the TiDB collector drives (docs/collectors/tidb.md, "Workload"): `sessions`
// connections, each running transactions of `ops_per_txn` reads and writes (key-value) or reads
// and appends (list) on keys drawn from `dist`.
struct WorkloadOptions {
  MysqlOptions db;
  TxnMode mode = TxnMode::kPessimistic;  // TiDB's default
  Isolation isolation = Isolation::kRepeatableRead;
  history::DataModel data = history::DataModel::kKeyValue;
  // Its max_retries counts the retries of a transaction that failed with a retryable error
  // (tidb_errors.h).
  collectors::WorkloadShape shape;
  // The table, in db.database: k BIGINT PRIMARY KEY, v (BIGINT, or the list as text), t (the id
  // of the transaction that wrote the row last).
  std::string table = "isowatch_kv";
  // innodb_lock_wait_timeout of the sessions, seconds (TiDB: the pessimistic lock wait); 0 = the
  // server's.
  uint32_t lock_wait_timeout_s = 0;
};

// "isowatch_" + "kv" or "list" after `prefix`.
std::string DefaultTableName(std::string_view prefix, history::DataModel data);

struct WorkloadStats {
  std::atomic<uint64_t> attempted{0};
  std::atomic<uint64_t> committed{0};
  std::atomic<uint64_t> aborted_conflict{0};     // write conflicts, deadlocks, lock wait timeouts
  std::atomic<uint64_t> aborted_other{0};        // other errors, lost connections before COMMIT
  std::atomic<uint64_t> unknown{0};              // COMMIT failed, timed out or lost its connection
  std::atomic<uint64_t> unrecorded{0};           // failed before the start ts was known
  std::atomic<uint64_t> no_commit_ts{0};         // committed, but the commit ts was not learnt
  std::atomic<uint64_t> start_ts_mismatches{0};  // @@tidb_last_txn_info names another start
  std::atomic<uint64_t> reconnects{0};
};

// Runs the workload on its own threads and hands each transaction attempt that got a start ts
// to `sink`, from its session's thread (`sink` must be thread-safe), as a v1::Transaction: id_str
// "<run>:<session>:<seq>" (also written to column t), session_str "r<run>s<session>", seq, start,
// commit (when learnt), status and the operations run (docs/collectors/tidb.md, "Outcomes").
// Each session hands its records over in order of seq, and a session's floor (Floor) moves past a
// record's start only after the sink has taken it.
class Workload {
 public:
  Workload(WorkloadOptions options, std::shared_ptr<TimestampSource> timestamps,
           std::function<void(v1::Transaction)> sink);
  ~Workload();
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  // Creates the database and table if missing; with `reset`, empties the table.
  absl::Status Prepare(bool reset);
  void Start();
  // Asks the sessions to stop after their current transaction.
  void Stop();
  // Waits for every session to end (their transactions are done, or Stop).
  void Wait();
  // Whether every session has ended.
  bool done() const;

  // Every transaction that starts at or below this TSO has been handed to the sink (the lowest,
  // over the sessions still running, of the start ts of the last transaction each handed over; 0
  // before each has handed one over; the largest Tso once all have ended). Thread-safe.
  Tso Floor() const;
  // A TSO taken now: from a transaction begun and rolled back on a connection of its own.
  absl::StatusOr<Tso> FreshTs();

  const WorkloadStats& stats() const { return stats_; }

 private:
  class Session;

  WorkloadOptions options_;
  std::shared_ptr<TimestampSource> timestamps_;
  std::function<void(v1::Transaction)> sink_;
  WorkloadStats stats_;
  // Flags and counters shared by the sessions; relaxed order is enough for each (stop_ is only
  // a request, next_txn_ only hands out numbers), floors_ and ended_ use release/acquire so that
  // what a session handed to the sink before moving its floor is seen by a reader of the floor.
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_txn_{0};
  std::unique_ptr<std::atomic<Tso>[]> floors_;
  std::atomic<uint32_t> ended_{0};
  uint32_t session_count_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace isowatch::tidb
