// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <libpq-fe.h>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace isowatch::pg {

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// SQLSTATE codes the workload tells apart.
inline constexpr std::string_view kSerializationFailure = "40001";
inline constexpr std::string_view kDeadlockDetected = "40P01";

// A failed statement: its SQLSTATE (empty when the server sent none, as when the connection
// broke), the server's message, and whether the connection is still usable.
struct SqlError {
  std::string sqlstate;
  std::string message;
  bool connection_lost = false;

  // The transaction was rolled back by a concurrency conflict (serialization failure, deadlock).
  bool conflict() const {
    return sqlstate == kSerializationFailure || sqlstate == kDeadlockDetected;
  }
  absl::Status ToStatus() const;
};

// Opens a connection. Errors: Unavailable (the server cannot be reached or refused us).
absl::StatusOr<ConnPtr> Connect(const std::string& dsn);

// Runs `sql` with text parameters (nullopt = NULL) and returns its result, or the error. A result
// is returned for PGRES_COMMAND_OK and PGRES_TUPLES_OK only.
struct ExecResult {
  ResultPtr result;
  std::optional<SqlError> error;
  bool ok() const { return !error.has_value(); }
};
ExecResult Exec(PGconn* conn, const char* sql,
                std::span<const std::optional<std::string>> params = {});

// Runs `sql`, which may hold several statements separated by ';', in one round trip (the simple
// query protocol, so no parameters), and returns the result of the last one, or the first error
// (the statements after it are not run).
ExecResult ExecSimple(PGconn* conn, const char* sql);

// `text` as an SQL string literal, quoted and escaped for `conn`'s encoding; nullopt if libpq
// cannot (out of memory, text invalid in the encoding).
std::optional<std::string> QuoteLiteral(PGconn* conn, std::string_view text);

// A libpq message on one line: its lines joined by spaces, without the trailing newline.
std::string OneLine(const char* message);

// Exec for statements that must succeed (set-up): the error as a Status.
absl::Status ExecOrStatus(PGconn* conn, const char* sql,
                          std::span<const std::optional<std::string>> params = {});

// The text of field (row, col), or nullopt for NULL.
std::optional<std::string> Field(const PGresult* r, int row, int col);

}  // namespace isowatch::pg
