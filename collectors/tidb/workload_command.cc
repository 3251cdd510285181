// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/workload_command.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <fmt/format.h>

#include "collectors/tidb/timestamp_source.h"

namespace isowatch::tidb {
namespace {

// Names written into SQL as identifiers: kept to what needs no quoting.
std::string CheckIdentifier(const std::string& s) {
  const bool ok = !s.empty() && s.size() <= 50 && !(s[0] >= '0' && s[0] <= '9') &&
                  s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
  return ok ? "" : "lower-case letters, digits and _, not starting with a digit";
}

}  // namespace

WorkloadCommand::WorkloadCommand(CLI::App& app, bool canary) : canary_(canary) {
  if (canary) {
    cmd_ = app.add_subcommand(
        "canary", "Run a slow workload on a small table of its own until stopped, and check it");
    collectors::SetCanaryShape(w_.shape, dist_);
    table_prefix_ = "isowatch_canary_";
  } else {
    cmd_ = app.add_subcommand("workload", "Drive a workload against TiDB and check it");
  }
  CLI::App* c = cmd_;
  c->add_option("--host", w_.db.host, "The server's host (TiDB, or any MySQL-protocol server)");
  c->add_option("--port", w_.db.port, "The server's port")->check(CLI::Range(1, 65535));
  c->add_option("--socket", w_.db.socket, "A Unix socket of the server, instead of --host/--port");
  c->add_option("--user", w_.db.user, "User to connect as");
  // Read from a file, never given on the command line, where others could see it.
  c->add_option("--password-file", password_file_, "File holding the user's password")
      ->check(CLI::ExistingFile);
  c->add_option("--mode", mode_, "TiDB's transaction mode: optimistic or pessimistic")
      ->check(CLI::IsMember({"optimistic", "pessimistic"}));
  c->add_option("--isolation", isolation_,
                "repeatable-read (TiDB: snapshot isolation) or read-committed (pessimistic only)")
      ->check(CLI::IsMember({"repeatable-read", "read-committed"}));
  collectors::AddWorkloadShapeFlags(*c, w_.shape, dist_);
  c->add_option("--retries", w_.shape.max_retries,
                "Times a transaction that failed with a retryable error runs again (each attempt "
                "is a transaction of its own)");
  c->add_option("--lock-wait-timeout-s", w_.lock_wait_timeout_s,
                "innodb_lock_wait_timeout of the sessions (TiDB: the pessimistic lock wait); 0 = "
                "the server's");
  c->add_option("--statement-timeout-s", w_.db.read_timeout_s,
                "Longest wait for the answer to one statement; a COMMIT that takes longer has an "
                "unknown outcome");
  c->add_option("--table-prefix", table_prefix_,
                "Prefix of the workload's table when --table is not given: <prefix>kv or "
                "<prefix>list")
      ->check(CheckIdentifier);
  c->add_option("--client-log-out", client_log_out_,
                "Also write the recorded transactions to this file (native history, JSON lines), "
                "to join them again later with --client-log or check them offline");
  c->add_option("--rate", w_.shape.rate_tps,
                "Transactions per second over all sessions (0 = no limit)")
      ->check(CLI::Range(0.0, 1e6));
  if (!canary) {
    c->add_option("--txns", w_.shape.txns,
                  "Transactions to run, retries not counted (0 = until stopped)");
  }
  c->add_flag("--bare", bare_,
              "Run the transactions as the application would without a collector: no timestamp "
              "queries, nothing recorded or sent (to measure the collector's cost)");
  // Tests only: a server without TiDB's timestamp oracle (MariaDB) gets timestamps from a
  // process-wide counter of the wall clock (timestamp_source.h). Hidden from --help.
  c->add_flag("--testing-fake-tso", fake_tso_,
              "Tests only: timestamps from a local oracle, for servers that are not TiDB")
      ->group("");
}

absl::StatusOr<WorkloadOptions> WorkloadCommand::Configure(const CLI::App& app,
                                                           CollectorOptions& collector) {
  WorkloadOptions o = w_;
  o.mode = *ParseTxnMode(mode_);
  o.isolation = *ParseIsolation(isolation_);
  collectors::ApplyWorkloadDist(dist_, o.shape);
  o.data = collector.join.data;
  o.db.database = collector.join.schema;
  if (std::string e = CheckIdentifier(o.db.database); !e.empty()) {
    return absl::InvalidArgumentError(fmt::format("--schema {}: {}", o.db.database, e));
  }
  o.table =
      app.count("--table") > 0 ? collector.join.table : DefaultTableName(table_prefix_, o.data);
  if (std::string e = CheckIdentifier(o.table); !e.empty()) {
    return absl::InvalidArgumentError(fmt::format("--table {}: {}", o.table, e));
  }
  collector.join.table = o.table;
  if (!password_file_.empty()) {
    std::ifstream in(password_file_);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return absl::InvalidArgumentError(fmt::format("cannot read {}", password_file_));
    o.db.password = std::string(absl::StripTrailingAsciiWhitespace(text.str()));
  }
  if (canary_) {
    if (app.count("--stream") == 0) collector.join.stream = "tidb-canary";
    if (app.count("--state-dir") == 0) collector.daemon.state_dir = "isowatch-tidb-canary-state";
    collector.daemon.end_of_stream = false;
  }
  if (o.isolation == Isolation::kReadCommitted && o.mode == TxnMode::kOptimistic) {
    fmt::print(stderr,
               "isowatch-tidb: read committed takes effect in pessimistic mode only; optimistic "
               "transactions stay at repeatable read (snapshot isolation)\n");
  }
  return o;
}

std::unique_ptr<WorkloadSource> WorkloadCommand::MakeSource(const WorkloadOptions& options) const {
  std::shared_ptr<TimestampSource> ts =
      fake_tso_ || bare_ ? MakeFakeTimestamps(std::make_shared<FakeTso>()) : MakeTidbTimestamps();
  return std::make_unique<WorkloadSource>(options, std::move(ts),
                                          bare_ ? std::string() : client_log_out_);
}

std::string WorkloadCommand::Summary(const WorkloadStats& s, double seconds) {
  return fmt::format(
      "{} transactions in {:.1f} s: {} committed, {} aborted by conflicts, {} aborted otherwise, "
      "{} unknown; {} unrecorded (failed before their start ts), {} committed without a commit "
      "ts, {} start ts mismatches, {} reconnects",
      s.attempted.load(), seconds, s.committed.load(), s.aborted_conflict.load(),
      s.aborted_other.load(), s.unknown.load(), s.unrecorded.load(), s.no_commit_ts.load(),
      s.start_ts_mismatches.load(), s.reconnects.load());
}

int WorkloadCommand::RunRecordOnly(const WorkloadOptions& options,
                                   const std::atomic<bool>* stop) const {
  if (client_log_out_.empty() && !bare_) {
    fmt::print(stderr,
               "isowatch-tidb: without --to and a changefeed, the workload only records: give "
               "--client-log-out FILE\n");
    return 2;
  }
  const absl::Time started = absl::Now();
  std::unique_ptr<WorkloadSource> source = MakeSource(options);
  if (absl::Status s = source->Start(/*run=*/1); !s.ok()) {
    fmt::print(stderr, "isowatch-tidb: {}\n", std::string(s.message()));
    return 1;
  }
  bool stopped = false;
  while (true) {
    if (!stopped && stop != nullptr && stop->load()) {
      source->Stop();  // the sessions finish their transaction: the log keeps every attempt
      stopped = true;
    }
    absl::StatusOr<ClientSource::Polled> p = source->Poll();
    if (!p.ok()) {
      fmt::print(stderr, "isowatch-tidb: {}\n", std::string(p.status().message()));
      source->Stop();
      return 1;
    }
    if (p->done) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  const std::string summary =
      Summary(source->stats(), absl::ToDoubleSeconds(absl::Now() - started));
  if (bare_) {
    fmt::print("isowatch-tidb: workload, {}; bare, nothing recorded\n", summary);
  } else {
    fmt::print("isowatch-tidb: workload, {}; {} records written to {}\n", summary,
               source->records(), client_log_out_);
  }
  return 0;
}

}  // namespace isowatch::tidb
