// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/pgoutput.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "fmt/format.h"

#include "isowatch/common/status_macros.h"

#include "collectors/postgres/internal/wire.h"

namespace isowatch::pg {
namespace {

using internal::WireReader;

// 2000-01-01 minus 1970-01-01, in microseconds.
constexpr int64_t kPgEpochOffsetMicros = int64_t{946'684'800} * 1'000'000;

// Reads the fields of one message, remembering which message it is for the error texts.
class MessageReader {
 public:
  MessageReader(std::string_view bytes, std::string_view what) : reader_(bytes), what_(what) {}

  absl::Status Uint8(std::string_view field, uint8_t* out) {
    return Check(reader_.ReadUint8(out), field);
  }
  absl::Status Char(std::string_view field, char* out) {
    uint8_t byte = 0;
    RETURN_IF_ERROR(Check(reader_.ReadUint8(&byte), field));
    *out = static_cast<char>(byte);
    return absl::OkStatus();
  }
  absl::Status Uint16(std::string_view field, uint16_t* out) {
    return Check(reader_.ReadUint16(out), field);
  }
  absl::Status Uint32(std::string_view field, uint32_t* out) {
    return Check(reader_.ReadUint32(out), field);
  }
  absl::Status Int32(std::string_view field, int32_t* out) {
    return Check(reader_.ReadInt32(out), field);
  }
  absl::Status Uint64(std::string_view field, uint64_t* out) {
    return Check(reader_.ReadUint64(out), field);
  }
  absl::Status Timestamp(std::string_view field, int64_t* out) {
    int64_t pg_micros = 0;
    RETURN_IF_ERROR(Check(reader_.ReadInt64(&pg_micros), field));
    absl::StatusOr<int64_t> unix_micros = PgTimestampToUnixMicros(pg_micros);
    if (!unix_micros.ok()) return Error(fmt::format("{} out of range", field));
    *out = *unix_micros;
    return absl::OkStatus();
  }
  absl::Status CString(std::string_view field, std::string* out) {
    if (reader_.ReadCString(out)) return absl::OkStatus();
    return Error(fmt::format("{} is not NUL-terminated", field));
  }
  // An Int32 length, then that many bytes.
  absl::Status LengthPrefixed(std::string_view field, std::string* out) {
    int32_t length = 0;
    RETURN_IF_ERROR(Int32(field, &length));
    if (length < 0) return Error(fmt::format("{} has a negative length {}", field, length));
    return Check(reader_.ReadBytes(static_cast<size_t>(length), out), field);
  }

  absl::Status Tuple(std::string_view field, PgTuple* out) {
    uint16_t count = 0;
    RETURN_IF_ERROR(Uint16(field, &count));
    // Each column takes at least one byte: a count beyond what is left is a lie, and reserving
    // for it would let a 3-byte input allocate 64K columns.
    if (count > reader_.remaining()) {
      return Error(
          fmt::format("{} claims {} columns in {} bytes", field, count, reader_.remaining()));
    }
    out->clear();
    out->reserve(count);
    for (uint16_t i = 0; i < count; ++i) {
      PgColumnValue value;
      char kind = 0;
      RETURN_IF_ERROR(Char(field, &kind));
      switch (kind) {
        case 'n':
          value.kind = PgColumnValue::Kind::kNull;
          break;
        case 'u':
          value.kind = PgColumnValue::Kind::kUnchangedToast;
          break;
        case 't':
          value.kind = PgColumnValue::Kind::kText;
          RETURN_IF_ERROR(LengthPrefixed(field, &value.data));
          break;
        case 'b':
          value.kind = PgColumnValue::Kind::kBinary;
          RETURN_IF_ERROR(LengthPrefixed(field, &value.data));
          break;
        default:
          return Error(fmt::format("{} column {} has an unknown kind {}", field, i,
                                   static_cast<int>(static_cast<uint8_t>(kind))));
      }
      out->push_back(std::move(value));
    }
    return absl::OkStatus();
  }

  // REQUIRES: the whole message was read.
  absl::Status End() const {
    if (reader_.remaining() == 0) return absl::OkStatus();
    return Error(fmt::format("{} trailing bytes", reader_.remaining()));
  }

  absl::Status Error(std::string_view problem) const {
    return absl::InvalidArgumentError(
        fmt::format("pgoutput {} message at byte {}: {}", what_, reader_.position(), problem));
  }

 private:
  absl::Status Check(bool ok, std::string_view field) const {
    return ok ? absl::OkStatus() : Error(fmt::format("truncated in {}", field));
  }

