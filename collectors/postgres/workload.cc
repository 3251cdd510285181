// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/workload.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/history/snapshot.h"
#include "isowatch/workload/session_plan.h"

#include "collectors/postgres/pg_conn.h"

namespace isowatch::pg {

const char* IsolationName(Isolation isolation) {
  switch (isolation) {
    case Isolation::kReadCommitted:
      return "read-committed";
    case Isolation::kRepeatableRead:
      return "repeatable-read";
    case Isolation::kSerializable:
      return "serializable";
  }
  return "?";
}

std::optional<Isolation> ParseIsolation(std::string_view name) {
  for (Isolation i :
       {Isolation::kReadCommitted, Isolation::kRepeatableRead, Isolation::kSerializable}) {
    if (name == IsolationName(i)) return i;
  }
  return std::nullopt;
}

absl::StatusOr<v1::Snapshot> ParseSnapshotText(std::string_view text) {
  uint64_t xmin = 0;
  uint64_t xmax = 0;
  std::vector<uint64_t> xip;
  RETURN_IF_ERROR(history::ParseSnapshot(text, &xmin, &xmax, &xip));
  v1::Snapshot s;
  s.set_xmin(xmin);
  s.set_xmax(xmax);
  for (uint64_t x : xip) s.add_xip(x);
  return s;
}

std::string TableName(const WorkloadOptions& options) {
  return options.table_prefix + (options.data == history::DataModel::kList ? "list" : "kv");
}

namespace {

using workload::PlannedOp;

const char* BeginSql(Isolation isolation) {
  switch (isolation) {
    case Isolation::kReadCommitted:
      return "BEGIN ISOLATION LEVEL READ COMMITTED";
    case Isolation::kRepeatableRead:
      return "BEGIN ISOLATION LEVEL REPEATABLE READ";
    case Isolation::kSerializable:
      return "BEGIN ISOLATION LEVEL SERIALIZABLE";
  }
  return "BEGIN";
}

// A list as PostgreSQL prints a bigint[]: "{1,2,3}".
std::optional<std::vector<int64_t>> ParseBigintArray(absl::string_view text) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return std::nullopt;
  text = text.substr(1, text.size() - 2);
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view e : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(e, &v)) return std::nullopt;
    out.push_back(v);
  }
  return out;
}

}  // namespace

class Workload::Session {
 public:
  Session(Workload& w, uint32_t index)
      : w_(w), o_(w.options_), session_(o_.shape, index), table_(TableName(o_)) {
    const bool list = o_.data == history::DataModel::kList;
    read_sql_ = fmt::format("SELECT v FROM {} WHERE k = $1", table_);
    write_sql_ =
        list ? fmt::format(
                   "INSERT INTO {0} (k, v) VALUES ($1, ARRAY[$2::bigint]) ON CONFLICT (k) DO "
                   "UPDATE SET v = {0}.v || $2::bigint",
                   table_)
             : fmt::format(
                   "INSERT INTO {} (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = "
                   "EXCLUDED.v",
                   table_);
  }

  // A transaction aborted by a conflict runs again.
  void Run() {
    session_.Run(w_.stop_, w_.next_txn_,
                 [this](const std::vector<PlannedOp>& plan) { return RunTxn(plan); });
  }

