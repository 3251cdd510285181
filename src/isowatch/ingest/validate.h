// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

#include "isowatch/ingest/id_registry.h"
#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest {

// What one batch may hold. A batch over max_batch_txns or max_batch_bytes is refused whole
// (BATCH_TOO_LARGE); a transaction over max_ops_per_txn is refused alone (TOO_MANY_OPERATIONS).
struct ValidationLimits {
  uint32_t max_batch_txns = 65536;
  uint64_t max_batch_bytes = uint64_t{32} << 20;
  uint32_t max_ops_per_txn = 65536;
};

// The longest stream name accepted, in bytes.
inline constexpr size_t kMaxStreamNameBytes = 200;
// The longest transaction id accepted, in bytes (as text: TxnIdString).
inline constexpr size_t kMaxTxnIdBytes = 1024;
// Refusal.detail is cut to this many bytes.
inline constexpr size_t kMaxRefusalDetailBytes = 256;
// The highest session position (Transaction.seq) accepted: the live history numbers a session's
// transactions in 32 bits and keeps one value for itself.
inline constexpr int64_t kMaxSessionSeq = int64_t{UINT32_MAX} - 1;

// Number of values of v1::RefusalReason (including REFUSAL_REASON_UNSPECIFIED = 0): an array of
// this size indexed by the reason holds one counter per reason.
inline constexpr int kRefusalReasonCount = v1::RefusalReason_ARRAYSIZE;

// The reason's name for a counter label: the enum name in lower case ("missing_commit_timestamp",
// "id_reused", ...); "unspecified" for REFUSAL_REASON_UNSPECIFIED and "unknown" for a value the
// enum does not have. Stable: dashboards and alerts depend on it.
std::string_view RefusalReasonName(v1::RefusalReason reason);

// Why one transaction (or header) is malformed.
struct Problem {
  v1::RefusalReason reason = v1::REFUSAL_REASON_UNSPECIFIED;
  std::string detail;
};

// The first problem of `txn` as a member of a batch of `stream`, or nullopt if it is well formed.
// The rules follow the native history format's (docs/history-format.md, docs/ingest-protocol.md):
// an id is required; a committed transaction (status COMMITTED or unset) needs a commit
// timestamp, an aborted or unknown one does not; start <= commit when both are given; a session
// position is 0 to kMaxSessionSeq; every operation has a kind, a key, and the value or list its
// kind calls for.
std::optional<Problem> CheckTransaction(const v1::Transaction& txn, std::string_view stream,
                                        const ValidationLimits& limits);

// The first problem of a batch's header, or nullopt: version 0 (unset) or 1; every initial
// register and list has a key, listed once; every list element has a value.
std::optional<Problem> CheckHeader(const v1::Header& header);

// OK if `stream` can name a stream: 1 to kMaxStreamNameBytes bytes, no ASCII control characters.
// InvalidArgument otherwise.
absl::Status CheckStreamName(std::string_view stream);

// The outcome of ValidateBatch.
struct BatchValidation {
  // Indices into IngestBatch.txns of the transactions to apply, in batch order.
  std::vector<uint32_t> accepted;
  // TxnFingerprint and TxnIdString of each accepted transaction, parallel to `accepted`.
  std::vector<uint64_t> fingerprints;
  std::vector<std::string> ids;
  // One per refused transaction in batch order, or one with whole_batch set.
  std::vector<v1::Refusal> refusals;
  // Transactions skipped because their id was already accepted (earlier on the stream or earlier
  // in this batch) with the same content.
  uint32_t duplicates = 0;
  // The batch is refused whole (BATCH_TOO_LARGE or INVALID_HEADER): `accepted` is empty.
  bool whole_batch_refused = false;
};

// Validates `batch` against `limits`, and its ids against `registry` (Check only: nothing is
// recorded). Never fails: whatever the input, the result says what to keep and what to refuse.
// Does not look at the batch's stream name, seq, watermark or end_of_stream (the service's
// part). Thread-compatible; `registry` as documented there.
// `serialized_bytes`: the size of the batch as received, if known (else it is computed).
BatchValidation ValidateBatch(const v1::IngestBatch& batch, const ValidationLimits& limits,
                              IdRegistry& registry,
                              std::optional<uint64_t> serialized_bytes = std::nullopt);

// A refusal of transaction `index` of the batch with sequence number `seq`, its detail cut to
// kMaxRefusalDetailBytes and its id to kMaxTxnIdBytes.
v1::Refusal MakeRefusal(uint64_t seq, uint32_t index, std::string_view txn_id,
                        v1::RefusalReason reason, std::string_view detail);
// A refusal of the whole batch with sequence number `seq`.
v1::Refusal MakeBatchRefusal(uint64_t seq, v1::RefusalReason reason, std::string_view detail);

// The refusals of one batch found at two stages (validation, then the sink), each in batch
// order, as its ack lists them: together, in batch order (stable: a batch refusal first).
std::vector<v1::Refusal> MergeRefusals(std::span<const v1::Refusal> first,
                                       std::span<const v1::Refusal> second);

}  // namespace isowatch::ingest
