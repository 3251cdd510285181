// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <grpcpp/server.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include "isowatch/history/timestamp.h"
#include "isowatch/ingest/batch_sink.h"
#include "isowatch/ingest/id_registry.h"
#include "isowatch/ingest/server_credentials.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/v1/ingest.grpc.pb.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest {
namespace internal {

// Adds to one of IngestCounters' counters (relaxed: none guards other data).
inline void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace internal

// The service's counters, for the daemon to export. Each is only ever incremented, with relaxed
// order (a reader may see them a little out of step with one another; none guards other data).
struct IngestCounters {
  std::atomic<uint64_t> batches_received{0};       // every batch read, valid or not
  std::atomic<uint64_t> batches_applied{0};        // batches made durable (incl. refused whole)
  std::atomic<uint64_t> batches_duplicate{0};      // seq already durable: acked, not re-applied
  std::atomic<uint64_t> batches_refused{0};        // refused whole (any reason)
  std::atomic<uint64_t> transactions_received{0};  // transactions of applied batches
  std::atomic<uint64_t> transactions_accepted{0};
  std::atomic<uint64_t> transactions_duplicate{0};  // id already accepted with the same content
  std::atomic<uint64_t> watermark_regressions{0};   // watermarks below the stream's, ignored
  std::atomic<uint64_t> push_rejected_busy{0};      // unary Push answered RESOURCE_EXHAUSTED
  std::atomic<uint64_t> streams_refused{0};         // batches of a stream over max_streams, refused
  std::atomic<uint64_t> claims{0};                  // Claim calls answered with an epoch
  std::atomic<uint64_t> batches_fenced{0};          // batches of a writer that is not the current
  std::atomic<uint64_t> batches_conflicting{0};     // (stream, seq) durable with other content
  // Transactions refused, by reason (RefusalReasonName gives the label); a whole-batch refusal
  // counts every transaction of its batch.
  std::array<std::atomic<uint64_t>, kRefusalReasonCount> refusals{};
};

// What the service reports as it happens, for the daemon's log. Each is called on the RPC threads
// (so it must be thread-safe, and quick), and may be empty.
struct IngestEvents {
  // The refusals of one batch (`ack` names the stream), once counted: `transactions` is the
  // number of transactions the batch carried.
  std::function<void(const v1::IngestAck& ack, uint64_t transactions)> refused;
  // Batch `seq` of `stream` carried watermark `sent`, below the stream's `held`: ignored.
  std::function<void(std::string_view stream, uint64_t seq, const history::Timestamp& sent,
                     const history::Timestamp& held)>
      watermark_regressed;
  // A batch of `stream` came with writer epoch `sent` while the stream's is `current`: refused.
  std::function<void(std::string_view stream, uint64_t sent, uint64_t current)> fenced;
  // Batch `seq` of `stream`, durable already, was sent again with other content: refused.
  std::function<void(std::string_view stream, uint64_t seq)> conflicting;
};

struct IngestServiceOptions {
  ValidationLimits limits;
  // The retry advice of a unary Push refused because the queue is full.
  absl::Duration retry_after = absl::Milliseconds(200);
  // Per streaming RPC, how many batches may be read ahead of their ack (taken by the sink and
  // waiting for their sync, or acked but not yet written). At least 1; 1 handles one batch at a
  // time. More than a collector's window of unacknowledged batches gains nothing.
  size_t max_pipelined_batches = 64;
  // Most streams the service takes; 0: no limit. A stream counts from its first batch with a
  // valid name and seq; the first batch of one stream more fails (FAILED_PRECONDITION) before
  // anything of it is kept, and is counted (IngestCounters::streams_refused). The streams of
  // `known_streams` (those the sink holds from before a restart) count from the start.
  size_t max_streams = 0;
  std::vector<std::string> known_streams;
  IngestEvents events;
};

// The name of the trailing metadata entry that carries the retry advice (milliseconds, decimal).
inline constexpr char kRetryAfterMetadataKey[] = "retry-after-ms";
// The name of the call metadata entry that carries the writer's epoch (decimal) on Stream and
// Push: what Claim returned. Absent: 0, the epoch of a stream never claimed.
inline constexpr char kEpochMetadataKey[] = "isowatch-epoch";

// The ingest gRPC service (proto/isowatch/v1/ingest.proto, docs/ingest-protocol.md) on the
// synchronous gRPC API: each RPC runs on a gRPC thread. Per batch it checks the stream name and
// seq, tells duplicates and gaps, validates (ValidateBatch), hands the batch to the sink and
// answers with an ack once the sink reports it durable. The batches of one stream are checked
// and handed over one at a time, in seq order (a per-stream lock), whichever RPCs they come on;
// different streams proceed in parallel.
//
// The streaming RPC pipelines: its handler thread reads, checks and hands over batches with
// BatchSink::SubmitAsync without waiting for their sync (at most max_pipelined_batches ahead),
// and a second thread per RPC writes the acks, in the order of the batches, as they become
// durable. A batch's transaction ids count for the validation of the stream's next batches at
// once, but reach the IdRegistry only once the batch is durable. The transactions the sink
// refuses (BatchSink, "Refusals") join the batch's refusals in its ack, and their ids count for
// nothing: they are dropped before the stream's next batch is validated. When the sink reports a
// failure, the RPC ends (CANCELLED when the handler was waiting for the next batch) after the acks
// of the batches durable before it, and the stream goes back to its durable seq once its other
// batches in the pipeline are settled: the collector reconnects and sends the rest again.
//
// Thread-safe. Does not own `sink` or `registry`, which must outlive it.
class IngestService final : public v1::Ingest::Service {
 public:
  IngestService(BatchSink& sink, IdRegistry& registry, IngestServiceOptions options);
  ~IngestService() override;

