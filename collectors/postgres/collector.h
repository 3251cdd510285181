// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "collectors/common/daemon_options.h"
#include "collectors/common/lag_samples.h"
#include "collectors/postgres/decoded_txn.h"
#include "collectors/postgres/joiner.h"
#include "collectors/postgres/workload.h"

namespace isowatch::pg {

// Committed transactions in commit order, from logical decoding (replication.h), behind an
// interface so the collector can be tested without a server.
class CommitFeed {
 public:
  virtual ~CommitFeed() = default;
  // The next committed transaction, or nullopt when none came within `timeout`. Errors:
  // Unavailable (the connection broke: open a new feed, which starts again after the last
  // confirmed position), anything else is fatal.
  virtual absl::StatusOr<std::optional<DecodedTxn>> Next(absl::Duration timeout) = 0;
  // Everything ending at or below `lsn` is durable downstream: the server may recycle its WAL.
  virtual void Confirm(Lsn lsn) = 0;
  // Tells the server the consumer is alive (and what is confirmed) while the collector does not
  // call Next, so that it does not time the connection out. Errors as Next.
  virtual absl::Status KeepAlive() = 0;
};
using CommitFeedFactory = std::function<absl::StatusOr<std::unique_ptr<CommitFeed>>()>;

struct CollectorOptions {
  WorkloadOptions workload;
  // isowatchd, the state directory, batches and progress lines.
  collectors::DaemonOptions daemon;
  std::string stream = "postgres";
  // After the workload is done, how long to wait for the commits of transactions whose outcome
  // is unknown before sending them as UNKNOWN.
  absl::Duration unknown_grace = absl::Seconds(10);
};

struct CollectorResult {
  uint32_t run = 0;
  bool resumed = false;  // a state directory from an earlier run was found
  uint64_t sent = 0;     // transactions sent to the daemon
  uint64_t batches = 0;
  uint64_t refusals = 0;
  uint64_t feed_reconnects = 0;
  uint64_t daemon_reconnects = 0;
  JoinerStats join;
  // Copies of the workload's counters at the end.
  uint64_t attempted = 0;
  uint64_t committed = 0;
  uint64_t aborted_conflict = 0;
  uint64_t aborted_other = 0;
  uint64_t unknown = 0;
  uint64_t session_reconnects = 0;
  double seconds = 0;
  // Lag from a transaction's commit (its commit time in the WAL) to its being durable in
  // isowatchd, over the committed transactions.
  collectors::LagSummary lag;
};

// Runs the collector (docs/collectors/postgres.md): prepares the table (emptied on a first run),
// opens the commit feed with `open_feed` (again after each break), runs the workload, joins its
// records with the commits, and streams the joined transactions to isowatchd with the commit
// LSN as watermark. Returns when the workload is done and every transaction is durable in the
// daemon, or when `stop` is set (then the stream stays open for the next run).
absl::StatusOr<CollectorResult> RunCollector(const CollectorOptions& options,
                                             const CommitFeedFactory& open_feed,
                                             const std::atomic<bool>* stop);

}  // namespace isowatch::pg
