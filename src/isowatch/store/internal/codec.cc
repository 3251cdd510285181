// SPDX-License-Identifier: Apache-2.0
#include "isowatch/store/internal/codec.h"

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "isowatch/common/status_macros.h"
#include "isowatch/store/internal/database.h"

namespace isowatch::store::internal {
namespace {

// Flag bits shared by the stream and log values.
constexpr uint8_t kHasWatermark = 0x01;
constexpr uint8_t kClosed = 0x02;  // stream closed / end of stream
constexpr uint8_t kKnownFlags = kHasWatermark | kClosed;

template <typename T>
void PutBigEndian(std::string* out, T value) {
  for (int shift = static_cast<int>(sizeof(T) - 1) * 8; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>(static_cast<uint8_t>(value >> shift)));
  }
}

void PutSigned(std::string* out, int64_t value) { PutBigEndian(out, static_cast<uint64_t>(value)); }

void PutString(std::string* out, std::string_view s) {
  PutBigEndian(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// Reads fixed-width fields from the front of a byte string.
class Reader {
 public:
  Reader(std::string_view what, std::string_view bytes) : what_(what), bytes_(bytes) {}

  template <typename T>
  absl::StatusOr<T> BigEndian() {
    if (bytes_.size() < sizeof(T)) return Truncated();
    T value = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      value = static_cast<T>((value << 8) | static_cast<uint8_t>(bytes_[i]));
    }
    bytes_.remove_prefix(sizeof(T));
    return value;
  }

  absl::StatusOr<int64_t> Signed() {
    ASSIGN_OR_RETURN(const uint64_t raw, BigEndian<uint64_t>());
    return static_cast<int64_t>(raw);
  }

  absl::StatusOr<std::string_view> String() {
    ASSIGN_OR_RETURN(const uint32_t size, BigEndian<uint32_t>());
    if (bytes_.size() < size) return Truncated();
    std::string_view s = bytes_.substr(0, size);
    bytes_.remove_prefix(size);
    return s;
  }

  std::string_view Rest() {
    std::string_view rest = bytes_;
    bytes_ = {};
    return rest;
  }

  absl::Status ExpectEnd() const {
    if (bytes_.empty()) return absl::OkStatus();
    return absl::DataLossError(
        fmt::format("{}: {} unexpected bytes at the end of the value", what_, bytes_.size()));
  }

  absl::Status Corrupt(std::string_view why) const {
    return absl::DataLossError(fmt::format("{}: {}", what_, why));
  }

 private:
  absl::Status Truncated() const {
    return absl::DataLossError(fmt::format("{}: value is truncated", what_));
  }

  std::string_view what_;
  std::string_view bytes_;
};

void PutFlagsAndWatermark(std::string* out, const std::optional<history::Timestamp>& watermark,
                          bool closed) {
  uint8_t flags = 0;
  if (watermark.has_value()) flags |= kHasWatermark;
  if (closed) flags |= kClosed;
  out->push_back(static_cast<char>(flags));
  PutSigned(out, watermark ? watermark->physical : 0);
  PutSigned(out, watermark ? watermark->logical : 0);
}

absl::Status ReadFlagsAndWatermark(Reader& r, std::optional<history::Timestamp>* watermark,
                                   bool* closed) {
  ASSIGN_OR_RETURN(const uint8_t flags, r.BigEndian<uint8_t>());
  if ((flags & ~kKnownFlags) != 0) {
    return r.Corrupt(fmt::format("unknown flag bits 0x{:02x}", flags & ~kKnownFlags));
  }
  ASSIGN_OR_RETURN(const int64_t physical, r.Signed());
  ASSIGN_OR_RETURN(const int64_t logical, r.Signed());
  if ((flags & kHasWatermark) != 0) {
    *watermark = history::Timestamp{physical, logical};
  } else {
    watermark->reset();
  }
  *closed = (flags & kClosed) != 0;
  return absl::OkStatus();
}

}  // namespace

std::string EncodeNumberKey(uint64_t number) {
  std::string out;
  PutBigEndian(&out, number);
  return out;
}

std::string EncodeRefusalsKey(uint32_t stream_id, uint64_t seq) {
  std::string out;
  PutBigEndian(&out, stream_id);
  PutBigEndian(&out, seq);
  return out;
}

std::string EncodeCheckpointChunkKey(uint64_t generation, uint32_t chunk) {
  std::string out;
  PutBigEndian(&out, generation);
  PutBigEndian(&out, chunk);
  return out;
}

std::string EncodeCheckpointMeta(const CheckpointMeta& meta) {
  std::string out;
  out.reserve(8 + 8 + 8 + 4 + 8);
  PutBigEndian(&out, meta.generation);
  PutBigEndian(&out, meta.log_position);
  PutBigEndian(&out, meta.size);
  PutBigEndian(&out, meta.chunks);
  PutBigEndian(&out, meta.checksum);
  return out;
}

absl::StatusOr<CheckpointMeta> DecodeCheckpointMeta(std::string_view bytes) {
  Reader r("checkpoint record", bytes);
  CheckpointMeta meta;
  ASSIGN_OR_RETURN(meta.generation, r.BigEndian<uint64_t>());
  ASSIGN_OR_RETURN(meta.log_position, r.BigEndian<uint64_t>());
  ASSIGN_OR_RETURN(meta.size, r.BigEndian<uint64_t>());
  ASSIGN_OR_RETURN(meta.chunks, r.BigEndian<uint32_t>());
  ASSIGN_OR_RETURN(meta.checksum, r.BigEndian<uint64_t>());
  RETURN_IF_ERROR(r.ExpectEnd());
  return meta;
}

absl::StatusOr<uint64_t> DecodeNumberKey(std::string_view key) {
  Reader r("number key", key);
  ASSIGN_OR_RETURN(const uint64_t number, r.BigEndian<uint64_t>());
  RETURN_IF_ERROR(r.ExpectEnd());
  return number;
}

std::string EncodeFormatVersion(uint32_t version) {
  std::string out;
  PutBigEndian(&out, version);
  return out;
}

absl::StatusOr<uint32_t> DecodeFormatVersion(std::string_view value) {
  Reader r("format version", value);
  ASSIGN_OR_RETURN(const uint32_t version, r.BigEndian<uint32_t>());
  RETURN_IF_ERROR(r.ExpectEnd());
  return version;
}

std::string EncodeStreamValue(const StreamValue& value) {
  std::string out;
  out.reserve(4 + 8 + 1 + 16 + value.header.size());
  PutBigEndian(&out, value.id);
  PutBigEndian(&out, value.durable_seq);
  PutFlagsAndWatermark(&out, value.watermark, value.closed);
  out.append(value.header);
  return out;
}

absl::StatusOr<StreamValue> DecodeStreamValue(std::string_view bytes) {
  Reader r("stream record", bytes);
  StreamValue value;
  ASSIGN_OR_RETURN(value.id, r.BigEndian<uint32_t>());
  ASSIGN_OR_RETURN(value.durable_seq, r.BigEndian<uint64_t>());
  RETURN_IF_ERROR(ReadFlagsAndWatermark(r, &value.watermark, &value.closed));
  value.header = std::string(r.Rest());
  return value;
}

std::string EncodeLogValue(const LogValue& value) {
  std::string out;
  out.reserve(4 + 8 + 1 + 16 + value.bytes.size());
  PutBigEndian(&out, value.stream_id);
  PutBigEndian(&out, value.seq);
  PutFlagsAndWatermark(&out, value.watermark, value.end_of_stream);
  out.append(value.bytes);
  return out;
}

absl::StatusOr<LogValue> DecodeLogValue(std::string_view bytes) {
  Reader r("log entry", bytes);
  LogValue value;
  ASSIGN_OR_RETURN(value.stream_id, r.BigEndian<uint32_t>());
  ASSIGN_OR_RETURN(value.seq, r.BigEndian<uint64_t>());
  RETURN_IF_ERROR(ReadFlagsAndWatermark(r, &value.watermark, &value.end_of_stream));
  value.bytes = r.Rest();
  return value;
}

namespace {

std::string EncodeKindKey(std::string_view prefix, const ViolationKind& kind) {
  std::string out(prefix);
  out.reserve(out.size() + 12 + kind.checker.size() + kind.level.size() + kind.anomaly.size());
  PutString(&out, kind.checker);
  PutString(&out, kind.level);
  PutString(&out, kind.anomaly);
  return out;
}

absl::StatusOr<ViolationKind> DecodeKindKey(std::string_view what, std::string_view rest) {
  Reader r(what, rest);
  ViolationKind kind;
  for (std::string* field : {&kind.checker, &kind.level, &kind.anomaly}) {
    ASSIGN_OR_RETURN(const std::string_view s, r.String());
    *field = std::string(s);
  }
  RETURN_IF_ERROR(r.ExpectEnd());
  return kind;
}

void PutStrings(std::string* out, const std::vector<std::string>& strings) {
  PutBigEndian(out, static_cast<uint32_t>(strings.size()));
  for (const std::string& s : strings) PutString(out, s);
}

absl::Status ReadStrings(Reader& r, size_t value_size, std::vector<std::string>* out) {
  ASSIGN_OR_RETURN(const uint32_t count, r.BigEndian<uint32_t>());
  // Each string takes at least its 4-byte length: a count the value cannot hold is corrupt.
  if (count > value_size / 4) return r.Corrupt("a count exceeds the value's size");
  out->clear();
  out->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(const std::string_view s, r.String());
    out->emplace_back(s);
  }
  return absl::OkStatus();
}

void PutSummarised(std::string* out, const SummarisedViolation& v) {
  PutString(out, v.id);
  PutSigned(out, v.finalised_unix_ms);
  PutStrings(out, v.txns);
}

absl::Status ReadSummarised(Reader& r, size_t value_size, SummarisedViolation* v) {
  ASSIGN_OR_RETURN(const std::string_view id, r.String());
  v->id = std::string(id);
  ASSIGN_OR_RETURN(v->finalised_unix_ms, r.Signed());
  return ReadStrings(r, value_size, &v->txns);
}

}  // namespace

