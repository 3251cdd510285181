// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/replication.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <poll.h>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"

#include "isowatch/common/status_macros.h"

#include "collectors/postgres/internal/wire.h"
#include "collectors/postgres/pg_conn.h"
#include "collectors/postgres/pgoutput.h"
#include "libpq-fe.h"

namespace isowatch::pg {
namespace {

// 2000-01-01 (PostgreSQL's epoch) minus 1970-01-01, in microseconds.
constexpr int64_t kPgEpochOffsetMicros = int64_t{946'684'800} * 1'000'000;

// How long Close() waits for the server to end the stream before it drops the connection.
constexpr absl::Duration kEndStreamingTimeout = absl::Seconds(10);

using Result = ResultPtr;

struct PqFree {
  void operator()(void* p) const { PQfreemem(p); }
};

// A failed connection attempt. libpq gives no SQLSTATE here, so the few messages that mean "not
// allowed" or "not set up" are recognised by their text; everything else may pass.
absl::Status ConnectError(PGconn* conn) {
  const std::string message = OneLine(PQerrorMessage(conn));
  for (std::string_view misconfigured :
       {"pg_hba.conf", "authentication failed", "permission denied", "does not exist",
        "must be superuser or replication role", "no password supplied",
        "max_wal_senders (currently 0)"}) {
    if (message.find(misconfigured) != std::string::npos) {
      return absl::FailedPreconditionError(
          fmt::format("cannot connect for logical replication: {}", message));
    }
  }
  return absl::UnavailableError(fmt::format("cannot connect for logical replication: {}", message));
}

// A failed command: UNAVAILABLE if the connection is gone or the server says "later" (classes
// 08 connection, 53 resources, 57 operator intervention, 58 system; 55006 object in use, as a
// slot still held by a walsender that is going away), FAILED_PRECONDITION otherwise.
absl::Status CommandError(PGconn* conn, const PGresult* result, std::string_view what) {
  const char* state = result == nullptr ? nullptr : PQresultErrorField(result, PG_DIAG_SQLSTATE);
  std::string message = OneLine(result == nullptr ? nullptr : PQresultErrorMessage(result));
  if (message.empty()) message = OneLine(PQerrorMessage(conn));
  const std::string_view sqlstate = state == nullptr ? "" : state;
  const std::string text = fmt::format("{}: {}", what, message);
  if (PQstatus(conn) == CONNECTION_BAD || sqlstate.empty() || sqlstate.starts_with("08") ||
      sqlstate.starts_with("53") || sqlstate.starts_with("57") || sqlstate.starts_with("58") ||
      sqlstate == "55006") {
    return absl::UnavailableError(text);
  }
  return absl::FailedPreconditionError(fmt::format("{} (SQLSTATE {})", text, sqlstate));
}

absl::StatusOr<Result> Exec(PGconn* conn, const std::string& command, ExecStatusType expected) {
  Result result(PQexec(conn, command.c_str()));
  if (result == nullptr || PQresultStatus(result.get()) != expected) {
    return CommandError(conn, result.get(), command);
  }
  return result;
}

absl::StatusOr<PGconn*> ConnectForReplication(const std::string& dsn) {
  const char* keywords[] = {"dbname", "replication", "fallback_application_name", nullptr};
  const char* values[] = {dsn.c_str(), "database", "isowatch-pg", nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq could not allocate a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    absl::Status error = ConnectError(conn);
    PQfinish(conn);
    return error;
  }
  return conn;
}

absl::StatusOr<std::string> Literal(PGconn* conn, std::string_view text) {
  std::optional<std::string> quoted = QuoteLiteral(conn, text);
  if (!quoted) return CommandError(conn, nullptr, "quoting a literal");
  return *std::move(quoted);
}

absl::StatusOr<std::string> Identifier(PGconn* conn, std::string_view text) {
  std::unique_ptr<char, PqFree> quoted(PQescapeIdentifier(conn, text.data(), text.size()));
  if (quoted == nullptr) return CommandError(conn, nullptr, "quoting an identifier");
  return std::string(quoted.get());
}

// "schema.table" or "table", each part quoted.
absl::StatusOr<std::string> QualifiedTable(PGconn* conn, std::string_view table) {
  const size_t dot = table.find('.');
  const std::string_view schema = dot == std::string_view::npos ? "" : table.substr(0, dot);
  const std::string_view name = dot == std::string_view::npos ? table : table.substr(dot + 1);
  if (name.empty() || name.find('.') != std::string_view::npos ||
      (dot != std::string_view::npos && schema.empty())) {
    return absl::InvalidArgumentError(
        fmt::format("table '{}' is neither \"table\" nor \"schema.table\"", table));
  }
  ASSIGN_OR_RETURN(std::string quoted, Identifier(conn, name));
  if (schema.empty()) return quoted;
  ASSIGN_OR_RETURN(std::string quoted_schema, Identifier(conn, schema));
  return fmt::format("{}.{}", quoted_schema, quoted);
}

absl::Status ValidateName(std::string_view what, std::string_view name) {
  const bool ok =
      !name.empty() && name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_islower(static_cast<unsigned char>(c)) ||
               absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_';
      });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{} name '{}' must be 1-63 lower-case letters, digits or '_'", what, name));
}

