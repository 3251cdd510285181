// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

namespace isowatch::tidb {

// What an error of a MySQL-protocol server means to the workload (docs/collectors/tidb.md,
// "Errors and retries").
enum class ErrorKind : uint8_t {
  kConflict,        // a concurrency conflict rolled the transaction back: write conflict,
                    // deadlock, lock wait timeout; run it again
  kTransient,       // the cluster was busy or changing (server busy, region error, schema
                    // changed, GC); run it again
  kConnectionLost,  // the connection broke: reconnect; what was in flight is decided by the rules
                    // of the statement it broke in
  kOther,           // anything else (a bad statement, a constraint): not retried
};

struct ErrorInfo {
  ErrorKind kind = ErrorKind::kOther;
  // A short name of the error for logs and tests, e.g. "write conflict"; "other" when unknown.
  const char* name = "other";

  bool retryable() const { return kind != ErrorKind::kOther; }
  bool conflict() const { return kind == ErrorKind::kConflict; }
};

// Classifies a MySQL or TiDB error number (the server's, or the client library's 2000 and up).
// Thread-safe.
ErrorInfo ClassifyError(uint32_t code);

// Error numbers the workload names (TiDB's errno package, MySQL's and Connector/C's).
namespace errc {
inline constexpr uint32_t kLockWaitTimeout = 1205;
inline constexpr uint32_t kDeadlock = 1213;
inline constexpr uint32_t kRecordChanged = 1020;  // MariaDB's snapshot-isolation check
inline constexpr uint32_t kServerGone = 2006;
inline constexpr uint32_t kServerLost = 2013;
inline constexpr uint32_t kCantSelectForUpdate = 8002;
inline constexpr uint32_t kWriteConflictInTidb = 8005;
inline constexpr uint32_t kTxnRetryable = 8022;
inline constexpr uint32_t kInfoSchemaChanged = 8028;
inline constexpr uint32_t kPdServerTimeout = 9001;
inline constexpr uint32_t kTikvServerBusy = 9003;
inline constexpr uint32_t kGcTooEarly = 9006;
inline constexpr uint32_t kWriteConflict = 9007;
}  // namespace errc

}  // namespace isowatch::tidb