  WireReader reader_;
  std::string_view what_;
};

absl::StatusOr<PgoutputMessage> ParseBegin(MessageReader& r) {
  PgBegin m;
  RETURN_IF_ERROR(r.Uint64("final LSN", &m.final_lsn));
  RETURN_IF_ERROR(r.Timestamp("commit timestamp", &m.commit_time_us));
  RETURN_IF_ERROR(r.Uint32("xid", &m.xid));
  return m;
}

absl::StatusOr<PgoutputMessage> ParseCommit(MessageReader& r) {
  PgCommit m;
  RETURN_IF_ERROR(r.Uint8("flags", &m.flags));
  RETURN_IF_ERROR(r.Uint64("commit LSN", &m.commit_lsn));
  RETURN_IF_ERROR(r.Uint64("end LSN", &m.end_lsn));
  RETURN_IF_ERROR(r.Timestamp("commit timestamp", &m.commit_time_us));
  return m;
}

absl::StatusOr<PgoutputMessage> ParseOrigin(MessageReader& r) {
  PgOrigin m;
  RETURN_IF_ERROR(r.Uint64("origin commit LSN", &m.commit_lsn));
  RETURN_IF_ERROR(r.CString("origin name", &m.name));
  return m;
}

absl::StatusOr<PgoutputMessage> ParseRelation(MessageReader& r) {
  PgRelation m;
  RETURN_IF_ERROR(r.Uint32("relation OID", &m.oid));
  RETURN_IF_ERROR(r.CString("namespace", &m.schema));
  RETURN_IF_ERROR(r.CString("relation name", &m.name));
  RETURN_IF_ERROR(r.Char("replica identity", &m.replica_identity));
  uint16_t count = 0;
  RETURN_IF_ERROR(r.Uint16("column count", &count));
  for (uint16_t i = 0; i < count; ++i) {
    PgRelation::Column column;
    uint8_t flags = 0;
    RETURN_IF_ERROR(r.Uint8("column flags", &flags));
    column.part_of_key = (flags & 1) != 0;
    RETURN_IF_ERROR(r.CString("column name", &column.name));
    RETURN_IF_ERROR(r.Uint32("column type OID", &column.type_oid));
    RETURN_IF_ERROR(r.Int32("column type modifier", &column.type_modifier));
    m.columns.push_back(std::move(column));
  }
  return m;
}

absl::StatusOr<PgoutputMessage> ParseType(MessageReader& r) {
  PgType m;
  RETURN_IF_ERROR(r.Uint32("type OID", &m.oid));
  RETURN_IF_ERROR(r.CString("namespace", &m.schema));
  RETURN_IF_ERROR(r.CString("type name", &m.name));
  return m;
}

// The byte that introduces a tuple: 'N' (new), 'K' (old key) or 'O' (old row).
absl::Status ExpectTupleTag(MessageReader& r, std::string_view allowed, char* tag) {
  RETURN_IF_ERROR(r.Char("tuple tag", tag));
  if (*tag == '\0' || allowed.find(*tag) == std::string_view::npos) {
    return r.Error(fmt::format("tuple tag {} where {} was expected",
                               static_cast<int>(static_cast<uint8_t>(*tag)), allowed));
  }
  return absl::OkStatus();
}

absl::StatusOr<PgoutputMessage> ParseInsert(MessageReader& r) {
  PgInsert m;
  char tag = 0;
  RETURN_IF_ERROR(r.Uint32("relation OID", &m.relation_oid));
  RETURN_IF_ERROR(ExpectTupleTag(r, "N", &tag));
  RETURN_IF_ERROR(r.Tuple("new tuple", &m.new_tuple));
  return m;
}

absl::StatusOr<PgoutputMessage> ParseUpdate(MessageReader& r) {
  PgUpdate m;
  char tag = 0;
  RETURN_IF_ERROR(r.Uint32("relation OID", &m.relation_oid));
  RETURN_IF_ERROR(ExpectTupleTag(r, "KON", &tag));
  if (tag != 'N') {
    m.old_kind = tag;
    RETURN_IF_ERROR(r.Tuple("old tuple", &m.old_tuple));
    RETURN_IF_ERROR(ExpectTupleTag(r, "N", &tag));
  }
  RETURN_IF_ERROR(r.Tuple("new tuple", &m.new_tuple));
  return m;
}

absl::StatusOr<PgoutputMessage> ParseDelete(MessageReader& r) {
  PgDelete m;
  RETURN_IF_ERROR(r.Uint32("relation OID", &m.relation_oid));
  RETURN_IF_ERROR(ExpectTupleTag(r, "KO", &m.old_kind));
  RETURN_IF_ERROR(r.Tuple("old tuple", &m.old_tuple));
  return m;
}

absl::StatusOr<PgoutputMessage> ParseTruncate(MessageReader& r) {
  PgTruncate m;
  uint32_t count = 0;
  RETURN_IF_ERROR(r.Uint32("relation count", &count));
  RETURN_IF_ERROR(r.Uint8("options", &m.options));
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t oid = 0;
    RETURN_IF_ERROR(r.Uint32("relation OID", &oid));
    m.relation_oids.push_back(oid);
  }
  return m;
}

absl::StatusOr<PgoutputMessage> ParseLogicalMessage(MessageReader& r) {
  PgLogicalMessage m;
  uint8_t flags = 0;
  RETURN_IF_ERROR(r.Uint8("flags", &flags));
  m.transactional = (flags & 1) != 0;
  RETURN_IF_ERROR(r.Uint64("message LSN", &m.lsn));
  RETURN_IF_ERROR(r.CString("prefix", &m.prefix));
  RETURN_IF_ERROR(r.LengthPrefixed("content", &m.content));
  return m;
}

bool ParseHexHalf(std::string_view text, uint32_t* out) {
  if (text.empty() || text.size() > 8) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
    const uint32_t digit = absl::ascii_isdigit(static_cast<unsigned char>(c))
                               ? static_cast<uint32_t>(c - '0')
                               : static_cast<uint32_t>(absl::ascii_tolower(c) - 'a' + 10);
    value = (value << 4) | digit;
  }
  *out = value;
  return true;
}

}  // namespace

