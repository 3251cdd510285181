// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "collectors/common/daemon_options.h"
#include "collectors/common/lag_samples.h"
#include "collectors/tidb/cdc_input.h"
#include "collectors/tidb/client_source.h"
#include "collectors/tidb/joiner.h"

namespace isowatch::tidb {

// Opens the CDC input, resuming at `resume` (a CdcInput::ResumePosition() saved by an earlier
// run; empty on a first run).
using CdcInputFactory =
    std::function<absl::StatusOr<std::unique_ptr<CdcInput>>(const std::string& resume)>;

struct CollectorOptions {
  JoinerOptions join;
  // The client log: the workload's transactions in isowatch's native history format
  // (docs/history-format.md), with start ts, reads, writes, outcome and commit ts as the client
  // learnt them. Read by the RunCollector that takes no ClientSource.
  std::string client_log;
  // isowatchd, the state directory, batches and progress lines.
  collectors::DaemonOptions daemon;
  // Gives up when the CDC stream has not moved its release point for this long while client
  // records still wait and isowatchd takes batches (0 = wait for ever).
  absl::Duration stall_timeout = absl::ZeroDuration();
};

struct CollectorResult {
  uint32_t run = 0;
  bool resumed = false;
  uint64_t client_records = 0;
  uint64_t sent = 0;
  uint64_t batches = 0;
  uint64_t refusals = 0;      // transactions the daemon refused
  uint64_t rejected_cdc = 0;  // messages or files that did not decode
  uint64_t late_rows = 0;     // rows refused by the grouper (below the release point)
  uint64_t duplicate_rows = 0;
  uint64_t daemon_reconnects = 0;
  uint64_t input_errors = 0;          // UNAVAILABLE answers of the CDC input, each retried
  uint64_t rows = 0;                  // distinct rows the grouper kept
  uint64_t acknowledge_failures = 0;  // failed acknowledgements to the input (Kafka commits)
  Tso release_point = 0;
  Tso watermark = 0;  // the last watermark durable in the daemon
  JoinerStats join;
  double seconds = 0;
  // From a row's commit (the physical part of its TSO) to its being durable in isowatchd.
  collectors::LagSummary lag;
};

// Runs the collector (docs/collectors/tidb.md): starts the client source (a client log, or a
// workload run in-process), opens the CDC input, groups rows into transactions, joins them with
// the client records and streams them to isowatchd with watermarks. Returns once the source is
// done and every client record is durable in the daemon (the stream then ended if
// options.daemon.end_of_stream), or when `stop` is set (the stream stays open). Stops the source
// before it returns.
absl::StatusOr<CollectorResult> RunCollector(const CollectorOptions& options, ClientSource& source,
                                             const CdcInputFactory& open_input,
                                             const std::atomic<bool>* stop);
// The same with the client log options.client_log as the source.
absl::StatusOr<CollectorResult> RunCollector(const CollectorOptions& options,
                                             const CdcInputFactory& open_input,
                                             const std::atomic<bool>* stop);

}  // namespace isowatch::tidb