  IngestService(const IngestService&) = delete;
  IngestService& operator=(const IngestService&) = delete;

  grpc::Status Push(grpc::ServerContext* context, const v1::IngestBatch* request,
                    v1::IngestAck* response) override;
  grpc::Status Claim(grpc::ServerContext* context, const v1::ClaimRequest* request,
                     v1::ClaimReply* response) override;

  // Makes a new writer of `stream`, as the Claim RPC does: its epoch (durable, through the sink),
  // then every batch of the stream must carry it (Apply's `epoch`). Errors: InvalidArgument (no
  // valid stream name), FailedPrecondition (one stream more than max_streams), the sink's.
  absl::StatusOr<v1::ClaimReply> ClaimStream(std::string_view stream);

  // How Apply hands a batch to the sink.
  enum class SubmitMode {
    kWait,    // BatchSink::Submit; waits for the stream's lock
    kNoWait,  // BatchSink::TrySubmit; ResourceExhausted if the stream's lock is taken
  };
  // Handles one batch as the RPCs do, and returns its ack. Errors: InvalidArgument (no valid
  // stream name, seq 0), Unavailable (draining), ResourceExhausted (kNoWait and busy), Internal
  // (the sink broke its contract), or the sink's error. After an error nothing of the batch is
  // durable or remembered, and the same batch can be sent again.
  // `epoch`: the writer's, from its claim (0 for a writer that never claimed the stream); one
  // below the stream's current epoch is FailedPrecondition (fenced), one above it DataLoss (the
  // daemon lost the claim). A batch under a (stream, seq)
  // already durable with other content is AlreadyExists.
  absl::StatusOr<v1::IngestAck> Apply(v1::IngestBatch batch, SubmitMode mode, uint64_t epoch = 0);

  // Stops taking batches (those that come later fail with UNAVAILABLE) and waits until none is in
  // progress, or until `deadline`. Returns true if none is in progress. Irreversible.
  bool Drain(absl::Time deadline);

  const IngestCounters& counters() const { return counters_; }

 private:
  // Where a stream is: its seq, highest watermark and closed flag.
  struct Progress {
    uint64_t seq = 0;
    std::optional<history::Timestamp> watermark;
    bool closed = false;
  };

  // An accepted transaction's index in its batch, id and fingerprint.
  struct AcceptedId {
    uint32_t index = 0;
    std::string id;
    uint64_t fingerprint = 0;
  };
  // The accepted ids of a batch waiting for its sync.
  struct PendingBatch {
    uint64_t seq = 0;
    std::vector<AcceptedId> ids;
  };

  // What the service knows of one stream: loaded from the sink when first met, then kept up to
  // date by the batches it hands over (`taken`) and the sink's reports (`durable`).
  struct StreamState {
    explicit StreamState(std::string stream_name) : name(std::move(stream_name)) {}
    const std::string name;
    // Held while a batch of the stream is checked, validated and handed to the sink.
    absl::Mutex mu;
    bool loaded ABSL_GUARDED_BY(mu) = false;
    Progress taken ABSL_GUARDED_BY(mu);      // including the batches waiting for their sync
    uint64_t epoch ABSL_GUARDED_BY(mu) = 0;  // the current writer's (ClaimStream)

