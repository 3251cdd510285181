// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

typedef struct pg_conn PGconn;

namespace isowatch::testing {

struct PgClusterOptions {
  // Server settings "name=value" passed as `-c`, after the defaults (so they override them):
  // wal_level=logical, max_replication_slots=10, max_wal_senders=10, fsync=off.
  std::vector<std::string> settings;
};

// A throwaway PostgreSQL 15 server for tests: initdb into a fresh temporary directory (trust
// authentication, superuser "postgres"), then `postgres` listening on 127.0.0.1 at a free port
// and on a Unix socket in that directory. The PostgreSQL binaries are those of the Debian
// package postgresql-15 (deploy/setup-debian.sh); without them Start() fails.
//
// PostgreSQL refuses to run as root: under root, initdb and postgres run as the user
// "postgres" (which the package creates), or "nobody", owning the directory.
//
// The server runs until Stop() or the destructor (immediate shutdown, then the directory is
// removed). It also gets SIGQUIT if the thread that started it exits, so a crashed test does
// not leave it behind. Thread-compatible.
class PgCluster {
 public:
  static absl::StatusOr<std::unique_ptr<PgCluster>> Start(PgClusterOptions options = {});

  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;
  ~PgCluster();

  // "host=127.0.0.1 port=N user=postgres dbname=<database>".
  std::string dsn(const std::string& database = "postgres") const;
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  // Immediate shutdown (as a crash: no checkpoint), then the server starts again on the same
  // directory and port and recovers from its WAL.
  absl::Status Restart();

  // Immediate shutdown. Idempotent.
  absl::Status Stop();

 private:
  PgCluster(PgClusterOptions options, std::string dir, int port, std::optional<uid_t> uid,
            std::optional<gid_t> gid);

  absl::Status InitDb();
  absl::Status StartServer();

  PgClusterOptions options_;
  std::string dir_;  // owned: removed by the destructor
  int port_;
  std::optional<uid_t> uid_;  // run the binaries as this user (when root)
  std::optional<gid_t> gid_;
  pid_t pid_ = -1;  // the postmaster, or -1
};

// One ordinary libpq session to a PgCluster, for test statements. Thread-compatible.
class PgSession {
 public:
  using Row = std::vector<std::optional<std::string>>;

  static absl::StatusOr<std::unique_ptr<PgSession>> Connect(const std::string& dsn);

  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;
  ~PgSession();

  // Runs `sql` (one or more statements, simple query protocol) and returns the rows of the last
  // result (NULL as std::nullopt). FAILED_PRECONDITION with the server's message on error.
  absl::StatusOr<std::vector<Row>> Query(const std::string& sql);

  // Query() for statements whose rows do not matter.
  absl::Status Exec(const std::string& sql);

  // The single value of a one-row, one-column query.
  absl::StatusOr<std::string> QueryValue(const std::string& sql);

 private:
  explicit PgSession(PGconn* conn) : conn_(conn) {}

  PGconn* conn_;  // owned
};

}  // namespace isowatch::testing
