// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/workload.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/workload/session_plan.h"

#include "collectors/tidb/list_text.h"

namespace isowatch::tidb {

const char* TxnModeName(TxnMode mode) {
  return mode == TxnMode::kOptimistic ? "optimistic" : "pessimistic";
}

std::optional<TxnMode> ParseTxnMode(std::string_view name) {
  for (TxnMode m : {TxnMode::kOptimistic, TxnMode::kPessimistic}) {
    if (name == TxnModeName(m)) return m;
  }
  return std::nullopt;
}

const char* IsolationName(Isolation isolation) {
  return isolation == Isolation::kReadCommitted ? "read-committed" : "repeatable-read";
}

std::optional<Isolation> ParseIsolation(std::string_view name) {
  for (Isolation i : {Isolation::kRepeatableRead, Isolation::kReadCommitted}) {
    if (name == IsolationName(i)) return i;
  }
  return std::nullopt;
}

std::string DefaultTableName(std::string_view prefix, history::DataModel data) {
  return fmt::format("{}{}", prefix, data == history::DataModel::kList ? "list" : "kv");
}

namespace {

using workload::PlannedOp;

constexpr Tso kEnded = std::numeric_limits<Tso>::max();

// What became of one attempt, and whether to run the transaction again.
struct Attempt {
  bool retry = false;
};

}  // namespace

class Workload::Session {
 public:
  Session(Workload& w, uint32_t index)
      : w_(w),
        o_(w.options_),
        session_(o_.shape, index),
        clock_(w.timestamps_->NewSession()),
        list_(o_.data == history::DataModel::kList) {}

  void Run() {
    session_.Run(w_.stop_, w_.next_txn_,
                 [this](const std::vector<PlannedOp>& plan) { return RunTxn(plan).retry; });
  }