std::string EncodeViolationCountKey(const ViolationKind& kind) {
  return EncodeKindKey(kViolationCountPrefix, kind);
}

absl::StatusOr<ViolationKind> DecodeViolationCountKey(std::string_view key) {
  return DecodeKindKey("violation count key", key.substr(kViolationCountPrefix.size()));
}

std::string EncodeSummarisedCountKey(const ViolationKind& kind) {
  return EncodeKindKey(kSummarisedCountPrefix, kind);
}

absl::StatusOr<ViolationKind> DecodeSummarisedCountKey(std::string_view key) {
  return DecodeKindKey("summarised count key", key.substr(kSummarisedCountPrefix.size()));
}

std::string EncodeSummaryKey(const ViolationSummary& summary) {
  std::string out;
  out.push_back(static_cast<char>(summary.scope));
  for (const std::string* s :
       {&summary.checker, &summary.level, &summary.anomaly, &summary.stream, &summary.subject}) {
    PutString(&out, *s);
  }
  return out;
}

absl::Status DecodeSummaryKey(std::string_view key, ViolationSummary* summary) {
  Reader r("summary key", key);
  ASSIGN_OR_RETURN(const uint8_t scope, r.BigEndian<uint8_t>());
  if (scope > static_cast<uint8_t>(SummaryScope::kKind)) {
    return r.Corrupt(fmt::format("unknown scope {}", scope));
  }
  summary->scope = static_cast<SummaryScope>(scope);
  for (std::string* s : {&summary->checker, &summary->level, &summary->anomaly, &summary->stream,
                         &summary->subject}) {
    ASSIGN_OR_RETURN(const std::string_view v, r.String());
    *s = std::string(v);
  }
  return r.ExpectEnd();
}

