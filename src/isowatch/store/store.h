// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/history/timestamp.h"
#include "isowatch/rocks/rocksdb_memory.h"
#include "isowatch/store/violation_record.h"

namespace rocksdb {
class WriteBatch;
}  // namespace rocksdb

namespace isowatch::store {

struct StoreOptions {
  // Every write syncs RocksDB's write-ahead log before it returns, so what was acknowledged
  // survives a power failure. With false it survives a crash of the process, not of the machine.
  bool sync_writes = true;
  // Violation writes sync too. Off by default: a violation is derived from the ingest log, which is
  // synced, so one lost to a power failure is found again, under the same id, by recovery; a
  // crash of the process loses none either way. (Any synced write also makes every earlier
  // violation durable, and TruncateLogBefore syncs before it deletes.)
  bool sync_violations = false;
  // Create an empty store when `dir` holds none; otherwise opening a missing store fails.
  bool create_if_missing = true;
  // How many violations AddViolation keeps in full; the others are counted in summaries. The
  // default keeps every one.
  ViolationBounds violation_bounds;
};

// What the store knows of one ingest stream.
struct StreamRecord {
  std::string name;
  uint32_t id = 0;           // unique, from 1, in the order the streams were created
  uint64_t durable_seq = 0;  // highest sequence number made durable; 0 before the first batch
  std::optional<history::Timestamp> watermark;  // highest watermark received, if any
  bool closed = false;                          // the end-of-stream batch is durable
  std::string header;                           // opaque bytes of SetStreamHeader

  bool operator==(const StreamRecord&) const = default;
};

// One batch of the ingest log as ReadLog presents it. The views point into the store's read
// buffers and are valid only during the callback.
struct LogEntry {
  uint64_t position = 0;  // global arrival position, from 1
  std::string_view stream;
  uint32_t stream_id = 0;
  uint64_t seq = 0;
  std::optional<history::Timestamp> watermark;
  bool end_of_stream = false;
  std::string_view bytes;  // the batch as the ingest layer encoded it
};

// A checkpoint as the store keeps it (PutCheckpoint).
struct CheckpointRecord {
  uint64_t generation = 0;    // 1 for the first checkpoint stored, then + 1 for each next
  uint64_t log_position = 0;  // the checkpoint covers every log entry below it
  std::string blob;           // opaque to the store

  bool operator==(const CheckpointRecord&) const = default;
};

// The daemon's durable state in one RocksDB database (format in docs/store-format.md):
//   - the ingest log: every accepted batch in global arrival order, with its stream's sequence
//     number, watermark and end-of-stream mark; a batch is acknowledged once it is durable:
//     AppendBatch has returned, synced, or an unsynced append was followed by SyncLog;
//   - per stream: its numeric id, highest durable sequence number, highest watermark, closed flag
//     and an opaque header (the stream's initial state, say);
//   - the final violations, each once under its stable id, in insertion order, within the
//     bounds of StoreOptions::violation_bounds; past them, summaries that count the others by
//     key, transaction or kind (docs/operations.md, "Bounded findings");
//   - the last checkpoint: an opaque blob that covers the log entries below its log position,
//     which are deleted when it is stored.
// After a crash the daemon reopens the store, restores the checkpoint if there is one, and
// re-feeds ReadLog's batches from there, in order, to the engine; AddViolations recognises
// the violations found again (invariants 3 and 5), so none is counted twice.
//
// Invariants:
//   1. A stream's log entries carry the sequence numbers 1, 2, ... durable_seq, in increasing
//      positions; the stream record and the log entry of a batch are written in one atomic write.
//   2. Log positions and violation insertion numbers only grow, also across reopenings and log
//      truncation. Violations are never deleted: their insertion numbers are 1..CountViolations().
//   3. A violation id maps to exactly one stored record, or (summarised) is counted in exactly
//      one summary.
//   4. After a failed write the store refuses every further write with that error (the in-memory
//      state may then be ahead of the disk): the process should exit and reopen the store.
//   5. The violations counted by kind add up to the stored records plus the violations counted
//      in summaries. An online violation counted in a summary since the last checkpoint is also
//      counted in `summary_deltas`; opening the store takes it out again, so that the replay of
//      the log after the checkpoint counts it once.
//
// Thread-safe: any number of threads may append (concurrent appends to different streams are
// grouped by RocksDB into one synced write), put violations and query at once. Appends to one
// stream are serialised. Owns its RocksDB database; the directory is locked while it is open.
class Store {
 public:
  // Version of the on-disk format this code reads and writes.
  static constexpr uint32_t kFormatVersion = 2;
  // How many of a stream's latest batches keep their memo at least (BatchMemo).
  static constexpr uint64_t kKeptRefusalBatches = 4096;
  // Size of a checkpoint's chunks (the last one may be smaller).
  static constexpr size_t kCheckpointChunkBytes = size_t{4} << 20;

