// SPDX-License-Identifier: Apache-2.0
#include "tests/testing/pg_cluster.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sstream>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fmt/format.h"

#include "isowatch/common/status_macros.h"

#include "libpq-fe.h"

namespace isowatch::testing {
namespace {

constexpr const char* kBinDir = "/usr/lib/postgresql/15/bin";
constexpr absl::Duration kStartTimeout = absl::Seconds(60);
constexpr absl::Duration kStopTimeout = absl::Seconds(30);

absl::Status ErrnoError(std::string_view what) {
  return absl::InternalError(fmt::format("{}: {}", what, std::strerror(errno)));
}

// A TCP port of 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return ErrnoError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status error = ErrnoError("binding a free port");
    close(fd);
    return error;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadFile(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

// Starts `argv` with stdout and stderr appended to `log`, as `uid`/`gid` if given. The child
// gets SIGQUIT when the calling thread exits.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log,
                            std::optional<uid_t> uid, std::optional<gid_t> gid) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoError(fmt::format("opening {}", log));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return ErrnoError("fork");
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) _exit(126);
    if (gid.has_value() && (setgroups(0, nullptr) != 0 || setgid(*gid) != 0)) _exit(126);
    if (uid.has_value() && setuid(*uid) != 0) _exit(126);
    // After setuid, which clears it.
    if (prctl(PR_SET_PDEATHSIG, SIGQUIT) != 0 || getppid() != parent) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  return pid;
}

// Waits for `pid` to exit within `timeout`; kills it with SIGKILL otherwise.
absl::StatusOr<int> WaitExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return ErrnoError("waitpid");
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return absl::DeadlineExceededError(
      fmt::format("process {} did not exit within {}; killed", pid, absl::FormatDuration(timeout)));
}

}  // namespace

PgCluster::PgCluster(PgClusterOptions options, std::string dir, int port, std::optional<uid_t> uid,
                     std::optional<gid_t> gid)
    : options_(std::move(options)), dir_(std::move(dir)), port_(port), uid_(uid), gid_(gid) {}

