// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/mysql_conn.h"

#include <mutex>
#include <mysql.h>
#include <utility>

#include <fmt/format.h>

namespace isowatch::tidb {

std::string SqlError::ToString() const {
  if (sqlstate.empty()) return fmt::format("{} (error {})", message, code);
  return fmt::format("{} (error {}, SQLSTATE {})", message, code, sqlstate);
}

absl::Status SqlError::ToStatus() const {
  if (connection_lost()) return absl::UnavailableError(ToString());
  if (info.retryable()) return absl::AbortedError(ToString());
  return absl::FailedPreconditionError(ToString());
}

absl::StatusOr<std::unique_ptr<MysqlConn>> MysqlConn::Connect(const MysqlOptions& options) {
  // The library's global set-up is not thread-safe: done once, before any session thread's
  // first connection (mysql_init would do it lazily, racing).
  static std::once_flag init;
  std::call_once(init, [] { mysql_library_init(0, nullptr, nullptr); });
  std::unique_ptr<MysqlConn> conn(new MysqlConn(options));
  if (absl::Status s = conn->Open(); !s.ok()) return s;
  return conn;
}

MysqlConn::~MysqlConn() { Close(); }

void MysqlConn::Close() {
  if (mysql_ != nullptr) mysql_close(mysql_);
  mysql_ = nullptr;
  connected_ = false;
}

absl::Status MysqlConn::Open() {
  Close();
  mysql_ = mysql_init(nullptr);
  if (mysql_ == nullptr) return absl::ResourceExhaustedError("libmariadb: mysql_init failed");
  const unsigned int connect = options_.connect_timeout_s;
  const unsigned int read = options_.read_timeout_s;
  const unsigned int write = options_.write_timeout_s;
  if (connect > 0) mysql_options(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &connect);
  if (read > 0) mysql_options(mysql_, MYSQL_OPT_READ_TIMEOUT, &read);
  if (write > 0) mysql_options(mysql_, MYSQL_OPT_WRITE_TIMEOUT, &write);
  // Never reconnect behind the workload's back (a transaction would go on in a new session).
  const my_bool no = 0;
  mysql_options(mysql_, MYSQL_OPT_RECONNECT, &no);
  mysql_options(mysql_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  const char* socket = options_.socket.empty() ? nullptr : options_.socket.c_str();
  const char* host = socket != nullptr ? "localhost" : options_.host.c_str();
  if (mysql_real_connect(mysql_, host, options_.user.c_str(), options_.password.c_str(),
                         options_.database.empty() ? nullptr : options_.database.c_str(),
                         options_.port, socket, 0) == nullptr) {
    std::string where =
        socket != nullptr ? options_.socket : fmt::format("{}:{}", options_.host, options_.port);
    absl::Status s = absl::UnavailableError(fmt::format(
        "cannot connect to {}: {} (error {})", where, mysql_error(mysql_), mysql_errno(mysql_)));
    Close();
    return s;
  }
  connected_ = true;
  return absl::OkStatus();
}

absl::Status MysqlConn::Reconnect() { return Open(); }

SqlError MysqlConn::LastError() {
  SqlError e;
  if (mysql_ == nullptr) {
    e.code = errc::kServerGone;
    e.message = "not connected";
  } else {
    e.code = mysql_errno(mysql_);
    e.sqlstate = mysql_sqlstate(mysql_);
    e.message = mysql_error(mysql_);
    if (e.sqlstate == "00000") e.sqlstate.clear();
  }
  e.info = ClassifyError(e.code);
  if (e.connection_lost()) connected_ = false;
  return e;
}

QueryResult MysqlConn::Query(std::string_view sql) {
  QueryResult out;
  if (!connected_ || mysql_ == nullptr) {
    out.error = SqlError{.code = errc::kServerGone,
                         .message = "not connected",
                         .info = ClassifyError(errc::kServerGone)};
    return out;
  }
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) {
    out.error = LastError();
    return out;
  }
  MYSQL_RES* res = mysql_store_result(mysql_);
  if (res == nullptr) {
    // No result set: a statement without one, or an error while reading it.
    if (mysql_field_count(mysql_) != 0) out.error = LastError();
    return out;
  }
  const unsigned int fields = mysql_num_fields(res);
  while (MYSQL_ROW row = mysql_fetch_row(res)) {
    const auto* lengths = mysql_fetch_lengths(res);
    Row r(fields);
    for (unsigned int i = 0; i < fields; ++i) {
      if (row[i] != nullptr) r[i] = std::string(row[i], lengths[i]);
    }
    out.rows.push_back(std::move(r));
  }
  mysql_free_result(res);
  return out;
}

std::optional<SqlError> MysqlConn::Exec(std::string_view sql) { return Query(sql).error; }

absl::Status MysqlConn::ExecOrStatus(std::string_view sql) {
  std::optional<SqlError> e = Exec(sql);
  if (!e) return absl::OkStatus();
  absl::Status s = e->ToStatus();
  return absl::Status(s.code(), fmt::format("{}: {}", sql, std::string(s.message())));
}

std::string MysqlConn::Quote(std::string_view text) {
  std::string out(text.size() * 2 + 3, '\0');
  out[0] = '\'';
  const size_t n = mysql_ != nullptr
                       ? mysql_real_escape_string(mysql_, out.data() + 1, text.data(), text.size())
                       : mysql_escape_string(out.data() + 1, text.data(), text.size());
  // (unsigned long)-1: the character set cannot escape it; nothing of it is quoted then.
  out.resize(n <= text.size() * 2 ? n + 1 : 1);
  out.push_back('\'');
  return out;
}

}  // namespace isowatch::tidb