  // Opens (or creates, per `options`, with any missing parent directories) the store in
  // directory `dir`.
  // Errors: FailedPrecondition for a store of another format version, or a RocksDB database that
  // is not an isowatch store; Unavailable when the directory is locked by another process or
  // cannot be read; DataLoss when a record does not decode.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& dir,
                                                     StoreOptions options = {});

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // ---- Ingest log ----

  // Makes a batch of `stream` durable: its log entry and the stream's new durable sequence
  // number, watermark (the higher of the old and `watermark`) and closed flag, in one write.
  // Creates the stream on its first batch. Returns the batch's log position.
  // Errors: InvalidArgument for an empty stream name; FailedPrecondition when `seq` is not
  // durable_seq + 1 (a duplicate or a gap: the caller recognises re-sent batches first) or the
  // stream is closed; the write's error otherwise.
  //
  // With `sync` false the write is not synced: the batch survives a crash of the process but
  // becomes durable against a power failure only at the next SyncLog (or synced write) that
  // starts after AppendBatch returns. The stream's record (GetStream) counts the batch at once.
  //
  // `memo`, when not empty, is kept with the batch in the same write (opaque to the store: the
  // daemon keeps there the refusals of the batch's ack and its content fingerprint), for
  // BatchMemo to return when the batch is sent again. The same write forgets the memo of the
  // stream's batch seq - kKeptRefusalBatches.
  absl::StatusOr<uint64_t> AppendBatch(std::string_view stream, uint64_t seq,
                                       std::optional<history::Timestamp> watermark,
                                       bool end_of_stream, std::string_view bytes, bool sync = true,
                                       std::string_view memo = {});

  // The `memo` AppendBatch kept with batch `seq` of `stream`: empty when it had none, when the
  // batch is not durable, or when it is kKeptRefusalBatches or more batches behind the stream's
  // latest. Errors: the read's error.
  absl::StatusOr<std::string> BatchMemo(std::string_view stream, uint64_t seq) const;

  // Makes durable every write that returned before the call (RocksDB's SyncWAL); one call covers
  // any number of unsynced appends, of any streams (group commit: the caller batches). A no-op
  // with StoreOptions::sync_writes off. A failure is sticky like a failed write: the unsynced
  // appends may or may not survive, and the store refuses every further write and sync.
  // Thread-safe; concurrent calls are serialised.
  absl::Status SyncLog();

  // Calls `callback` for every log entry at position >= `from_position`, in position order, on
  // a consistent view taken when the call starts. Stops at, and returns, the first non-OK status
  // of the callback. The callback may call the store. Meant for recovery: while appends are in
  // flight, an entry may become visible before one at a lower position that is still being
  // written.
  absl::Status ReadLog(uint64_t from_position,
                       absl::FunctionRef<absl::Status(const LogEntry&)> callback) const;

  // Deletes the log entries below `position` (a checkpoint covers them), after syncing every
  // earlier write (violations included). The next positions are unaffected. REQUIRES: every append
  // that got a position below `position` has returned. Errors: InvalidArgument when `position` >
  // next_log_position().
  absl::Status TruncateLogBefore(uint64_t position);

  // Stores `blob` as the checkpoint of everything applied before log position `log_position`,
  // replacing any earlier one, and in the same synced write deletes the log entries below
  // `log_position` and records log_start = log_position (as TruncateLogBefore does), and forgets
  // which online violations were summarised since the last checkpoint (they are now final for
  // good: invariant 5); every earlier write is synced first. The blob is stored in chunks of at
  // most kCheckpointChunkBytes with an XXH3-64 checksum (docs/store-format.md, "checkpoint").
  // REQUIRES: every append that got a position below `log_position` has returned; no online
  // violation is added meanwhile (the daemon's engine thread does both). Errors: InvalidArgument
  // when `log_position` is outside [first_log_position(), next_log_position()]; the write's error
  // (then, as after any failed write, the store refuses further writes).
  absl::Status PutCheckpoint(uint64_t log_position, std::string_view blob);
  // The last checkpoint stored, or nullopt when none was. Errors: DataLoss when its metadata
  // does not decode, a chunk is missing or of the wrong size, or the blob's checksum does not
  // match; the read's error.
  absl::StatusOr<std::optional<CheckpointRecord>> GetCheckpoint() const;

  // Position the next appended batch gets.
  uint64_t next_log_position() const;
  // Lowest position that can still hold an entry (the last truncation point, or 1).
  uint64_t first_log_position() const;

