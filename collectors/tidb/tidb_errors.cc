// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/tidb_errors.h"

namespace isowatch::tidb {

ErrorInfo ClassifyError(uint32_t code) {
  using enum ErrorKind;
  switch (code) {
    // Concurrency conflicts: the transaction was rolled back, or must be.
    case errc::kWriteConflict:  // TiKV: a newer commit of a key this one prewrote (optimistic)
      return {kConflict, "write conflict"};
    case errc::kWriteConflictInTidb:  // TiDB found the conflict itself
      return {kConflict, "write conflict in TiDB"};
    case errc::kCantSelectForUpdate:  // a conflicting SELECT FOR UPDATE cannot be retried
      return {kConflict, "select for update conflict"};
    case errc::kTxnRetryable:  // "the transaction commit fails and has been rolled back"
      return {kConflict, "transaction retry error"};
    case errc::kLockWaitTimeout:  // pessimistic lock wait (TiDB), row lock wait (InnoDB)
      return {kConflict, "lock wait timeout"};
    case errc::kDeadlock:
      return {kConflict, "deadlock"};
    case errc::kRecordChanged:  // MariaDB 11.x innodb_snapshot_isolation
      return {kConflict, "record changed since last read"};
    // The cluster was busy or changing under the transaction: a new one may succeed.
    case 8027:  // information schema out of date
      return {kTransient, "schema out of date"};
    case errc::kInfoSchemaChanged:  // a table of the transaction changed during it
      return {kTransient, "schema changed"};
    case errc::kPdServerTimeout:
      return {kTransient, "PD server timeout"};
    case 9002:
      return {kTransient, "TiKV server timeout"};
    case errc::kTikvServerBusy:
      return {kTransient, "TiKV server busy"};
    case 9004:
      return {kTransient, "resolve lock timeout"};
    case 9005:
      return {kTransient, "region unavailable"};
    case errc::kGcTooEarly:  // the snapshot is older than the GC safe point
      return {kTransient, "GC life time shorter than the transaction"};
    case 9008:
      return {kTransient, "TiKV busy: too many requests"};
    case 9012:
      return {kTransient, "TiFlash server timeout"};
    case 9013:
      return {kTransient, "TiFlash server busy"};
    // The connection is gone (client library errors, and servers that say so before closing).
    case 1053:  // server shutdown in progress
      return {kConnectionLost, "server shutdown"};
    case 1927:  // MariaDB: connection killed
      return {kConnectionLost, "connection killed"};
    case 2002:  // cannot connect through the socket
    case 2003:  // cannot connect to host:port
      return {kConnectionLost, "cannot connect"};
    case errc::kServerGone:
      return {kConnectionLost, "server has gone away"};
    case errc::kServerLost:
      return {kConnectionLost, "lost connection during query"};
    case 2055:  // lost connection at a stage of the handshake or query
      return {kConnectionLost, "lost connection"};
    case 4031:  // MySQL 8: disconnected by the server for inactivity
      return {kConnectionLost, "disconnected for inactivity"};
    default:
      return {kOther, "other"};
  }
}

}  // namespace isowatch::tidb