    // Guards what the sink's callbacks update (they never wait for `mu`).
    absl::Mutex durable_mu ABSL_ACQUIRED_AFTER(mu);
    Progress durable ABSL_GUARDED_BY(durable_mu);
    int in_flight ABSL_GUARDED_BY(durable_mu) = 0;    // taken by SubmitAsync, not yet reported
    bool failed ABSL_GUARDED_BY(durable_mu) = false;  // a failure was reported since the rollback
    // The accepted ids of the batches in flight, oldest batch first, and all of them by id.
    std::deque<PendingBatch> pending_batches ABSL_GUARDED_BY(durable_mu);
    absl::flat_hash_map<std::string, uint64_t> pending_ids ABSL_GUARDED_BY(durable_mu);
  };
  class PendingIdView;
  struct Prepared;
  struct AckPipe;

  // Holds a place in the drain gate for its lifetime, if it got one.
  class GateEntry {
   public:
    explicit GateEntry(IngestService& service);
    ~GateEntry();
    GateEntry(const GateEntry&) = delete;
    GateEntry& operator=(const GateEntry&) = delete;
    bool entered() const { return entered_; }

   private:
    IngestService& service_;
    bool entered_;
  };

  // The stream's state, created when first met; null when that would exceed max_streams.
  StreamState* State(std::string_view stream);
  // FailedPrecondition: `stream` would be one stream more than max_streams.
  absl::Status TooManyStreams(std::string_view stream) const;
  // Checks and validates a batch under the stream's lock. Returns the ack at once (duplicate,
  // gap, closed stream) or what to hand to the sink.
  // `wire`: the batch as received, or empty.
  // `epoch`: the writer's (Apply).
  absl::StatusOr<std::variant<v1::IngestAck, Prepared>> Prepare(
      StreamState& state, std::shared_ptr<v1::IngestBatch> batch, std::string wire, uint64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu);
  // Loads what the sink has of the stream, the first time.
  void Load(StreamState& state, std::string_view stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu);
  // FailedPrecondition or DataLoss (Apply), counted and reported, unless `epoch` is the stream's
  // current one.
  absl::Status CheckEpoch(const StreamState& state, uint64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu);
  absl::StatusOr<v1::IngestAck> ApplyLocked(StreamState& state,
                                            std::shared_ptr<v1::IngestBatch> batch, SubmitMode mode,
                                            uint64_t epoch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu);
  // The streaming RPC (Ingest.Stream). It reads the batches as bytes, which it parses once onto
  // an arena (ParseArenaBatch) and hands to the sink with the batch (ValidatedBatch::wire).
  grpc::Status StreamBytes(grpc::ServerContext* context,
                           grpc::ServerReaderWriter<v1::IngestAck, grpc::ByteBuffer>* stream);
  // The unary RPC (Ingest.Push) as bytes: a message that does not parse is INVALID_ARGUMENT (gRPC
  // itself would answer INTERNAL with no message, which collectors retry), the rest goes to Push.
  grpc::Status PushBytes(grpc::ServerContext* context,
                         grpc::ServerUnaryStreamer<grpc::ByteBuffer, v1::IngestAck>* call);
  // The pipelined Apply of the streaming RPC: calls `done` exactly once, with the ack once the
  // batch is durable (or at once), or with an error.
  void ApplyAsync(std::shared_ptr<v1::IngestBatch> batch, std::string wire, uint64_t epoch,
                  const std::function<void(absl::StatusOr<v1::IngestAck>)>& done);
  // Counts a batch made durable and completes its ack, with the sink's refusals.
  void Finish(Prepared& prepared, const SinkAck& sink_ack);
  // Counts the ack's refusals (a whole-batch one for each of the batch's `transactions`) and
  // reports them (IngestEvents::refused).
  void CountRefusals(const v1::IngestAck& ack, uint64_t transactions);
  // Refuses with ID_ON_OTHER_STREAM the accepted transactions of `validation` (of batch `seq`)
  // whose id another stream holds: remembered by the registry (IdRegistry::OwnerOf), or reserved
  // by a batch of it still in flight. Reserves the ids of the others for `state` until their batch
  // is settled (ReleaseIds): ids are unique across streams, and checked in one place so that two
  // streams sending one id at once cannot both have it.
  void ReserveIds(const StreamState& state, uint64_t seq, BatchValidation& validation);
  // Ends `state`'s reservations of `ids`: their batch is durable (and its kept ids recorded in the
  // registry first), failed, or the sink refused them.
  void ReleaseIds(const StreamState& state, const std::vector<AcceptedId>& ids);
  // Records in the IdRegistry the ids of a durable batch, but those of the transactions the sink
  // refused.
  void RecordKept(const std::string& stream, const std::vector<AcceptedId>& ids,
                  const std::vector<v1::Refusal>& refusals);
  // The drain gate, for a batch whose handling outlives the RPC handler's loop iteration.
  bool EnterGate();
  void LeaveGate();

