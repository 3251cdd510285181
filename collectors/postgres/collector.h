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

#include "isowatch/ingest/channel_credentials.h"

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
  // isowatchd's gRPC ingest, host:port, and how to authenticate to it (docs/security.md).
  std::string target;
  ingest::ChannelAuth auth;
  std::string stream = "postgres";
  // Where the collector keeps its run count and the position it has made durable in the daemon,
  // so that a restart resumes without losing or repeating a transaction. Created if missing.
  std::string state_dir;
  // Transactions per batch, and the longest a transaction waits in a partial batch.
  size_t batch_size = 500;
  absl::Duration flush_interval = absl::Milliseconds(100);
  // End the stream when the workload is done (workload mode); a canary keeps it open.
  bool end_of_stream = true;
  // After the workload is done, how long to wait for the commits of transactions whose outcome
  // is unknown before sending them as UNKNOWN.
  absl::Duration unknown_grace = absl::Seconds(10);
  // Prints a progress line every this long (0 = never).
  absl::Duration progress_interval = absl::ZeroDuration();
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
  // isowatchd, in seconds: median, 99th percentile and maximum over the committed transactions.
  double lag_p50 = 0;
  double lag_p99 = 0;
  double lag_max = 0;
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
