// SPDX-License-Identifier: Apache-2.0
//
// isowatch-pg: the PostgreSQL collector (docs/collectors/postgres.md). Drives a workload (or a
// slow canary) against PostgreSQL, records each transaction's snapshot, xid, reads and writes,
// joins them with the commit order from logical decoding and streams them to isowatchd.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "isowatch/common/stop_signals.h"

#include "collectors/common/daemon_flags.h"
#include "collectors/postgres/collector.h"
#include "collectors/postgres/replication_feed.h"
#include "collectors/postgres/workload.h"

namespace {

using isowatch::pg::CollectorOptions;

struct Flags {
  std::string dsn;
  std::string isolation = "repeatable-read";
  std::string dist = "zipfian";
  std::string data = "kv";
  std::string slot;
  std::string publication;
  bool drop_slot = false;
  bool keep_open = false;
  bool bare = false;
  isowatch::collectors::DaemonFlags daemon;
  CollectorOptions o;
};

void AddCommon(CLI::App* cmd, Flags& f) {
  cmd->add_option("--dsn", f.dsn, "libpq connection string of the database")->required();
  isowatch::collectors::AddDaemonFlags(*cmd, f.daemon, f.o.daemon, /*to_required=*/false);
  isowatch::collectors::AddWorkloadShapeFlags(*cmd, f.o.workload.shape, f.dist);
  cmd->add_option("--data", f.data, "Data model: kv (registers) or list (appends)")
      ->check(CLI::IsMember({"kv", "list"}));
  cmd->add_option("--retries", f.o.workload.shape.max_retries,
                  "Times a transaction aborted by a serialization failure or deadlock runs again");
  cmd->add_option("--stream", f.o.stream, "Name of the stream in isowatchd");
  cmd->add_option("--slot", f.slot, "Logical replication slot (created if missing)");
  cmd->add_option("--publication", f.publication, "Publication (created if missing)");
  cmd->add_flag("--drop-slot", f.drop_slot, "Drop the replication slot at the end");
  cmd->add_option("--table-prefix", f.o.workload.table_prefix,
                  "Prefix of the workload's table: <prefix>kv or <prefix>list")
      ->check([](const std::string& s) -> std::string {
        // It is written into SQL as an identifier: keep it to what needs no quoting.
        const bool ok =
            !s.empty() && s.size() <= 50 && !(s[0] >= '0' && s[0] <= '9') &&
            s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
        return ok ? "" : "lower-case letters, digits and _, not starting with a digit";
      });
}

std::atomic<bool> g_stop{false};

// The workload alone, unrecorded and uncollected, as the application would run it.
int RunBare(const CollectorOptions& o) {
  isowatch::pg::WorkloadOptions wo = o.workload;
  wo.record = false;
  isowatch::pg::Workload workload(wo, [](const isowatch::pg::ClientTxn&) {});
  if (absl::Status s = workload.Prepare(/*reset=*/false); !s.ok()) {
    fmt::print(stderr, "isowatch-pg: {}\n", std::string(s.message()));
    return 1;
  }
  const absl::Time start = absl::Now();
  workload.Start();
  std::thread watcher([&] {
    while (!g_stop.load()) absl::SleepFor(absl::Milliseconds(50));
    workload.Stop();
  });
  workload.Wait();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  g_stop.store(true);
  watcher.join();
  const isowatch::pg::WorkloadStats& s = workload.stats();
  fmt::print(
      "isowatch-pg: bare, {} transactions in {:.1f} s: {} committed, {} aborted by "
      "conflicts, {} aborted otherwise; {:.0f} transactions/s\n",
      s.attempted.load(), seconds, s.committed.load(), s.aborted_conflict.load(),
      s.aborted_other.load(), static_cast<double>(s.attempted.load()) / seconds);
  return 0;
}

int Run(Flags& f, bool canary) {
  CollectorOptions o = f.o;
  o.workload.dsn = f.dsn;
  o.workload.isolation = *isowatch::pg::ParseIsolation(f.isolation);
  isowatch::collectors::ApplyWorkloadDist(f.dist, o.workload.shape);
  o.workload.data = f.data == "list" ? isowatch::history::DataModel::kList
                                     : isowatch::history::DataModel::kKeyValue;
  o.daemon.end_of_stream = !canary && !f.keep_open;
  if (f.bare) return RunBare(o);
  if (f.daemon.to.empty()) {
    fmt::print(stderr, "isowatch-pg: --to HOST:PORT (isowatchd's gRPC port) is required\n");
    return 2;
  }
  if (absl::Status s = isowatch::collectors::ApplyDaemonFlags(f.daemon, o.daemon); !s.ok()) {
    fmt::print(stderr, "isowatch-pg: {}\n", std::string(s.message()));
    return 2;
  }
  isowatch::pg::FeedOptions feed{.dsn = f.dsn,
                                 .slot = f.slot,
                                 .publication = f.publication,
                                 .tables = {isowatch::pg::TableName(o.workload)}};
  absl::StatusOr<isowatch::pg::CollectorResult> r =
      isowatch::pg::RunCollector(o, isowatch::pg::LogicalFeedFactory(feed), &g_stop);
  if (!r.ok()) {
    fmt::print(stderr, "isowatch-pg: {}\n", std::string(r.status().message()));
    return 1;
  }
  fmt::print(
      "isowatch-pg: run {} ({}), {} transactions in {:.1f} s: {} committed, {} aborted by "
      "conflicts, {} aborted otherwise, {} unknown; sent {} in {} batches, {} refused; joined "
      "{}, decoded only {}, write mismatches {}; reconnects: sessions {}, decoding {}, "
      "isowatchd {}; commit to durable in isowatchd: p50 {:.3f} s, p99 {:.3f} s, max {:.3f} s\n",
      r->run, r->resumed ? "resumed" : "new", r->attempted, r->seconds, r->committed,
      r->aborted_conflict, r->aborted_other, r->unknown, r->sent, r->batches, r->refusals,
      r->join.joined, r->join.decoded_only, r->join.write_mismatches, r->session_reconnects,
      r->feed_reconnects, r->daemon_reconnects, r->lag.p50, r->lag.p99, r->lag.max);
  if (f.drop_slot && !g_stop.load()) {
    absl::Status s = isowatch::pg::DropFeedSlot(feed);
    if (!s.ok()) {
      fmt::print(stderr, "isowatch-pg: dropping slot {}: {}\n", f.slot, std::string(s.message()));
      return 1;
    }
  }
  return r->refusals == 0 && r->join.write_mismatches == 0 ? 0 : 1;
}

}  // namespace

