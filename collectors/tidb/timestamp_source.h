// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/mysql_conn.h"

namespace isowatch::tidb {

// What @@tidb_last_txn_info says of the session's last transaction.
struct LastTxnInfo {
  Tso start_ts = 0;
  Tso commit_ts = 0;        // 0: none (a read-only transaction, or one that did not commit)
  std::string commit_mode;  // "2pc", "async_commit", "1pc"; empty when absent
  std::string error;        // set when TiDB recorded a failed commit
};

// Parses @@tidb_last_txn_info: {"txn_scope":"global","start_ts":N,"commit_ts":N,
// "txn_commit_mode":"2pc",...}. start_ts is required; commit_ts may be 0 or absent. Errors:
// InvalidArgument.
absl::StatusOr<LastTxnInfo> ParseLastTxnInfo(std::string_view json);

// A TSO, or the statement error that kept the session from learning it. An error of another
// kind (an answer that does not parse) has code 0 and kind kOther.
struct TsoResult {
  Tso ts = 0;
  std::optional<SqlError> error;
  bool ok() const { return !error.has_value(); }
};
struct CommitTsResult {
  LastTxnInfo info;
  std::optional<SqlError> error;
  bool ok() const { return !error.has_value(); }
};

// How one session learns the timestamps of the transactions it runs (docs/collectors/tidb.md,
// "Timestamps"). `conn` is the session's connection; a clock that asks the server nothing (the
// test double) accepts null. One per session; thread-compatible.
class SessionClock {
 public:
  virtual ~SessionClock() = default;
  // Inside a transaction, after BEGIN: its start ts.
  virtual TsoResult StartTs(MysqlConn* conn) = 0;
  // Right before COMMIT is sent, every statement of the transaction done.
  virtual void BeforeCommit() {}
  // After COMMIT succeeded: the start and commit ts of the transaction it committed. `wrote`:
  // whether the transaction wrote anything.
  virtual CommitTsResult AfterCommit(MysqlConn* conn, bool wrote) = 0;
};

// Where the workload's timestamps come from: TiDB's TSO (TidbTimestamps) or a test double
// (FakeTimestamps). Thread-safe.
class TimestampSource {
 public:
  virtual ~TimestampSource() = default;
  virtual std::unique_ptr<SessionClock> NewSession() = 0;
  // Whether the server is TiDB: its session variables (tidb_txn_mode) are set only then.
  virtual bool tidb() const = 0;
};

// TiDB's own timestamps: `SELECT @@tidb_current_ts` inside the transaction (its start ts), and
// `SELECT @@tidb_last_txn_info` after COMMIT (start and commit ts).
std::unique_ptr<TimestampSource> MakeTidbTimestamps();

// A process-wide timestamp oracle for servers that have none (MariaDB, in tests): TSOs of the
// wall clock in milliseconds shifted left 18 bits, or'ed with a logical counter, strictly
// increasing over all callers (a millisecond's 2^18 values used up carry into the next one).
// Thread-safe.
class FakeTso {
 public:
  // `now_ms`: the clock, Unix milliseconds (injected by tests); the system clock when empty.
  explicit FakeTso(std::function<int64_t()> now_ms = {});
  Tso Next();

 private:
  std::function<int64_t()> now_ms_;
  absl::Mutex mu_;
  Tso last_ ABSL_GUARDED_BY(mu_) = 0;
};

// The test double over FakeTso: a transaction's start ts is drawn after BEGIN, its commit ts right
// before COMMIT while it still holds its locks (so that on a locking server two writers of one
// key get commit ts in their commit order), none for a transaction that wrote nothing.
std::unique_ptr<TimestampSource> MakeFakeTimestamps(std::shared_ptr<FakeTso> oracle);

}  // namespace isowatch::tidb
