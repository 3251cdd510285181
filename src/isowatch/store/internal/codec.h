// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/history/timestamp.h"
#include "isowatch/store/violation_record.h"

// Byte encodings of the store's keys and values (docs/store-format.md). Every integer is
// big-endian; signed integers are their two's complement. Decoders never trust their input: a
// value that does not decode exactly is reported as absl::DataLossError.
namespace isowatch::store::internal {

// The 8-byte big-endian key of a log position or a violation's insertion number: byte order is
// numeric order.
std::string EncodeNumberKey(uint64_t number);
absl::StatusOr<uint64_t> DecodeNumberKey(std::string_view key);

// The 12-byte key of a batch's refusals: the stream's id (u32), then the batch's seq (u64), both
// big-endian, so a stream's entries are contiguous and in seq order.
std::string EncodeRefusalsKey(uint32_t stream_id, uint64_t seq);

// The 12-byte key of a checkpoint's chunk: the checkpoint's generation (u64), then the chunk's
// index (u32), both big-endian, so a checkpoint's chunks are contiguous and in order.
std::string EncodeCheckpointChunkKey(uint64_t generation, uint32_t chunk);

// Value of the "checkpoint" meta key: where the last checkpoint is and how to check it.
struct CheckpointMeta {
  uint64_t generation = 0;
  uint64_t log_position = 0;
  uint64_t size = 0;  // bytes of the blob
  uint32_t chunks = 0;
  uint64_t checksum = 0;  // XXH3-64 (seed 0) of the blob
};
std::string EncodeCheckpointMeta(const CheckpointMeta& meta);
absl::StatusOr<CheckpointMeta> DecodeCheckpointMeta(std::string_view bytes);

// Value of the "format_version" meta key.
std::string EncodeFormatVersion(uint32_t version);
absl::StatusOr<uint32_t> DecodeFormatVersion(std::string_view value);

// What the `streams` column family holds per stream (the name is the key).
struct StreamValue {
  uint32_t id = 0;
  uint64_t durable_seq = 0;
  std::optional<history::Timestamp> watermark;
  bool closed = false;
  std::string header;
};
std::string EncodeStreamValue(const StreamValue& value);
absl::StatusOr<StreamValue> DecodeStreamValue(std::string_view bytes);

// A log entry's value. `bytes` of the decoded form points into the decoded input.
struct LogValue {
  uint32_t stream_id = 0;
  uint64_t seq = 0;
  std::optional<history::Timestamp> watermark;
  bool end_of_stream = false;
  std::string_view bytes;
};
std::string EncodeLogValue(const LogValue& value);
absl::StatusOr<LogValue> DecodeLogValue(std::string_view bytes);

// The "violation_count:" meta key of a violation kind: the prefix, then the checker, the level and
// the anomaly as strings. Its value is a u64 (EncodeNumberKey).
std::string EncodeViolationCountKey(const ViolationKind& kind);
// REQUIRES: `key` starts with the prefix.
absl::StatusOr<ViolationKind> DecodeViolationCountKey(std::string_view key);

std::string EncodeViolation(const ViolationRecord& record);
absl::StatusOr<ViolationRecord> DecodeViolation(std::string_view bytes);

// The "violation_summarised:" meta key of a violation kind, as EncodeViolationCountKey. Its value
// is a u64: the violations of the kind counted in summaries.
std::string EncodeSummarisedCountKey(const ViolationKind& kind);
// REQUIRES: `key` starts with the prefix.
absl::StatusOr<ViolationKind> DecodeSummarisedCountKey(std::string_view key);

// The key of a summary in `violation_summaries` (and of its count in `summary_deltas`): the
// scope (u8), then the checker, the level, the anomaly, the stream and the subject as strings.
std::string EncodeSummaryKey(const ViolationSummary& summary);
// Sets the fields of `*summary` the key holds.
absl::Status DecodeSummaryKey(std::string_view key, ViolationSummary* summary);
// The rest of a summary: kept, summarised, the first and the last summarised violation, streams.
std::string EncodeSummaryValue(const ViolationSummary& summary);
absl::Status DecodeSummaryValue(std::string_view bytes, ViolationSummary* summary);

// Value of the "violation_space" meta key: bytes, then summaries (limit_reached is not kept).
std::string EncodeViolationSpace(const ViolationSpace& space);
absl::StatusOr<ViolationSpace> DecodeViolationSpace(std::string_view bytes);

}  // namespace isowatch::store::internal