std::string LsnToString(Lsn lsn) {
  return fmt::format("{:X}/{:X}", static_cast<uint32_t>(lsn >> 32), static_cast<uint32_t>(lsn));
}

absl::StatusOr<Lsn> ParseLsn(std::string_view text) {
  const size_t slash = text.find('/');
  uint32_t high = 0;
  uint32_t low = 0;
  if (slash == std::string_view::npos || !ParseHexHalf(text.substr(0, slash), &high) ||
      !ParseHexHalf(text.substr(slash + 1), &low)) {
    return absl::InvalidArgumentError(
        fmt::format("'{}' is not an LSN (two hexadecimal numbers: 16/B374D848)", text));
  }
  return (Lsn{high} << 32) | low;
}

absl::StatusOr<int64_t> PgTimestampToUnixMicros(int64_t pg_micros) {
  if (pg_micros > std::numeric_limits<int64_t>::max() - kPgEpochOffsetMicros) {
    return absl::InvalidArgumentError(fmt::format("timestamp {} out of range", pg_micros));
  }
  return pg_micros + kPgEpochOffsetMicros;
}

absl::StatusOr<PgoutputMessage> ParsePgoutputMessage(std::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("pgoutput: empty message");
  struct Kind {
    char tag = 0;
    std::string_view name;
    absl::StatusOr<PgoutputMessage> (*parse)(MessageReader&);
  };
  static constexpr Kind kKinds[] = {
      {'B', "Begin", ParseBegin},       {'C', "Commit", ParseCommit},
      {'O', "Origin", ParseOrigin},     {'R', "Relation", ParseRelation},
      {'Y', "Type", ParseType},         {'I', "Insert", ParseInsert},
      {'U', "Update", ParseUpdate},     {'D', "Delete", ParseDelete},
      {'T', "Truncate", ParseTruncate}, {'M', "Message", ParseLogicalMessage},
  };
  for (const Kind& kind : kKinds) {
    if (kind.tag != bytes[0]) continue;
    MessageReader reader(bytes.substr(1), kind.name);
    ASSIGN_OR_RETURN(PgoutputMessage message, kind.parse(reader));
    RETURN_IF_ERROR(reader.End());
    return message;
  }
  // Stream Start/Stop/Commit/Abort, Begin Prepare, Prepare, Commit Prepared, Rollback Prepared,
  // Stream Prepare.
  if (std::string_view("SEcAbPKrp").find(bytes[0]) != std::string_view::npos) {
    return absl::InvalidArgumentError(
        fmt::format("pgoutput: message '{}' belongs to streaming or two-phase decoding (protocol "
                    "version 2 and later), which this decoder does not request",
                    bytes[0]));
  }
  return absl::InvalidArgumentError(fmt::format("pgoutput: unknown message type {}",
                                                static_cast<int>(static_cast<uint8_t>(bytes[0]))));
}

}  // namespace isowatch::pg