// Only CLI11 throws (docs/style.md, item 4), and its parse errors are caught here. Anything else
// that could escape (an option declared twice, std::bad_alloc) is a bug, which std::terminate
// reports.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  // SIGTERM and SIGINT end the run cleanly.
  isowatch::SetOnStopSignal(&g_stop);

  CLI::App app("isowatch-pg: checks a PostgreSQL database with isowatchd");
  app.require_subcommand(1);
  Flags workload;
  workload.o.stream = "postgres";
  workload.slot = "isowatch";
  workload.publication = "isowatch";
  workload.o.daemon.state_dir = "isowatch-pg-state";
  CLI::App* w = app.add_subcommand("workload", "Drive a workload and check it");
  AddCommon(w, workload);
  w->add_option("--isolation", workload.isolation,
                "read-committed, repeatable-read or serializable")
      ->required()
      ->check(CLI::IsMember({"read-committed", "repeatable-read", "serializable"}));
  w->add_option("--txns", workload.o.workload.shape.txns,
                "Transactions to run, retries not counted (0 = until stopped)");
  w->add_option("--rate", workload.o.workload.shape.rate_tps,
                "Transactions per second (0 = as fast as possible)");
  w->add_flag("--keep-open", workload.keep_open, "Do not end the stream when the workload ends");
  w->add_flag("--bare", workload.bare,
              "Run the workload without recording or collecting it (to measure the overhead)");

  Flags canary;
  canary.o.stream = "canary";
  canary.slot = "isowatch_canary";
  canary.publication = "isowatch_canary";
  canary.o.daemon.state_dir = "isowatch-pg-canary-state";
  canary.o.workload.table_prefix = "isowatch_canary_";
  isowatch::collectors::SetCanaryShape(canary.o.workload.shape, canary.dist);
  CLI::App* c =
      app.add_subcommand("canary", "Run a slow workload on a dedicated small table until stopped");
  AddCommon(c, canary);
  c->add_option("--isolation", canary.isolation, "read-committed, repeatable-read or serializable")
      ->check(CLI::IsMember({"read-committed", "repeatable-read", "serializable"}));
  c->add_option("--rate", canary.o.workload.shape.rate_tps, "Transactions per second")
      ->check(CLI::Range(0.001, 100000.0));

  CLI11_PARSE(app, argc, argv);
  if (w->parsed()) return Run(workload, false);
  return Run(canary, true);
}