  // ---- Streams ----

  // The stream named `name`. Errors: NotFound.
  absl::StatusOr<StreamRecord> GetStream(std::string_view name) const;
  // Every stream, by id.
  std::vector<StreamRecord> ListStreams() const;
  // Stores `header` as the stream's header, creating the stream (durable_seq 0) if needed.
  // Errors: InvalidArgument for an empty name; the write's error.
  absl::Status SetStreamHeader(std::string_view name, std::string_view header);

  // ---- Writers ----

  // Raises the writer epoch of stream `name` by one and returns it, in a synced write: it is
  // durable before it is returned, so no epoch is ever handed out twice, crashes included. A
  // stream never claimed has epoch 0; claiming needs no stream record (none is created).
  // Errors: InvalidArgument for an empty name; the write's error.
  absl::StatusOr<uint64_t> ClaimStream(std::string_view name);
  // The stream's latest epoch (0: never claimed). Errors: the read's error; DataLoss when the
  // stored epoch does not decode.
  absl::StatusOr<uint64_t> StreamEpoch(std::string_view name) const;

  // ---- Violations ----

  // Name of the online engine's checker (ViolationRecord::checker); its violations that are
  // summarised are told apart by the checkpoints, the other checkers' by their ids.
  static constexpr std::string_view kOnlineChecker = "online";

  // Stores each record under its id, or counts it in a summary, as StoreOptions::violation_bounds
  // say (docs/operations.md, "Bounded findings"), in order: in full while each of its groups
  // (its kind on its key, on each of its first two transactions) has kept fewer than its bound
  // and the stored bytes are below max_bytes; otherwise in the summary of the first full group,
  // or past max_bytes in the summary of its kind. Everything is written in one write, each
  // summary once. Does nothing with a record (kDuplicate) whose id was stored in full before or
  // earlier in `records`, or (any checker but the online engine) was summarised before. The
  // online engine's summarised violations are not remembered by id: invariant 5 has the replay
  // after a restart count them once, and the engine reports a violation once otherwise.
  // Errors (nothing is written): InvalidArgument for an empty id; the write's error.
  absl::StatusOr<AddedViolations> AddViolations(std::span<const ViolationRecord> records);
  // AddViolations of one record.
  absl::StatusOr<ViolationOutcome> AddViolation(const ViolationRecord& record);
  // AddViolation, returning whether the violation was new (stored or summarised).
  absl::StatusOr<bool> PutViolation(const ViolationRecord& record);

  // The stored violations matching `filter`, in insertion order, at most `limit` of them,
  // starting at `page_token` (empty: from the first). next_page_token is empty when no matching
  // violation follows the page; otherwise it is the insertion number of the next matching one,
  // as 16 lowercase hexadecimal digits. A query scans records until it has filled the page and
  // found the next match.
  // Errors: InvalidArgument for limit 0 or a token that is not 16 hexadecimal digits; DataLoss
  // when a record does not decode.
  absl::StatusOr<ViolationPage> QueryViolations(const ViolationFilter& filter, size_t limit,
                                                std::string_view page_token) const;

  // The summaries matching `filter` that count at least one violation, in key order (scope,
  // checker, level, anomaly, stream, subject), at most `limit`, from `page_token` (empty: the
  // first). next_page_token is empty when no matching summary follows; otherwise it names the
  // next one (its key in lowercase hexadecimal).
  // Errors: InvalidArgument for limit 0 or a token that is not hexadecimal; DataLoss when a
  // summary does not decode.
  absl::StatusOr<SummaryPage> QuerySummaries(const SummaryFilter& filter, size_t limit,
                                             std::string_view page_token) const;

  // Number of violations stored in full.
  uint64_t CountViolations() const;
  // Every violation added (stored in full or summarised) counted by kind, in kind order. The
  // store keeps the counts with the violations, so this reads no record.
  std::vector<std::pair<ViolationKind, uint64_t>> CountViolationsByKind() const;
  // Of them, those counted in summaries, by kind, in kind order, and in all.
  std::vector<std::pair<ViolationKind, uint64_t>> CountSummarisedByKind() const;
  uint64_t CountSummarised() const;
  // What the violations take in the store now; limit_reached says whether max_bytes is reached.
  ViolationSpace violation_space() const;
  const ViolationBounds& violation_bounds() const { return options_.violation_bounds; }

  // ---- Counter totals ----

  // Stores `blob` (opaque to the store: the daemon's counter totals) in place of the previous
  // one. Not synced (like violations). Errors: the write's error.
  absl::Status SetCounterTotals(std::string_view blob);
  // The blob last stored; empty when none was. Errors: the read's error.
  absl::StatusOr<std::string> CounterTotals() const;

