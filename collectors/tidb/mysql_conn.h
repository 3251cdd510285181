// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "collectors/tidb/tidb_errors.h"

struct st_mysql;

namespace isowatch::tidb {

// Where and how to connect to a MySQL-protocol server (TiDB, or MariaDB in tests).
struct MysqlOptions {
  std::string host = "127.0.0.1";
  uint32_t port = 4000;  // TiDB's default
  std::string socket;    // a Unix socket instead of host:port, when set
  std::string user = "root";
  std::string password;
  std::string database = "test";
  // Seconds to connect, and to wait for an answer to one statement (a COMMIT that takes longer
  // has an unknown outcome). 0: the library's default (none for reads and writes).
  uint32_t connect_timeout_s = 10;
  uint32_t read_timeout_s = 60;
  uint32_t write_timeout_s = 60;
};

// A failed statement: the server's error number (or the client library's, 2000 and up, when the
// connection broke), its SQLSTATE and message, and what the number means to a workload.
struct SqlError {
  uint32_t code = 0;
  std::string sqlstate;
  std::string message;
  ErrorInfo info;

  bool connection_lost() const { return info.kind == ErrorKind::kConnectionLost; }
  // "message (error 9007, SQLSTATE HY000)".
  std::string ToString() const;
  // Unavailable when the connection broke, Aborted for a retryable error, FailedPrecondition
  // otherwise.
  absl::Status ToStatus() const;
};

// The text result of a statement: one vector per row, nullopt for NULL.
using Row = std::vector<std::optional<std::string>>;
struct QueryResult {
  std::vector<Row> rows;
  std::optional<SqlError> error;
  bool ok() const { return !error.has_value(); }
};

// One connection over libmariadb (Debian's libmariadb-dev), RAII: closed by the destructor.
// Statements are sent as text (the workload's parameters are integers and its own ids, quoted
// with Quote). No automatic reconnection: a broken connection stays broken until Reconnect, so
// that a transaction is never silently continued on a new session.
// Thread-compatible: one thread at a time.
class MysqlConn {
 public:
  // Connects. Errors: Unavailable (the server cannot be reached, or refused us).
  static absl::StatusOr<std::unique_ptr<MysqlConn>> Connect(const MysqlOptions& options);
  ~MysqlConn();
  MysqlConn(const MysqlConn&) = delete;
  MysqlConn& operator=(const MysqlConn&) = delete;

  // Runs one statement and returns its rows (none for a statement without a result set).
  QueryResult Query(std::string_view sql);
  // Runs one statement whose result is not needed.
  std::optional<SqlError> Exec(std::string_view sql);
  // Runs a statement that must succeed (set-up), its error as a Status.
  absl::Status ExecOrStatus(std::string_view sql);

  // Whether the connection is usable: false after an error that broke it.
  bool connected() const { return connected_; }
  // Closes the connection and opens a new one with the same options. Errors: as Connect.
  absl::Status Reconnect();

  // `text` as a quoted SQL string literal ('...'), escaped for the connection's character set.
  std::string Quote(std::string_view text);

 private:
  explicit MysqlConn(MysqlOptions options) : options_(std::move(options)) {}
  absl::Status Open();
  void Close();
  SqlError LastError();

  MysqlOptions options_;
  st_mysql* mysql_ = nullptr;
  bool connected_ = false;
};

}  // namespace isowatch::tidb
