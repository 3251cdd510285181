// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "isowatch/history/history.h"
#include "isowatch/ingest/channel_credentials.h"
#include "isowatch/sim/delivery.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::collect {

// Changes applied to every transaction a replay sends, so several histories can share one
// daemon: ids get a prefix, keys (integers) an offset, timestamps (physical part) an offset.
struct Relabel {
  std::string id_prefix;
  int64_t key_offset = 0;
  int64_t time_offset = 0;
};

struct ReplayOptions {
  std::string target;  // host:port of isowatchd's gRPC ingest
  std::string stream = "replay";
  // The simulated asynchrony of `isowatch check --online` (sim::DeliveryOptions): batch size,
  // delays, seed, collection rate, watermarks.
  sim::DeliveryOptions delivery;
  // Real sending rate in transactions per second; 0 = as fast as the daemon takes them.
  double send_rate_tps = 0;
  // Batches in flight before Send waits for acks.
  size_t max_in_flight = 8;
  // A daemon not reached by then fails the replay (ingest::ClientOptions::connect_timeout).
  absl::Duration connect_timeout = absl::Seconds(5);
  // TLS, client certificate and token (ingest::MakeChannelAuth); by default plaintext.
  ingest::ChannelAuth auth;
  // End the stream when the history has been sent (the daemon then stops waiting for it).
  bool end_of_stream = true;
  Relabel relabel;
  // Set (from another thread) to stop sending. The batches sent are then acknowledged, and the
  // stream is left open (ingest::IngestClient::Detach), not ended: what was not sent must not be
  // taken for all there was (ReplayResult::interrupted).
  const std::atomic<bool>* cancel = nullptr;
};

struct ReplayResult {
  uint64_t transactions = 0;
  uint64_t batches = 0;
  uint64_t reconnects = 0;
  uint64_t duplicates = 0;  // batches the daemon had already (re-sent after a reconnect)
  std::vector<v1::Refusal> refusals;
  double seconds = 0;
  // Stopped by `cancel` before the whole history was sent; the stream was left open.
  bool interrupted = false;
  uint64_t durable_seq = 0;  // the last batch the daemon acknowledged
};

// The batches `h` is sent as: the delivery schedule's batches in arrival order, each with its
// watermark; the first one carries the header (initial state and the data model in metadata
// "data_model"). Sequence numbers are left to the client.
absl::StatusOr<std::vector<v1::IngestBatch>> BuildReplayBatches(const history::History& h,
                                                                const ReplayOptions& options);

// Streams `h` to isowatchd (the replay collector): builds the batches, sends them through an
// ingest::IngestClient (which reconnects and resumes from the last ack), paces them at
// send_rate_tps, and closes the stream (unless options.end_of_stream is off, or it was cancelled:
// then it leaves the stream open). `progress` (optional) is called after each batch with
// the transactions sent so far.
absl::StatusOr<ReplayResult> Replay(const history::History& h, const ReplayOptions& options,
                                    const std::function<void(uint64_t)>& progress = nullptr);

}  // namespace isowatch::collect
