// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "collectors/tidb/client_log_writer.h"
#include "collectors/tidb/client_source.h"
#include "collectors/tidb/timestamp_source.h"
#include "collectors/tidb/workload.h"

namespace isowatch::tidb {

// The client records of a workload run in this process (workload.h), handed to the collector as
// its sessions finish each transaction, and written to a client log when one is asked for. The
// floor of each Poll is the workload's (Workload::Floor). The collector's thread calls every
// method; the sessions only add to the queue.
class WorkloadSource : public ClientSource {
 public:
  // `client_log`: the file to write the records to (empty: none). With `reset_on_first_run`, a
  // run numbered 1 empties the workload's table before it starts.
  WorkloadSource(WorkloadOptions options, std::shared_ptr<TimestampSource> timestamps,
                 std::string client_log, bool reset_on_first_run = true);
  ~WorkloadSource() override;

  const v1::Header& header() const override { return header_; }
  bool live() const override { return true; }
  // Prepares the table and starts the sessions. Errors: those of preparing the table, or of
  // creating the client log.
  absl::Status Start(uint32_t run) override;
  absl::StatusOr<Polled> Poll() override;
  void Stop() override;

  // REQUIRES: Start succeeded.
  const WorkloadStats& stats() const { return workload_->stats(); }
  // Records handed out so far.
  uint64_t records() const { return records_; }

 private:
  WorkloadOptions options_;
  std::shared_ptr<TimestampSource> timestamps_;
  std::string client_log_path_;
  bool reset_on_first_run_;
  v1::Header header_;
  // Before workload_: its sessions add to the queue until it is destroyed.
  absl::Mutex mu_;
  std::deque<v1::Transaction> queue_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ClientLogWriter> log_;
  std::unique_ptr<Workload> workload_;
  bool done_ = false;
  Tso end_ts_ = 0;
  uint64_t records_ = 0;
};

}  // namespace isowatch::tidb
