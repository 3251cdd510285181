// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "isowatch/ingest/channel_credentials.h"
#include "isowatch/v1/ingest.grpc.pb.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest {

struct ClientOptions {
  // Batches sent and not yet acknowledged, at most; Send waits while there are this many.
  size_t max_in_flight = 8;
  // The wait before reconnecting after a broken stream: `initial_backoff`, doubled after each
  // failed attempt up to `max_backoff` (each with up to 20% added at random), back to
  // `initial_backoff` once an attempt brings an ack.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // The longest Send waits for room, Close for the last ack, and PushBatch retries.
  absl::Duration deadline = absl::Seconds(60);
  // The longest IngestClient waits for its first connection: a server it cannot reach by then
  // stops the client with UNAVAILABLE (later breaks are retried until `deadline`). Zero: no
  // limit, for a collector that may start before the daemon.
  absl::Duration connect_timeout = absl::ZeroDuration();
  // The seq of the first batch Send assigns: 1 for a new stream.
  uint64_t first_seq = 1;
  // TLS, client certificate and token (MakeChannelAuth); by default plaintext.
  ChannelAuth auth;
};

// A channel to an ingest server at `target` ("host:port") set up for ingest: no limit on the size
// of acks, reconnection backoff and credentials from `options`.
std::shared_ptr<grpc::Channel> MakeIngestChannel(const std::string& target,
                                                 const ClientOptions& options);

// The collector side of one stream over the bidirectional Ingest.Stream RPC.
//
// It first claims the stream (Ingest.Claim, retried like a broken stream):
// from then on it is the stream's one writer, and sends its epoch with every batch. A later claim
// by another writer (another collector with the same stream name, or a successor of this one)
// fences it: the server refuses its next batch with FAILED_PRECONDITION, and the client stops.
// So does a batch whose (stream, seq) the server holds with other content (ALREADY_EXISTS).
//
// Send gives each batch the stream's name and the next sequence number and queues it; a sender
// thread writes the queued batches in order, a reader thread consumes the acks and drops each
// batch once an ack says it is durable. When the stream breaks (server restart, network), the
// client reconnects with backoff and sends again every batch not yet acknowledged, in order: the
// server acknowledges those it already has as duplicates, so each batch is applied once and the
// stream resumes from the last ack. Errors that a retry cannot cure (INVALID_ARGUMENT,
// UNIMPLEMENTED, a server that lost acknowledged batches) stop the client; Send and Close then
// return the error.
//
// Thread-safe. Owns its threads (joined by Close or the destructor) and its channel.
class IngestClient {
 public:
  IngestClient(const std::string& target, std::string stream, ClientOptions options = {});
  // Stops at once: batches not yet acknowledged are abandoned. Call Close for a clean end.
  ~IngestClient();

  IngestClient(const IngestClient&) = delete;
  IngestClient& operator=(const IngestClient&) = delete;

  // Queues `batch` with this client's stream and the next seq (overwriting both), waiting while
  // max_in_flight batches are unacknowledged. Errors: DeadlineExceeded (no room within
  // options.deadline; the batch is not queued), FailedPrecondition (after Close), or the error
  // that stopped the client.
  absl::Status Send(v1::IngestBatch batch);
  // The same for a batch the caller built where it chose (on an arena, say); the client keeps it
  // until it is acknowledged. REQUIRES: `batch` is not null and not used by the caller any more.
  absl::Status Send(std::shared_ptr<v1::IngestBatch> batch);

  // Sends an empty batch with end_of_stream, waits until every batch is acknowledged (until
  // options.deadline), ends the RPC and stops the threads. Returns every refusal received
  // (SEQUENCE_GAP excepted: the client handles those itself). Errors: DeadlineExceeded (some
  // batches unacknowledged), FailedPrecondition (called twice), or the error that stopped the
  // client.
  absl::StatusOr<std::vector<v1::Refusal>> Close();

  // Stops without ending the stream: waits until every batch sent is acknowledged (until
  // options.deadline), then ends the RPC and stops the threads, sending no end_of_stream. The
  // stream stays open on the server, its watermark where the last batch left it, so that nothing
  // the collector did not send is taken as final; the collector (or its successor) resumes it
  // from durable_seq() + 1. For a collector interrupted before it sent everything. Returns every
  // refusal received, as Close does. Errors: as Close.
  absl::StatusOr<std::vector<v1::Refusal>> Detach();

