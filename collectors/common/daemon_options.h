// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <string>

#include "absl/time/time.h"

#include "isowatch/ingest/channel_credentials.h"

namespace isowatch::collectors {

// How a collector streams to isowatchd and keeps its state between runs: the part of the options
// every collector has (each collector's CollectorOptions holds one). A plain value.
struct DaemonOptions {
  // isowatchd's gRPC ingest, host:port, and how to authenticate to it (docs/security.md).
  std::string target;
  ingest::ChannelAuth auth;
  // Where the collector keeps its run count and what the daemon has made durable, so that a
  // restart resumes without losing or repeating a transaction. Created if missing.
  std::string state_dir;
  // Transactions per batch, and the longest a transaction waits in a partial batch.
  size_t batch_size = 500;
  absl::Duration flush_interval = absl::Milliseconds(100);
  // End the stream once the collector has sent everything (false: it stays open for a later run).
  bool end_of_stream = true;
  // Prints a progress line every this long (0 = never).
  absl::Duration progress_interval = absl::ZeroDuration();
};

}  // namespace isowatch::collectors