  BatchSink& sink_;
  IdRegistry& registry_;
  const IngestServiceOptions options_;
  IngestCounters counters_;

  absl::Mutex streams_mu_;
  // Entries are never removed, so references to them stay valid.
  absl::flat_hash_map<std::string, std::unique_ptr<StreamState>> streams_
      ABSL_GUARDED_BY(streams_mu_);
  // options_.known_streams, and how many streams count towards max_streams.
  absl::flat_hash_set<std::string> known_streams_ ABSL_GUARDED_BY(streams_mu_);
  size_t stream_count_ ABSL_GUARDED_BY(streams_mu_) = 0;

  // Transaction ids in batches in flight -> the stream whose batch holds them (ReserveIds).
  absl::Mutex owners_mu_;
  absl::flat_hash_map<std::string, const StreamState*> reserved_ids_ ABSL_GUARDED_BY(owners_mu_);

  absl::Mutex gate_mu_;
  int in_progress_ ABSL_GUARDED_BY(gate_mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(gate_mu_) = false;
};

struct IngestServerOptions {
  // The address to listen on: a host name or address ("127.0.0.1", "::1", "0.0.0.0") and a port
  // (0: any free port; IngestServer::port() tells which).
  std::string host = "127.0.0.1";
  int port = 0;
  IngestServiceOptions service;
  // TLS, mutual TLS and the bearer token (MakeServerCredentials); by default plaintext.
  ServerSecurity security;
};

// A running gRPC server with the ingest service and the standard health service
// (grpc.health.v1.Health: SERVING for "" and "isowatch.v1.Ingest" while it takes batches,
// NOT_SERVING once it drains). The largest message it reads is the batch byte limit plus 1 MiB,
// so a batch a little over the limit is refused as BATCH_TOO_LARGE in an ack, and one far over it
// fails the RPC with RESOURCE_EXHAUSTED.
//
// Lifecycle: StartIngestServer, then Drain (optional) and Shutdown; the destructor shuts down
// with no grace. Thread-safe. Owns the gRPC server and the service (and the id registry when
// none is given); the sink is the caller's and must outlive it.
class IngestServer {
 public:
  ~IngestServer();

  IngestServer(const IngestServer&) = delete;
  IngestServer& operator=(const IngestServer&) = delete;

  // The port the server listens on.
  int port() const { return port_; }
  // "host:port" with the bound port ("[::1]:port" for IPv6 addresses).
  std::string address() const;

  IngestService& service() { return *service_; }
  const IngestCounters& counters() const { return service_->counters(); }

  // Health NOT_SERVING, no new batches (UNAVAILABLE), waits for the batches in progress until
  // `deadline`. Returns true if none is left in progress.
  bool Drain(absl::Time deadline);

  // Drains until `deadline`, then closes every RPC still open (a stream waiting for its next batch
  // ends with CANCELLED; its collector reconnects elsewhere or later) and stops the server. Waits
  // for the RPC handlers to return. Idempotent.
  void Shutdown(absl::Time deadline);

 private:
  friend absl::StatusOr<std::unique_ptr<IngestServer>> StartIngestServer(
      const IngestServerOptions& options, BatchSink& sink, IdRegistry* registry);

  IngestServer() = default;

  std::string host_;
  int port_ = 0;
  std::unique_ptr<IdRegistry> owned_registry_;
  std::unique_ptr<IngestService> service_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex shutdown_mu_;
  bool stopped_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

// Starts a server per `options` that feeds `sink`. `registry` remembers transaction ids; when null
// the server keeps them in memory (MemoryIdRegistry). Errors: InvalidArgument (bad options, TLS
// material gRPC refuses), Unavailable (cannot listen on the address).
absl::StatusOr<std::unique_ptr<IngestServer>> StartIngestServer(const IngestServerOptions& options,
                                                                BatchSink& sink,
                                                                IdRegistry* registry = nullptr);

// "host:port", with brackets around an IPv6 address.
std::string JoinHostPort(std::string_view host, int port);

}  // namespace isowatch::ingest