 private:
  // Connects (again) and sets the session up, waiting with backoff while the server is away.
  // False once stopping.
  bool EnsureConnected() {
    if (conn_ != nullptr && conn_->connected()) return true;
    absl::Duration backoff = absl::Milliseconds(50);
    while (!w_.stop_.load(std::memory_order_relaxed)) {
      absl::Status s;
      if (conn_ == nullptr) {
        absl::StatusOr<std::unique_ptr<MysqlConn>> c = MysqlConn::Connect(o_.db);
        s = c.status();
        if (c.ok()) conn_ = *std::move(c);
      } else {
        s = conn_->Reconnect();
      }
      if (s.ok()) s = SetUp();
      if (s.ok()) {
        if (connected_once_) w_.stats_.reconnects.fetch_add(1, std::memory_order_relaxed);
        connected_once_ = true;
        return true;
      }
      spdlog::warn("session {}: {}", session_.name(), s.ToString());
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
    return false;
  }

  absl::Status SetUp() {
    RETURN_IF_ERROR(
        conn_->ExecOrStatus(o_.isolation == Isolation::kReadCommitted
                                ? "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
                                : "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
    if (w_.timestamps_->tidb()) {
      RETURN_IF_ERROR(conn_->ExecOrStatus(
          fmt::format("SET SESSION tidb_txn_mode = '{}'", TxnModeName(o_.mode))));
    }
    if (o_.lock_wait_timeout_s > 0) {
      RETURN_IF_ERROR(conn_->ExecOrStatus(
          fmt::format("SET SESSION innodb_lock_wait_timeout = {}", o_.lock_wait_timeout_s)));
    }
    return absl::OkStatus();
  }

  // A statement failed before the transaction had its start ts: nothing is recorded.
  Attempt FailUnrecorded(const SqlError& e) {
    // A broken connection is opened again, with backoff, by EnsureConnected.
    if (!e.connection_lost()) conn_->Exec("ROLLBACK");
    w_.stats_.unrecorded.fetch_add(1, std::memory_order_relaxed);
    (e.info.conflict() ? w_.stats_.aborted_conflict : w_.stats_.aborted_other)
        .fetch_add(1, std::memory_order_relaxed);
    return Attempt{.retry = e.info.retryable()};
  }

  // A statement failed after the start ts and before COMMIT: the transaction is rolled back (by
  // the server, if the connection broke: a server rolls back what a lost session left open).
  Attempt Fail(v1::Transaction txn, const SqlError& e) {
    if (!e.connection_lost()) conn_->Exec("ROLLBACK");
    spdlog::debug("session {}: {} aborted: {}", session_.name(), txn.id_str(), e.ToString());
    Finish(std::move(txn), v1::Transaction::ABORTED, e.info.conflict());
    return Attempt{.retry = e.info.retryable()};
  }

  void Finish(v1::Transaction txn, v1::Transaction::Status status, bool conflict) {
    txn.set_status(status);
    switch (status) {
      case v1::Transaction::COMMITTED:
        w_.stats_.committed.fetch_add(1, std::memory_order_relaxed);
        break;
      case v1::Transaction::ABORTED:
        (conflict ? w_.stats_.aborted_conflict : w_.stats_.aborted_other)
            .fetch_add(1, std::memory_order_relaxed);
        break;
      default:
        w_.stats_.unknown.fetch_add(1, std::memory_order_relaxed);
        break;
    }
    const Tso start = static_cast<Tso>(txn.start().physical());
    w_.sink_(std::move(txn));
    // Release: the record is in the sink before a reader sees the floor past it.
    w_.floors_[session_.index()].store(start, std::memory_order_release);
  }

  // Runs one attempt of `plan` and records it.
  Attempt RunTxn(const std::vector<PlannedOp>& plan) {
    if (!EnsureConnected()) return Attempt{};
    MysqlConn& c = *conn_;
    w_.stats_.attempted.fetch_add(1, std::memory_order_relaxed);
    if (std::optional<SqlError> e = c.Exec("BEGIN")) return FailUnrecorded(*e);
    const TsoResult start = clock_->StartTs(&c);
    if (!start.ok()) return FailUnrecorded(*start.error);
    v1::Transaction t;
    const std::string id = fmt::format("{}:{}:{}", o_.shape.run, session_.index(), seq_);
    t.set_id_str(id);
    t.set_session_str(session_.name());
    t.set_seq(static_cast<int64_t>(seq_));
    t.mutable_start()->set_physical(static_cast<int64_t>(start.ts));
    ++seq_;
    const std::string quoted_id = c.Quote(id);
    bool wrote = false;
    for (const PlannedOp& op : plan) {
      v1::Operation* p = t.add_ops();
      p->mutable_key()->set_int_(static_cast<int64_t>(op.key));
      if (op.read) {
        p->set_kind(list_ ? v1::Operation::LIST_READ : v1::Operation::READ);
        QueryResult r = c.Query(fmt::format("SELECT v FROM {} WHERE k = {}", o_.table, op.key));
        if (!r.ok()) {
          t.mutable_ops()->RemoveLast();  // the read did not happen
          return Fail(std::move(t), *r.error);
        }
        if (r.rows.empty() || r.rows[0].empty() || !r.rows[0][0]) continue;  // absent, or empty
        const std::string& text = *r.rows[0][0];
        if (list_) {
          std::optional<std::vector<int64_t>> elements = ParseListText(text);
          if (!elements) {
            p->set_unknown(true);
            continue;
          }
          for (int64_t e : *elements) p->mutable_list()->add_elements()->set_int_(e);
        } else {
          int64_t value = 0;
          if (!absl::SimpleAtoi(text, &value)) {
            p->set_unknown(true);
            continue;
          }
          p->mutable_value()->set_int_(value);
        }
      } else {
        const int64_t value = session_.NextValue();
        p->set_kind(list_ ? v1::Operation::APPEND : v1::Operation::WRITE);
        p->mutable_value()->set_int_(value);
        const std::string sql =
            list_ ? fmt::format(
                        "INSERT INTO {0} (k, v, t) VALUES ({1}, '{2}', {3}) ON DUPLICATE KEY "
                        "UPDATE v = CONCAT(v, ',', VALUES(v)), t = VALUES(t)",
                        o_.table, op.key, value, quoted_id)
                  : fmt::format(
                        "INSERT INTO {0} (k, v, t) VALUES ({1}, {2}, {3}) ON DUPLICATE KEY "
                        "UPDATE v = VALUES(v), t = VALUES(t)",
                        o_.table, op.key, value, quoted_id);
        if (std::optional<SqlError> e = c.Exec(sql)) {
          t.mutable_ops()->RemoveLast();  // the write did not happen
          return Fail(std::move(t), *e);
        }
        wrote = true;
      }
    }
    clock_->BeforeCommit();
    if (std::optional<SqlError> e = c.Exec("COMMIT")) {
      // Whatever the error says, the outcome is not guessed: the changefeed decides it.
      if (!e->connection_lost()) conn_->Exec("ROLLBACK");
      spdlog::debug("session {}: COMMIT of {}: {}", session_.name(), id, e->ToString());
      Finish(std::move(t), v1::Transaction::UNKNOWN, false);
      return Attempt{.retry = e->info.retryable()};
    }
    const CommitTsResult info = clock_->AfterCommit(&c, wrote);
    if (!info.ok()) {
      // Committed; its commit ts is for the changefeed to say.
      w_.stats_.no_commit_ts.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("session {}: committed {} but its commit ts is not known: {}", session_.name(),
                   id, info.error->ToString());
    } else {
      if (info.info.start_ts != start.ts) {
        w_.stats_.start_ts_mismatches.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn(
            "session {}: {} started at {} by @@tidb_current_ts, at {} by "
            "@@tidb_last_txn_info",
            session_.name(), id, start.ts, info.info.start_ts);
      }
      if (info.info.commit_ts != 0) {
        t.mutable_commit()->set_physical(static_cast<int64_t>(info.info.commit_ts));
      } else if (wrote) {
        w_.stats_.no_commit_ts.fetch_add(1, std::memory_order_relaxed);
      }
    }
    Finish(std::move(t), v1::Transaction::COMMITTED, false);
    return Attempt{};
  }

  Workload& w_;
  const WorkloadOptions& o_;
  collectors::WorkloadSession session_;
  std::unique_ptr<SessionClock> clock_;
  const bool list_;
  std::unique_ptr<MysqlConn> conn_;
  bool connected_once_ = false;
  uint64_t seq_ = 0;
};

Workload::Workload(WorkloadOptions options, std::shared_ptr<TimestampSource> timestamps,
                   std::function<void(v1::Transaction)> sink)
    : options_(std::move(options)), timestamps_(std::move(timestamps)), sink_(std::move(sink)) {
  session_count_ = std::max<uint32_t>(options_.shape.sessions, 1);
  floors_ = std::make_unique<std::atomic<Tso>[]>(session_count_);
  for (uint32_t i = 0; i < session_count_; ++i) floors_[i].store(0);
}

Workload::~Workload() {
  Stop();
  Wait();
}

absl::Status Workload::Prepare(bool reset) {
  MysqlOptions server = options_.db;
  server.database.clear();
  ASSIGN_OR_RETURN(std::unique_ptr<MysqlConn> conn, MysqlConn::Connect(server));
  if (!options_.db.database.empty()) {
    RETURN_IF_ERROR(
        conn->ExecOrStatus(fmt::format("CREATE DATABASE IF NOT EXISTS {}", options_.db.database)));
    RETURN_IF_ERROR(conn->ExecOrStatus(fmt::format("USE {}", options_.db.database)));
  }
  const bool list = options_.data == history::DataModel::kList;
  RETURN_IF_ERROR(conn->ExecOrStatus(
      fmt::format("CREATE TABLE IF NOT EXISTS {} (k BIGINT PRIMARY KEY, v {}, t VARCHAR(64))",
                  options_.table, list ? "LONGTEXT" : "BIGINT")));
  if (reset) RETURN_IF_ERROR(conn->ExecOrStatus(fmt::format("TRUNCATE TABLE {}", options_.table)));
  return absl::OkStatus();
}

void Workload::Start() {
  for (uint32_t i = 0; i < session_count_; ++i) {
    threads_.emplace_back([this, i] {
      {
        Session s(*this, i);
        s.Run();
      }
      floors_[i].store(kEnded, std::memory_order_release);
      ended_.fetch_add(1, std::memory_order_acq_rel);
    });
  }
}

void Workload::Stop() { stop_.store(true, std::memory_order_relaxed); }

void Workload::Wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool Workload::done() const {
  return !threads_.empty() && ended_.load(std::memory_order_acquire) == session_count_;
}

Tso Workload::Floor() const {
  Tso floor = kEnded;
  for (uint32_t i = 0; i < session_count_; ++i) {
    floor = std::min(floor, floors_[i].load(std::memory_order_acquire));
  }
  return floor;
}

absl::StatusOr<Tso> Workload::FreshTs() {
  ASSIGN_OR_RETURN(std::unique_ptr<MysqlConn> conn, MysqlConn::Connect(options_.db));
  std::unique_ptr<SessionClock> clock = timestamps_->NewSession();
  if (std::optional<SqlError> e = conn->Exec("BEGIN")) return e->ToStatus();
  TsoResult ts = clock->StartTs(conn.get());
  conn->Exec("ROLLBACK");
  if (!ts.ok()) return ts.error->ToStatus();
  return ts.ts;
}

}  // namespace isowatch::tidb
