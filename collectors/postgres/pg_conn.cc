// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/pg_conn.h"

#include <vector>

#include "absl/strings/ascii.h"
#include <fmt/format.h>

namespace isowatch::pg {

absl::Status SqlError::ToStatus() const {
  std::string text =
      sqlstate.empty() ? message : fmt::format("{} (SQLSTATE {})", message, sqlstate);
  if (connection_lost) return absl::UnavailableError(text);
  return absl::FailedPreconditionError(text);
}

absl::StatusOr<ConnPtr> Connect(const std::string& dsn) {
  ConnPtr conn(PQconnectdb(dsn.c_str()));
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq could not allocate a connection");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return absl::UnavailableError(
        fmt::format("cannot connect to PostgreSQL: {}", OneLine(PQerrorMessage(conn.get()))));
  }
  return conn;
}

namespace {

// The outcome of a statement whose result is `out.result`.
ExecResult Classify(PGconn* conn, ExecResult out) {
  const ExecStatusType status =
      out.result == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(out.result.get());
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return out;
  SqlError e;
  if (out.result != nullptr) {
    const char* state = PQresultErrorField(out.result.get(), PG_DIAG_SQLSTATE);
    if (state != nullptr) e.sqlstate = state;
    const char* primary = PQresultErrorField(out.result.get(), PG_DIAG_MESSAGE_PRIMARY);
    if (primary != nullptr) e.message = primary;
  }
  if (e.message.empty()) e.message = OneLine(PQerrorMessage(conn));
  // A connection exception (class 08) or operator intervention (57: shutdown, crash of another
  // backend) ends the session even when libpq has not noticed the socket closing yet.
  e.connection_lost = PQstatus(conn) != CONNECTION_OK || e.sqlstate.starts_with("08") ||
                      e.sqlstate.starts_with("57");
  out.result.reset();
  out.error = std::move(e);
  return out;
}

}  // namespace

ExecResult Exec(PGconn* conn, const char* sql, std::span<const std::optional<std::string>> params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const std::optional<std::string>& p : params) {
    values.push_back(p.has_value() ? p->c_str() : nullptr);
  }
  ExecResult out;
  out.result.reset(PQexecParams(conn, sql, static_cast<int>(values.size()), nullptr, values.data(),
                                nullptr, nullptr, 0));
  return Classify(conn, std::move(out));
}

ExecResult ExecSimple(PGconn* conn, const char* sql) {
  ExecResult out;
  out.result.reset(PQexec(conn, sql));
  return Classify(conn, std::move(out));
}

std::optional<std::string> QuoteLiteral(PGconn* conn, std::string_view text) {
  char* quoted = PQescapeLiteral(conn, text.data(), text.size());
  if (quoted == nullptr) return std::nullopt;
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

std::string OneLine(const char* message) {
  std::string text(absl::StripTrailingAsciiWhitespace(message == nullptr ? "" : message));
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty() && out.back() != ' ') out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

absl::Status ExecOrStatus(PGconn* conn, const char* sql,
                          std::span<const std::optional<std::string>> params) {
  ExecResult r = Exec(conn, sql, params);
  if (r.ok()) return absl::OkStatus();
  return r.error->ToStatus();
}

std::optional<std::string> Field(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return std::nullopt;
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}

}  // namespace isowatch::pg