  // ---- Windows ----

  // Records that the windows numbered below `count` (from 0, in the order they were sealed) are
  // done: every plug-in check of them finished, or they were dropped. Recovery does not check
  // them again. Not synced (like violations): after a power failure a few windows may be
  // checked twice, their violations still stored once.
  absl::Status SetWindowsDone(uint64_t count);
  // The count last recorded; 0 when none was. Errors: DataLoss when the value does not decode.
  absl::StatusOr<uint64_t> WindowsDone() const;

  // ---- Memory ----

  // The memory RocksDB holds for the store now (bounded as docs/store-format.md, "Memory",
  // says).
  rocks::RocksDbMemory rocksdb_memory() const;

 private:
  struct Handles;
  // One per stream. `write_mu` is held across the stream's whole append, so that the stream's
  // writes reach RocksDB in sequence order; `record` is its durable state.
  struct StreamState {
    absl::Mutex write_mu;
    mutable absl::Mutex mu ABSL_ACQUIRED_AFTER(write_mu);
    StreamRecord record ABSL_GUARDED_BY(mu);
  };

  Store(std::unique_ptr<Handles> handles, StoreOptions options);

  absl::Status Load();
  // Reads the violation counts by kind and the space (store_violations.cc); rebuilds them from
  // the records and the summaries when they do not add up with `stored` records (a store written
  // before they were kept); then UndoSummaryDeltas.
  absl::Status LoadViolationCounts(uint64_t stored);
  // Counts again, from the records and the summaries, what LoadViolationCounts reads; writes it.
  absl::Status RecountViolations(std::map<ViolationKind, uint64_t>* counts,
                                 std::map<ViolationKind, uint64_t>* summarised,
                                 ViolationSpace* space);
  // Adds to `batch` the deletion of every summary delta.
  absl::Status DeleteSummaryDeltas(rocksdb::WriteBatch& batch) const;
  // Takes the online violations summarised since the last checkpoint out of the summaries and
  // the counts (invariant 5), and forgets them.
  absl::Status UndoSummaryDeltas(std::map<ViolationKind, uint64_t>* counts,
                                 std::map<ViolationKind, uint64_t>* summarised,
                                 ViolationSpace* space);
  // Finds the stream, creating its in-memory state (with the next id) when `create` is set and
  // it is unknown. Returns nullptr when it is unknown and not created.
  StreamState* FindStream(std::string_view name, bool create) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `batch`, synced if `sync`, and makes a failure sticky.
  absl::Status Write(rocksdb::WriteBatch& batch, bool sync, std::string_view what);
  // Returns `status`, making it the store's sticky write error if it is the first failure.
  absl::Status Remember(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Adds to `batch` the deletion of the log entries below `position` and log_start = position;
  // syncs every earlier write; writes `batch`, synced; moves the first log position up.
  absl::Status WriteTruncation(rocksdb::WriteBatch& batch, uint64_t position, std::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(truncate_mu_);
  absl::Status CheckWritable() const;

  const std::unique_ptr<Handles> handles_;
  const StoreOptions options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<StreamState>> streams_ ABSL_GUARDED_BY(mu_);
  // Index: stream id - 1; empty where an id's stream never became durable before a crash.
  std::vector<std::string> stream_names_ ABSL_GUARDED_BY(mu_);
  uint64_t next_position_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t first_position_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status write_error_ ABSL_GUARDED_BY(mu_);

  // Serialises AddViolations, which reads the id index and the summaries before it writes.
  mutable absl::Mutex violations_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  uint64_t next_violation_ ABSL_GUARDED_BY(violations_mu_) = 1;
  std::map<ViolationKind, uint64_t> violation_counts_ ABSL_GUARDED_BY(violations_mu_);
  std::map<ViolationKind, uint64_t> summarised_counts_ ABSL_GUARDED_BY(violations_mu_);
  ViolationSpace space_ ABSL_GUARDED_BY(violations_mu_);
  // next_violation_ - 1, readable without waiting for a write. Release on store, acquire on load.
  std::atomic<uint64_t> violation_count_{0};

  // Serialises SyncLog.
  absl::Mutex sync_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  // Serialises ClaimStream, which reads an epoch before it writes the next.
  absl::Mutex claim_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  // Serialises truncations and checkpoints.
  absl::Mutex truncate_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Generation of the last checkpoint stored; 0 before the first.
  uint64_t checkpoint_generation_ ABSL_GUARDED_BY(truncate_mu_) = 0;
};

}  // namespace isowatch::store