std::string EncodeSummaryValue(const ViolationSummary& summary) {
  std::string out;
  PutBigEndian(&out, summary.kept);
  PutBigEndian(&out, summary.summarised);
  PutSummarised(&out, summary.first);
  PutSummarised(&out, summary.last);
  PutStrings(&out, summary.streams);
  return out;
}

absl::Status DecodeSummaryValue(std::string_view bytes, ViolationSummary* summary) {
  Reader r("summary", bytes);
  ASSIGN_OR_RETURN(summary->kept, r.BigEndian<uint64_t>());
  ASSIGN_OR_RETURN(summary->summarised, r.BigEndian<uint64_t>());
  RETURN_IF_ERROR(ReadSummarised(r, bytes.size(), &summary->first));
  RETURN_IF_ERROR(ReadSummarised(r, bytes.size(), &summary->last));
  RETURN_IF_ERROR(ReadStrings(r, bytes.size(), &summary->streams));
  return r.ExpectEnd();
}

std::string EncodeViolationSpace(const ViolationSpace& space) {
  std::string out;
  PutBigEndian(&out, space.bytes);
  PutBigEndian(&out, space.summaries);
  return out;
}

absl::StatusOr<ViolationSpace> DecodeViolationSpace(std::string_view bytes) {
  Reader r("violation space", bytes);
  ViolationSpace space;
  ASSIGN_OR_RETURN(space.bytes, r.BigEndian<uint64_t>());
  ASSIGN_OR_RETURN(space.summaries, r.BigEndian<uint64_t>());
  RETURN_IF_ERROR(r.ExpectEnd());
  return space;
}

