// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "collectors/tidb/collector.h"
#include "collectors/tidb/workload.h"
#include "collectors/tidb/workload_source.h"

namespace isowatch::tidb {

// The `workload` and `canary` subcommands of isowatch-tidb (docs/collectors/tidb.md, "Workload"):
// their own flags (the server, the workload's shape), beside the collector's flags of the parent
// command, which they fall through to (--to, --kafka, --storage-dir, --schema, --table, --data,
// --stream, --state-dir, TLS). With no changefeed and no --to, the workload only records its
// transactions to --client-log-out.
class WorkloadCommand {
 public:
  // Adds the subcommand to `app` (`canary`: the slow one that runs until stopped).
  WorkloadCommand(CLI::App& app, bool canary);

  bool parsed() const { return cmd_->parsed(); }
  bool canary() const { return canary_; }

  // The workload's options from the flags and the parent's `collector` options (the database is
  // --schema, the table --table or <prefix>kv/list, the data model --data). Also fills the
  // collector options the subcommand sets: the table, and for a canary the stream and state
  // directory unless given, and an open stream at the end. Errors: InvalidArgument (bad flags,
  // an unreadable password file).
  absl::StatusOr<WorkloadOptions> Configure(const CLI::App& app, CollectorOptions& collector);

  // The source the collector runs on, with the timestamps the flags choose (--bare: the local
  // oracle, which asks the server nothing).
  std::unique_ptr<WorkloadSource> MakeSource(const WorkloadOptions& options) const;

  // Only records: runs the workload (run 1, its table emptied first) and writes its transactions
  // to --client-log-out, until it is done or `stop` is set; with --bare, runs it without
  // timestamp queries and records nothing. Returns the exit status.
  int RunRecordOnly(const WorkloadOptions& options, const std::atomic<bool>* stop) const;

  // One line of the workload's counters, for the summary.
  static std::string Summary(const WorkloadStats& s, double seconds);

  const std::string& client_log_out() const { return client_log_out_; }
  bool bare() const { return bare_; }

 private:
  bool canary_;
  CLI::App* cmd_ = nullptr;
  WorkloadOptions w_;
  std::string mode_ = "pessimistic";
  std::string isolation_ = "repeatable-read";
  std::string dist_ = "zipfian";
  std::string table_prefix_ = "isowatch_";
  std::string password_file_;
  std::string client_log_out_;
  bool fake_tso_ = false;
  bool bare_ = false;
};

}  // namespace isowatch::tidb