PgCluster::~PgCluster() {
  Stop().IgnoreError();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

absl::StatusOr<std::unique_ptr<PgCluster>> PgCluster::Start(PgClusterOptions options) {
  for (const char* binary : {"initdb", "postgres"}) {
    const std::string path = fmt::format("{}/{}", kBinDir, binary);
    if (access(path.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(fmt::format(
          "{} is missing: install postgresql-15 (sudo bash deploy/setup-debian.sh)", path));
    }
  }
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  if (geteuid() == 0) {
    const passwd* user = getpwnam("postgres");
    if (user == nullptr) user = getpwnam("nobody");
    if (user == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, and neither user postgres nor nobody exists to run PostgreSQL as");
    }
    uid = user->pw_uid;
    gid = user->pw_gid;
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "isowatch-pg-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return ErrnoError("mkdtemp");
  ASSIGN_OR_RETURN(const int port, FreePort());
  std::unique_ptr<PgCluster> cluster(new PgCluster(std::move(options), pattern, port, uid, gid));
  // The Unix socket's path must fit in sockaddr_un.
  if (cluster->dir_.size() + sizeof("/.s.PGSQL.65535") > sizeof(sockaddr_un{}.sun_path)) {
    return absl::FailedPreconditionError(
        fmt::format("temporary directory {} is too long for a Unix socket path", cluster->dir_));
  }
  if (uid.has_value() && chown(cluster->dir_.c_str(), *uid, *gid) != 0) {
    return ErrnoError(fmt::format("chown {}", cluster->dir_));
  }
  RETURN_IF_ERROR(cluster->InitDb());
  RETURN_IF_ERROR(cluster->StartServer());
  return cluster;
}

std::string PgCluster::dsn(const std::string& database) const {
  return fmt::format("host=127.0.0.1 port={} user=postgres dbname={}", port_, database);
}

absl::Status PgCluster::InitDb() {
  const std::string log = dir_ + "/initdb.log";
  ASSIGN_OR_RETURN(const pid_t pid, Spawn({fmt::format("{}/initdb", kBinDir), "-D", dir_ + "/data",
                                           "-A", "trust", "-U", "postgres", "-E", "UTF8",
                                           "--locale=C", "--no-sync", "--no-instructions"},
                                          log, uid_, gid_));
  ASSIGN_OR_RETURN(const int status, WaitExit(pid, kStartTimeout));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        fmt::format("initdb failed (wait status {}):\n{}", status, ReadFile(log)));
  }
  return absl::OkStatus();
}

absl::Status PgCluster::StartServer() {
  std::vector<std::string> argv = {fmt::format("{}/postgres", kBinDir),
                                   "-D",
                                   dir_ + "/data",
                                   "-p",
                                   std::to_string(port_),
                                   "-k",
                                   dir_,
                                   "-c",
                                   "listen_addresses=127.0.0.1"};
  for (const char* setting : {"wal_level=logical", "max_replication_slots=10", "max_wal_senders=10",
                              "fsync=off", "max_connections=30"}) {
    argv.push_back("-c");
    argv.push_back(setting);
  }
  for (const std::string& setting : options_.settings) {
    argv.push_back("-c");
    argv.push_back(setting);
  }
  const std::string log = dir_ + "/server.log";
  ASSIGN_OR_RETURN(pid_, Spawn(argv, log, uid_, gid_));
  const std::string ping = dsn() + " connect_timeout=5";
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (PQping(ping.c_str()) != PQPING_OK) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(fmt::format("postgres exited (wait status {}) while starting:\n{}",
                                             status, ReadFile(log)));
    }
    if (absl::Now() >= deadline) {
      Stop().IgnoreError();
      return absl::DeadlineExceededError(
          fmt::format("postgres did not accept connections within {}:\n{}",
                      absl::FormatDuration(kStartTimeout), ReadFile(log)));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::OkStatus();
}

absl::Status PgCluster::Restart() {
  RETURN_IF_ERROR(Stop());
  return StartServer();
}

absl::Status PgCluster::Stop() {
  if (pid_ < 0) return absl::OkStatus();
  const pid_t pid = std::exchange(pid_, -1);
  // SIGQUIT: immediate shutdown; the postmaster exits after its children.
  if (kill(pid, SIGQUIT) != 0) return ErrnoError("kill postgres");
  return WaitExit(pid, kStopTimeout).status();
}

absl::StatusOr<std::unique_ptr<PgSession>> PgSession::Connect(const std::string& dsn) {
  PGconn* conn = PQconnectdb(dsn.c_str());
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    absl::Status error = absl::UnavailableError(fmt::format(
        "connecting to {}: {}", dsn, conn == nullptr ? "out of memory" : PQerrorMessage(conn)));
    PQfinish(conn);
    return error;
  }
  return std::unique_ptr<PgSession>(new PgSession(conn));
}

PgSession::~PgSession() { PQfinish(conn_); }

absl::StatusOr<std::vector<PgSession::Row>> PgSession::Query(const std::string& sql) {
  PGresult* result = PQexec(conn_, sql.c_str());
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    absl::Status error = absl::FailedPreconditionError(fmt::format(
        "{}: {}", sql,
        std::string(absl::StripTrailingAsciiWhitespace(
            result == nullptr ? PQerrorMessage(conn_) : PQresultErrorMessage(result)))));
    PQclear(result);
    return error;
  }
  std::vector<Row> rows(static_cast<size_t>(PQntuples(result)));
  for (int r = 0; r < PQntuples(result); ++r) {
    for (int c = 0; c < PQnfields(result); ++c) {
      rows[r].push_back(PQgetisnull(result, r, c)
                            ? std::nullopt
                            : std::optional<std::string>(PQgetvalue(result, r, c)));
    }
  }
  PQclear(result);
  return rows;
}

absl::Status PgSession::Exec(const std::string& sql) { return Query(sql).status(); }

absl::StatusOr<std::string> PgSession::QueryValue(const std::string& sql) {
  ASSIGN_OR_RETURN(std::vector<Row> rows, Query(sql));
  if (rows.size() != 1 || rows[0].size() != 1 || !rows[0][0].has_value()) {
    return absl::FailedPreconditionError(
        fmt::format("{}: expected one non-NULL value, got {} rows", sql, rows.size()));
  }
  return *rows[0][0];
}

}  // namespace isowatch::testing