std::string Value(const PGresult* result, int row, int column) {
  return PQgetisnull(result, row, column) ? "" : PQgetvalue(result, row, column);
}

// Milliseconds to poll() until `until`, at least 0.
int PollTimeoutMs(absl::Time now, absl::Time until) {
  if (until <= now) return 0;
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(until - now, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

absl::Status WaitReadable(PGconn* conn, absl::Time until) {
  pollfd fd{PQsocket(conn), POLLIN, 0};
  if (fd.fd < 0) return absl::UnavailableError("the replication connection has no socket");
  if (poll(&fd, 1, PollTimeoutMs(absl::Now(), until)) < 0 && errno != EINTR) {
    return absl::UnavailableError(
        fmt::format("poll on the replication connection: {}", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

LogicalStream::LogicalStream(ReplicationOptions options, PGconn* conn)
    : options_(std::move(options)), conn_(conn) {}

LogicalStream::~LogicalStream() { Close().IgnoreError(); }

absl::StatusOr<std::unique_ptr<LogicalStream>> LogicalStream::Open(
    const ReplicationOptions& options) {
  RETURN_IF_ERROR(ValidateName("slot", options.slot));
  RETURN_IF_ERROR(ValidateName("publication", options.publication));
  if (options.status_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("status_interval must be positive");
  }
  ASSIGN_OR_RETURN(PGconn * conn, ConnectForReplication(options.dsn));
  std::unique_ptr<LogicalStream> stream(new LogicalStream(options, conn));
  RETURN_IF_ERROR(stream->Setup());
  return stream;
}

absl::Status LogicalStream::Setup() {
  ASSIGN_OR_RETURN(Result wal_level, Exec(conn_, "SHOW wal_level", PGRES_TUPLES_OK));
  const std::string level = Value(wal_level.get(), 0, 0);
  if (level != "logical") {
    return absl::FailedPreconditionError(fmt::format(
        "the server runs with wal_level = '{}'; logical decoding needs wal_level = logical "
        "(set it in postgresql.conf and restart the server)",
        level));
  }
  RETURN_IF_ERROR(EnsurePublication());
  RETURN_IF_ERROR(EnsureSlot());
  slot_ready_ = true;
  return StartStreaming();
}

absl::Status LogicalStream::EnsurePublication() {
  ASSIGN_OR_RETURN(std::string name, Literal(conn_, options_.publication));
  ASSIGN_OR_RETURN(
      Result found,
      Exec(conn_, fmt::format("SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = {}", name),
           PGRES_TUPLES_OK));
  if (PQntuples(found.get()) > 0) return absl::OkStatus();
  if (options_.tables.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("publication '{}' does not exist and no tables were given to create it with",
                    options_.publication));
  }
  std::vector<std::string> tables;
  for (const std::string& table : options_.tables) {
    ASSIGN_OR_RETURN(std::string quoted, QualifiedTable(conn_, table));
    tables.push_back(std::move(quoted));
  }
  // Truncates are left out: a DecodedTxn cannot carry them (see PgoutputAssembler).
  const std::string create =
      fmt::format("CREATE PUBLICATION {} FOR TABLE {} WITH (publish = 'insert, update, delete')",
                  options_.publication, absl::StrJoin(tables, ", "));
  Result result(PQexec(conn_, create.c_str()));
  if (PQresultStatus(result.get()) == PGRES_COMMAND_OK) return absl::OkStatus();
  const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
  if (state != nullptr && std::string_view(state) == "42710") {
    return absl::OkStatus();  // created by someone else meanwhile
  }
  return CommandError(conn_, result.get(), create);
}

absl::Status LogicalStream::EnsureSlot() {
  ASSIGN_OR_RETURN(std::string name, Literal(conn_, options_.slot));
  const std::string query = fmt::format(
      "SELECT slot_type, plugin, database, pg_catalog.current_database(), confirmed_flush_lsn "
      "FROM pg_catalog.pg_replication_slots WHERE slot_name = {}",
      name);
  ASSIGN_OR_RETURN(Result found, Exec(conn_, query, PGRES_TUPLES_OK));
  if (PQntuples(found.get()) == 0) {
    const std::string create =
        fmt::format("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput NOEXPORT_SNAPSHOT", options_.slot);
    ASSIGN_OR_RETURN(Result created, Exec(conn_, create, PGRES_TUPLES_OK));
    ASSIGN_OR_RETURN(start_confirmed_flush_, ParseLsn(Value(created.get(), 0, 1)));
    created_slot_ = true;
    return absl::OkStatus();
  }
  const std::string type = Value(found.get(), 0, 0);
  const std::string plugin = Value(found.get(), 0, 1);
  const std::string database = Value(found.get(), 0, 2);
  const std::string current = Value(found.get(), 0, 3);
  if (type != "logical" || plugin != "pgoutput" || database != current) {
    return absl::FailedPreconditionError(fmt::format(
        "slot '{}' exists but is a {} slot with plugin '{}' on database '{}'; a logical slot "
        "with plugin 'pgoutput' on database '{}' is needed",
        options_.slot, type, plugin, database, current));
  }
  const std::string confirmed = Value(found.get(), 0, 4);
  if (!confirmed.empty()) {
    ASSIGN_OR_RETURN(start_confirmed_flush_, ParseLsn(confirmed));
  }
  return absl::OkStatus();
}

absl::Status LogicalStream::StartStreaming() {
  confirmed_ = std::max(options_.start_lsn, start_confirmed_flush_);
  reported_flush_ = confirmed_;
  const std::string start = fmt::format(
      "START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', publication_names '\"{}\"', "
      "messages 'true')",
      options_.slot, LsnToString(options_.start_lsn), options_.publication);
  RETURN_IF_ERROR(Exec(conn_, start, PGRES_COPY_BOTH).status());
  streaming_ = true;
  next_status_ = absl::Now() + options_.status_interval;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<DecodedTxn>> LogicalStream::Next(absl::Duration timeout) {
  if (!broken_.ok()) return broken_;
  if (!streaming_) return absl::FailedPreconditionError("the replication stream is closed");
  absl::StatusOr<std::optional<DecodedTxn>> txn = Receive(absl::Now() + timeout);
  if (!txn.ok()) return Fail(txn.status());
  return txn;
}

absl::StatusOr<std::optional<DecodedTxn>> LogicalStream::Receive(absl::Time deadline) {
  bool read_socket = true;  // read what the socket holds before the first wait
  for (;;) {
    RETURN_IF_ERROR(SendStatusIfDue());
    char* buffer = nullptr;
    const int size = PQgetCopyData(conn_, &buffer, /*async=*/1);
    if (size > 0) {
      std::unique_ptr<char, PqFree> owned(buffer);
      ASSIGN_OR_RETURN(std::optional<DecodedTxn> txn,
                       HandleCopyData(std::string_view(buffer, static_cast<size_t>(size))));
      if (txn.has_value()) return txn;
      continue;
    }
    if (size == -2) return CommandError(conn_, nullptr, "reading the replication stream");
    if (size == -1) {
      streaming_ = false;
      Result result(PQgetResult(conn_));
      if (result != nullptr && PQresultStatus(result.get()) == PGRES_FATAL_ERROR) {
        return CommandError(conn_, result.get(), "the server ended the replication stream");
      }
      return absl::UnavailableError("the server ended the replication stream");
    }
    if (read_socket) {
      read_socket = false;
      if (PQconsumeInput(conn_) == 0) {
        return CommandError(conn_, nullptr, "reading the replication stream");
      }
      continue;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    RETURN_IF_ERROR(WaitReadable(conn_, std::min(deadline, next_status_)));
    read_socket = true;
  }
}

absl::StatusOr<std::optional<DecodedTxn>> LogicalStream::HandleCopyData(std::string_view data) {
  internal::WireReader reader(data);
  uint8_t kind = 0;
  reader.ReadUint8(&kind);
  if (kind == 'w') {
    uint64_t wal_start = 0;
    uint64_t wal_end = 0;
    int64_t send_time = 0;
    if (!reader.ReadUint64(&wal_start) || !reader.ReadUint64(&wal_end) ||
        !reader.ReadInt64(&send_time)) {
      return absl::InvalidArgumentError("replication stream: truncated XLogData header");
    }
    received_ = std::max(received_, wal_start);
    absl::StatusOr<std::optional<DecodedTxn>> txn = assembler_.Feed(reader.ReadRest());
    if (!txn.ok()) {
      return absl::Status(txn.status().code(),
                          fmt::format("at WAL position {}: {}", LsnToString(wal_start),
                                      static_cast<std::string>(txn.status().message())));
    }
    if (txn->has_value()) last_delivered_end_ = (*txn)->end_lsn;
    return txn;
  }
  if (kind == 'k') {
    uint64_t wal_end = 0;
    int64_t send_time = 0;
    uint8_t reply_requested = 0;
    if (!reader.ReadUint64(&wal_end) || !reader.ReadInt64(&send_time) ||
        !reader.ReadUint8(&reply_requested)) {
      return absl::InvalidArgumentError("replication stream: truncated keepalive");
    }
    received_ = std::max(received_, wal_end);
    // Everything before the keepalive's position has been sent. With no transaction half-way
    // and every delivered one confirmed, nothing before it is left for the caller: let the slot
    // move on, or WAL of unpublished tables would pile up behind an idle slot.
    if (!assembler_.in_transaction() && confirmed_ >= last_delivered_end_) {
      idle_flush_ = std::max(idle_flush_, wal_end);
    }
    if (reply_requested != 0) next_status_ = absl::InfinitePast();
    return std::nullopt;
  }
  return absl::InvalidArgumentError(
      fmt::format("replication stream: unknown CopyData message {}", static_cast<int>(kind)));
}

void LogicalStream::Confirm(Lsn lsn) { confirmed_ = std::max(confirmed_, lsn); }

absl::Status LogicalStream::SendStatusIfDue() {
  if (absl::Now() < next_status_) return absl::OkStatus();
  return SendStatus();
}

absl::Status LogicalStream::SendStatus() {
  if (!streaming_) return absl::FailedPreconditionError("the replication stream is closed");
  const Lsn flush = std::max({confirmed_, idle_flush_, reported_flush_});
  const absl::Time now = absl::Now();
  std::string message;
  message.push_back('r');
  internal::AppendBigEndian(std::max(received_, flush), &message);  // written
  internal::AppendBigEndian(flush, &message);                       // flushed
  internal::AppendBigEndian(flush, &message);                       // applied
  internal::AppendBigEndian(absl::ToUnixMicros(now) - kPgEpochOffsetMicros, &message);
  message.push_back(0);  // no reply requested
  if (PQputCopyData(conn_, message.data(), static_cast<int>(message.size())) != 1 ||
      PQflush(conn_) != 0) {
    return CommandError(conn_, nullptr, "sending a standby status update");
  }
  reported_flush_ = flush;
  next_status_ = now + options_.status_interval;
  return absl::OkStatus();
}

absl::Status LogicalStream::Fail(absl::Status status) {
  broken_ = status;
  return status;
}

absl::Status LogicalStream::EndStreaming() {
  if (!streaming_) return absl::OkStatus();
  streaming_ = false;
  if (PQputCopyEnd(conn_, nullptr) != 1 || PQflush(conn_) != 0) {
    return CommandError(conn_, nullptr, "ending the replication stream");
  }
  // Drain what the server still sends until its CopyDone; it is sent again next time.
  const absl::Time deadline = absl::Now() + kEndStreamingTimeout;
  for (;;) {
    char* buffer = nullptr;
    const int size = PQgetCopyData(conn_, &buffer, /*async=*/1);
    if (size > 0) {
      PQfreemem(buffer);
      continue;
    }
    if (size == -1) break;
    if (size == -2 || absl::Now() >= deadline) {
      return absl::UnavailableError("the server did not end the replication stream");
    }
    RETURN_IF_ERROR(WaitReadable(conn_, deadline));
    if (PQconsumeInput(conn_) == 0) {
      return CommandError(conn_, nullptr, "ending the replication stream");
    }
  }
  absl::Status status = absl::OkStatus();
  while (Result result{PQgetResult(conn_)}) {
    if (PQresultStatus(result.get()) == PGRES_FATAL_ERROR) {
      status = CommandError(conn_, result.get(), "ending the replication stream");
    }
  }
  return status;
}

absl::Status LogicalStream::Close() {
  if (conn_ == nullptr) return absl::OkStatus();
  absl::Status status = absl::OkStatus();
  if (streaming_ && broken_.ok() && PQstatus(conn_) == CONNECTION_OK) {
    status = SendStatus();
    if (status.ok()) status = EndStreaming();
  }
  streaming_ = false;
  if (options_.drop_slot_on_close && slot_ready_) {
    absl::Status dropped = DropSlot();
    if (status.ok()) status = dropped;
  }
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  return status;
}

absl::Status LogicalStream::DropSlot() {
  absl::Status ended = EndStreaming();
  if (conn_ == nullptr || !ended.ok() || !broken_.ok() || PQstatus(conn_) != CONNECTION_OK) {
    // The old connection cannot take commands; the slot is free once its walsender is gone.
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = nullptr;
    ASSIGN_OR_RETURN(conn_, ConnectForReplication(options_.dsn));
    broken_ = absl::OkStatus();
  }
  return Exec(conn_, fmt::format("DROP_REPLICATION_SLOT {}", options_.slot), PGRES_COMMAND_OK)
      .status();
}

}  // namespace isowatch::pg