  // The highest seq the server has acknowledged as durable.
  uint64_t durable_seq() const;
  // The writer epoch the claim brought; 0 before it came.
  uint64_t epoch() const;
  // The seq the next Send assigns.
  uint64_t next_seq() const;
  // Times the stream was opened again after it broke.
  uint64_t reconnects() const;
  // The error that stopped the client (one a retry cannot cure, as Send and Close return it), or
  // OK while it runs. For a caller that waits for acks without sending.
  absl::Status status() const;
  // Refusals received so far (SEQUENCE_GAP excepted), and acks marked duplicate.
  uint64_t refusals() const;
  uint64_t duplicates() const;
  // The refusals received so far, which are then no longer kept (nor returned by Close).
  std::vector<v1::Refusal> TakeRefusals();

 private:
  struct Pending {
    uint64_t seq;
    std::shared_ptr<const v1::IngestBatch> batch;
  };
  using ReaderWriter = grpc::ClientReaderWriterInterface<v1::IngestBatch, v1::IngestAck>;

  void Run();
  // Waits for the channel's first connection, until options_.connect_timeout (if not zero).
  // Returns false (the client stopped, or failed with UNAVAILABLE) if there is none.
  bool Connect();
  // Claims the stream, retrying as Run reconnects (each retry counts as a reconnect). Returns
  // false (the client stopped, or failed) if it got no epoch.
  bool Claim();
  // Writes queued batches on `stream` until it breaks, the client stops, or (closing) every batch
  // is acknowledged. Returns true in the last case.
  bool WriteLoop(ReaderWriter& stream);
  void ReadLoop(ReaderWriter& stream);
  absl::Status Enqueue(std::shared_ptr<v1::IngestBatch> batch, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopThreads();
  // Close and Detach: queues `last` (when not null), then waits for every ack and stops.
  absl::StatusOr<std::vector<v1::Refusal>> Finish(std::shared_ptr<v1::IngestBatch> last);

  const std::string target_;
  const std::string stream_;
  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;

  mutable absl::Mutex mu_;
  // Batches sent or to send and not acknowledged, by increasing seq.
  std::deque<Pending> unacked_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_);
  uint64_t durable_seq_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // The seq of the next batch to write on the current connection.
  uint64_t next_write_ ABSL_GUARDED_BY(mu_) = 0;
  // The current connection's context (to cancel it), or null.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;    // the current connection is unusable
  bool closing_ ABSL_GUARDED_BY(mu_) = false;   // Close or Detach waits for the last acks
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // the stream ended cleanly after Close
  bool stop_ ABSL_GUARDED_BY(mu_) = false;      // the threads are to stop
  bool closed_ ABSL_GUARDED_BY(mu_) = false;    // Close was called
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Refusal> refusals_ ABSL_GUARDED_BY(mu_);
  uint64_t refusal_count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reconnects_ ABSL_GUARDED_BY(mu_) = 0;
  // Set when the last connection brought an ack (backoff starts over).
  bool progressed_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex stop_mu_;  // serialises StopThreads
  std::thread thread_;
};

// What PushBatch did besides its result.
struct PushStats {
  uint64_t attempts = 0;
  uint64_t resource_exhausted = 0;  // answers RESOURCE_EXHAUSTED (queue full), each retried
};

// Claims `stream` with Ingest.Claim (a new writer: docs/ingest-protocol.md, section 2), retrying
// UNAVAILABLE with the client's backoff until options.deadline. Returns the reply, whose epoch
// goes with every batch of this writer (PushBatch's `epoch`). Errors: the last error when the
// deadline passes, any other error at once. Thread-safe.
absl::StatusOr<v1::ClaimReply> ClaimStream(v1::Ingest::StubInterface& stub, std::string_view stream,
                                           const ClientOptions& options);

// Sends `batch` (with its stream and seq set by the caller) with the unary Ingest.Push, retrying
// until options.deadline: after RESOURCE_EXHAUSTED it waits as long as the server's
// `retry-after-ms` advice says (options.initial_backoff without advice), after UNAVAILABLE as the
// client's backoff says. Returns the ack. Errors: the last error when the deadline passes, any
// other error at once. Thread-safe (as the stub is).
// `epoch`: the writer's, from ClaimStream (0: a writer that did not claim the stream, which the
// server refuses once anyone has).
absl::StatusOr<v1::IngestAck> PushBatch(v1::Ingest::StubInterface& stub,
                                        const v1::IngestBatch& batch, const ClientOptions& options,
                                        PushStats* stats = nullptr, uint64_t epoch = 0);

}  // namespace isowatch::ingest