 private:
  // Connects (again), waiting with backoff while the server is away. False once stopping.
  bool EnsureConnected() {
    if (conn_ != nullptr && PQstatus(conn_.get()) == CONNECTION_OK) return true;
    absl::Duration backoff = absl::Milliseconds(50);
    bool first = conn_ == nullptr && !connected_once_;
    while (!w_.stop_.load()) {
      absl::StatusOr<ConnPtr> c = Connect(o_.dsn);
      if (c.ok()) {
        conn_ = *std::move(c);
        if (!first) w_.stats_.reconnects.fetch_add(1);
        connected_once_ = true;
        return true;
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
    return false;
  }

  std::string Key(uint64_t k) const { return fmt::format("{}/{}", table_, k); }

  // Runs one transaction of `plan`; returns whether it was aborted by a conflict.
  bool RunTxn(const std::vector<PlannedOp>& plan) {
    if (!EnsureConnected()) return false;
    PGconn* c = conn_.get();
    w_.stats_.attempted.fetch_add(1);
    if (!o_.record) {
      ExecResult r = Exec(c, BeginSql(o_.isolation));
      if (!r.ok()) return Fail(nullptr, *r.error);
      return RunBare(plan);
    }
    // BEGIN and the snapshot in one round trip: recording costs no extra one here.
    const std::string begin =
        fmt::format("{}; SELECT pg_current_snapshot()::text, pg_current_xact_id()::text",
                    BeginSql(o_.isolation));
    ExecResult r = ExecSimple(c, begin.c_str());
    if (!r.ok()) return Fail(nullptr, *r.error);
    ClientTxn out;
    v1::Transaction& t = out.txn;
    {
      std::optional<std::string> snap = Field(r.result.get(), 0, 0);
      std::optional<std::string> xid = Field(r.result.get(), 0, 1);
      uint64_t x = 0;
      absl::StatusOr<v1::Snapshot> s =
          snap ? ParseSnapshotText(*snap) : absl::InvalidArgumentError("no snapshot");
      if (!xid || !absl::SimpleAtoi(*xid, &x) || !s.ok()) {
        Exec(c, "ROLLBACK");
        w_.stats_.aborted_other.fetch_add(1);
        return false;
      }
      t.set_xid(x);
      *t.mutable_snapshot() = *std::move(s);
    }
    t.set_session_str(session_.name());
    t.set_seq(static_cast<int64_t>(seq_));
    out.tag = fmt::format("{}:{}:{}", o_.shape.run, session_.index(), seq_);
    // The id is the tag, not the xid: an xid that never reached the WAL (its transaction was
    // in flight at a crash) is handed out again after the restart.
    t.set_id_str(out.tag);
    ++seq_;
    const bool list = o_.data == history::DataModel::kList;
    for (const PlannedOp& op : plan) {
      v1::Operation* p = t.add_ops();
      p->mutable_key()->set_bytes(Key(op.key));
      const std::optional<std::string> key_param = std::to_string(op.key);
      if (op.read) {
        p->set_kind(list ? v1::Operation::LIST_READ : v1::Operation::READ);
        const std::optional<std::string> params[] = {key_param};
        r = Exec(c, read_sql_.c_str(), params);
        if (!r.ok()) {
          t.mutable_ops()->RemoveLast();
          return Fail(&out, *r.error);
        }
        if (PQntuples(r.result.get()) == 0) continue;  // absent; an absent list is empty
        std::optional<std::string> v = Field(r.result.get(), 0, 0);
        if (!v) continue;
        if (list) {
          std::optional<std::vector<int64_t>> elems = ParseBigintArray(*v);
          if (!elems) {
            p->set_unknown(true);
            continue;
          }
          for (int64_t e : *elems) p->mutable_list()->add_elements()->set_int_(e);
        } else {
          int64_t value = 0;
          if (!absl::SimpleAtoi(*v, &value)) {
            p->set_unknown(true);
            continue;
          }
          p->mutable_value()->set_int_(value);
        }
      } else {
        const int64_t value = session_.NextValue();
        p->set_kind(list ? v1::Operation::APPEND : v1::Operation::WRITE);
        p->mutable_value()->set_int_(value);
        const std::optional<std::string> params[] = {key_param, std::to_string(value)};
        r = Exec(c, write_sql_.c_str(), params);
        if (!r.ok()) {
          // The write did not happen: it is not part of what the transaction did.
          t.mutable_ops()->RemoveLast();
          return Fail(&out, *r.error);
        }
      }
    }
    // The logical message and COMMIT in one round trip. If the message fails, COMMIT is not run
    // and the transaction waits, failed, for a ROLLBACK.
    const std::optional<std::string> prefix = QuoteLiteral(c, o_.message_prefix);
    const std::optional<std::string> tag = QuoteLiteral(c, out.tag);
    if (!prefix || !tag) return Fail(&out, SqlError{.message = "cannot quote the logical message"});
    const std::string commit =
        fmt::format("SELECT pg_logical_emit_message(true, {}, {}); COMMIT", *prefix, *tag);
    r = ExecSimple(c, commit.c_str());
    if (r.ok() && std::string_view(PQcmdStatus(r.result.get())) == "COMMIT") {
      return Finish(std::move(out), v1::Transaction::COMMITTED, false);
    }
    if (r.ok()) {  // COMMIT of a failed transaction answers ROLLBACK
      return Finish(std::move(out), v1::Transaction::ABORTED, false);
    }
    if (!r.error->connection_lost && PQtransactionStatus(c) == PQTRANS_INERROR) {
      return Fail(&out, *r.error);  // the message failed: COMMIT was not run
    }
    if (r.error->conflict()) {  // serializable's commit-time check
      return Finish(std::move(out), v1::Transaction::ABORTED, true);
    }
    // Any other failure of COMMIT (no answer, or an error such as a shutdown's, which may come
    // after the commit record is written) leaves the outcome open: ask the server, once it is
    // back if the connection broke.
    if (r.error->connection_lost) conn_.reset();
    return Finish(std::move(out), LookUpOutcome(t.xid()), false);
  }

  // The transaction of `plan` as the application would run it, unrecorded (BEGIN was sent).
  bool RunBare(const std::vector<PlannedOp>& plan) {
    PGconn* c = conn_.get();
    for (const PlannedOp& op : plan) {
      const std::optional<std::string> key = std::to_string(op.key);
      ExecResult r;
      if (op.read) {
        const std::optional<std::string> params[] = {key};
        r = Exec(c, read_sql_.c_str(), params);
      } else {
        const std::optional<std::string> params[] = {key, std::to_string(session_.NextValue())};
        r = Exec(c, write_sql_.c_str(), params);
      }
      if (!r.ok()) return Fail(nullptr, *r.error);
    }
    ExecResult r = Exec(c, "COMMIT");
    if (r.ok() && std::string_view(PQcmdStatus(r.result.get())) == "COMMIT") {
      w_.stats_.committed.fetch_add(1);
      return false;
    }
    if (r.ok() || !r.error->conflict()) {
      w_.stats_.aborted_other.fetch_add(1);
      return false;
    }
    w_.stats_.aborted_conflict.fetch_add(1);
    return true;
  }

  // A statement failed before COMMIT: the transaction is rolled back (by the server, if the
  // connection broke). `out` is null when the failure came before the transaction got its xid.
  bool Fail(ClientTxn* out, const SqlError& e) {
    if (e.connection_lost) {
      conn_.reset();  // the next transaction connects again
    } else {
      Exec(conn_.get(), "ROLLBACK");
    }
    if (out == nullptr) {
      (e.conflict() ? w_.stats_.aborted_conflict : w_.stats_.aborted_other).fetch_add(1);
      return e.conflict();
    }
    return Finish(std::move(*out), v1::Transaction::ABORTED, e.conflict());
  }

  bool Finish(ClientTxn out, v1::Transaction::Status status, bool conflict) {
    out.txn.set_status(status);
    switch (status) {
      case v1::Transaction::COMMITTED:
        w_.stats_.committed.fetch_add(1);
        break;
      case v1::Transaction::ABORTED:
        (conflict ? w_.stats_.aborted_conflict : w_.stats_.aborted_other).fetch_add(1);
        break;
      default:
        w_.stats_.unknown.fetch_add(1);
        break;
    }
    w_.sink_(std::move(out));
    return conflict;
  }

  v1::Transaction::Status LookUpOutcome(uint64_t xid) {
    while (EnsureConnected()) {
      const std::optional<std::string> params[] = {std::to_string(xid)};
      ExecResult r = Exec(conn_.get(), "SELECT pg_xact_status($1::xid8)", params);
      if (r.ok()) {
        std::optional<std::string> s = Field(r.result.get(), 0, 0);
        if (s == "committed") return v1::Transaction::COMMITTED;
        if (s == "aborted") return v1::Transaction::ABORTED;
        return v1::Transaction::UNKNOWN;
      }
      if (!r.error->connection_lost) return v1::Transaction::UNKNOWN;
      conn_.reset();
    }
    return v1::Transaction::UNKNOWN;
  }

  Workload& w_;
  const WorkloadOptions& o_;
  collectors::WorkloadSession session_;
  const std::string table_;
  std::string read_sql_;
  std::string write_sql_;
  ConnPtr conn_;
  bool connected_once_ = false;
  uint64_t seq_ = 0;
};

Workload::Workload(WorkloadOptions options, std::function<void(ClientTxn)> sink)
    : options_(std::move(options)), sink_(std::move(sink)) {}

Workload::~Workload() {
  Stop();
  Wait();
}

absl::Status Workload::Prepare(bool reset) {
  ASSIGN_OR_RETURN(ConnPtr conn, Connect(options_.dsn));
  const std::string table = TableName(options_);
  const std::string create =
      options_.data == history::DataModel::kList
          ? fmt::format("CREATE TABLE IF NOT EXISTS {} (k bigint PRIMARY KEY, v bigint[] NOT NULL)",
                        table)
          : fmt::format("CREATE TABLE IF NOT EXISTS {} (k bigint PRIMARY KEY, v bigint)", table);
  absl::Status s = ExecOrStatus(conn.get(), create.c_str());
  if (!s.ok())
    return absl::Status(s.code(), fmt::format("creating {}: {}", table, std::string(s.message())));
  if (reset) {
    const std::string truncate = fmt::format("TRUNCATE {}", table);
    s = ExecOrStatus(conn.get(), truncate.c_str());
    if (!s.ok()) {
      return absl::Status(s.code(),
                          fmt::format("emptying {}: {}", table, std::string(s.message())));
    }
  }
  return absl::OkStatus();
}

void Workload::Start() {
  for (uint32_t i = 0; i < std::max<uint32_t>(options_.shape.sessions, 1); ++i) {
    threads_.emplace_back([this, i] {
      Session s(*this, i);
      s.Run();
    });
  }
}

void Workload::Stop() { stop_.store(true); }

void Workload::Wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace isowatch::pg