std::string EncodeViolation(const ViolationRecord& record) {
  std::string out;
  size_t size = size_t{5} * 4 + record.id.size() + record.checker.size() + record.level.size() +
                record.anomaly.size() + record.ext_kind.size() + 4 + 8 + 4 + record.json.size();
  for (const std::string& s : record.streams) size += 4 + s.size();
  out.reserve(size);
  PutString(&out, record.id);
  PutString(&out, record.checker);
  PutString(&out, record.level);
  PutString(&out, record.anomaly);
  PutString(&out, record.ext_kind);
  PutBigEndian(&out, static_cast<uint32_t>(record.streams.size()));
  for (const std::string& s : record.streams) PutString(&out, s);
  PutSigned(&out, record.finalised_unix_ms);
  PutString(&out, record.json);
  return out;
}

absl::StatusOr<ViolationRecord> DecodeViolation(std::string_view bytes) {
  Reader r("violation record", bytes);
  ViolationRecord record;
  for (std::string* field :
       {&record.id, &record.checker, &record.level, &record.anomaly, &record.ext_kind}) {
    ASSIGN_OR_RETURN(const std::string_view s, r.String());
    *field = std::string(s);
  }
  ASSIGN_OR_RETURN(const uint32_t stream_count, r.BigEndian<uint32_t>());
  // Each stream takes at least its 4-byte length: a count the value cannot hold is corrupt, and
  // is refused before it can size an allocation.
  if (stream_count > bytes.size() / 4) return r.Corrupt("stream count exceeds the value's size");
  record.streams.reserve(stream_count);
  for (uint32_t i = 0; i < stream_count; ++i) {
    ASSIGN_OR_RETURN(const std::string_view s, r.String());
    record.streams.emplace_back(s);
  }
  ASSIGN_OR_RETURN(record.finalised_unix_ms, r.Signed());
  ASSIGN_OR_RETURN(const std::string_view json, r.String());
  record.json = std::string(json);
  RETURN_IF_ERROR(r.ExpectEnd());
  return record;
}

}  // namespace isowatch::store::internal
