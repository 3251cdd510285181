// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

#include "isowatch/v1/history.pb.h"

#include "collectors/common/daemon_options.h"
#include "collectors/common/state_dir_lock.h"
#include "collectors/common/state_file.h"

namespace isowatch::collectors {

// Where a run of a collector starts.
struct ResumedStream {
  // The state after the earlier runs, with this run counted and saved: `durable` takes in every
  // batch the daemon has made durable, and nothing is in flight.
  CollectorState state;
  bool resumed = false;      // a state file from an earlier run was found
  uint64_t durable_seq = 0;  // the daemon's durable seq: this run's first batch is the next one
  StateDirLock lock;         // held for the run
};

// Starts a run of the collector of `stream` (docs/collectors/tidb.md and postgres.md,
// "Restarts"): creates `options.state_dir` and locks it (one collector per state directory),
// reads its state file, learns the stream's durable seq from isowatchd by pushing the stream's
// first batch (`header`) again (a daemon that has the stream answers it as a duplicate, one that
// has not takes it as batch 1; the claim this takes is fenced by the IngestClient that follows),
// takes in the batches of the last run that the daemon made durable, counts the run and saves
// the state. Errors: FAILED_PRECONDITION when the directory is locked or belongs to another
// stream, when isowatchd has the stream and the directory holds no state for it (or the other
// way round), or when isowatchd refuses the stream; DATA_LOSS for a state file that does not
// parse; isowatchd's error when it cannot be reached within the ingest client's deadline.
absl::StatusOr<ResumedStream> ResumeStream(const DaemonOptions& options, const std::string& stream,
                                           const v1::Header& header, const StateFile& file);

}  // namespace isowatch::collectors
