// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collectors/postgres/internal/wire.h"
#include "collectors/postgres/pgoutput.h"

// Hand-built pgoutput protocol version 1 messages, field by field, for the decoder's tests.

namespace isowatch::pg::testing {

// One message under construction.
class MessageBytes {
 public:
  explicit MessageBytes(char tag) { bytes_.push_back(tag); }
  MessageBytes& U8(uint8_t v) { return Int(v); }
  MessageBytes& U16(uint16_t v) { return Int(v); }
  MessageBytes& U32(uint32_t v) { return Int(v); }
  MessageBytes& U64(uint64_t v) { return Int(v); }
  MessageBytes& Str(std::string_view s) {
    internal::AppendCString(s, &bytes_);
    return *this;
  }
  MessageBytes& Counted(std::string_view s) {  // Int32 length, then the bytes
    U32(static_cast<uint32_t>(s.size()));
    bytes_.append(s);
    return *this;
  }
  MessageBytes& Tuple(const PgTuple& tuple) {
    U16(static_cast<uint16_t>(tuple.size()));
    for (const PgColumnValue& v : tuple) {
      switch (v.kind) {
        case PgColumnValue::Kind::kNull:
          bytes_.push_back('n');
          break;
        case PgColumnValue::Kind::kUnchangedToast:
          bytes_.push_back('u');
          break;
        case PgColumnValue::Kind::kText:
          bytes_.push_back('t');
          Counted(v.data);
          break;
        case PgColumnValue::Kind::kBinary:
          bytes_.push_back('b');
          Counted(v.data);
          break;
      }
    }
    return *this;
  }
  std::string str() const { return bytes_; }
  operator std::string() const { return bytes_; }  // NOLINT: a builder

 private:
  template <typename T>
  MessageBytes& Int(T v) {
    internal::AppendBigEndian(v, &bytes_);
    return *this;
  }
  std::string bytes_;
};

inline PgColumnValue Text(std::string s) { return {PgColumnValue::Kind::kText, std::move(s)}; }
inline PgColumnValue Null() { return {PgColumnValue::Kind::kNull, {}}; }
inline PgColumnValue Toast() { return {PgColumnValue::Kind::kUnchangedToast, {}}; }

// 2026-01-01 00:00:00 UTC in PostgreSQL's epoch (2000-01-01), and in the Unix epoch.
constexpr int64_t kPgTime = int64_t{820'540'800} * 1'000'000;
constexpr int64_t kUnixTime = kPgTime + int64_t{946'684'800} * 1'000'000;

inline std::string Begin(Lsn final_lsn, uint32_t xid) {
  return MessageBytes('B').U64(final_lsn).U64(kPgTime).U32(xid);
}
inline std::string Commit(Lsn commit_lsn, Lsn end_lsn) {
  return MessageBytes('C').U8(0).U64(commit_lsn).U64(end_lsn).U64(kPgTime);
}
// Columns as (name, part of the key); every type is int4 (OID 23).
inline std::string Relation(uint32_t oid, std::string_view schema, std::string_view name,
                            const std::vector<std::pair<std::string, bool>>& columns) {
  MessageBytes m('R');
  m.U32(oid).Str(schema).Str(name).U8('d').U16(static_cast<uint16_t>(columns.size()));
  for (const auto& [column, key] : columns) {
    m.U8(key ? 1 : 0).Str(column).U32(23).U32(0xffffffff);
  }
  return m;
}
inline std::string Insert(uint32_t oid, const PgTuple& row) {
  return MessageBytes('I').U32(oid).U8('N').Tuple(row);
}
// old_kind 0: no old tuple.
inline std::string Update(uint32_t oid, char old_kind, const PgTuple& old_row,
                          const PgTuple& new_row) {
  MessageBytes m('U');
  m.U32(oid);
  if (old_kind != 0) m.U8(static_cast<uint8_t>(old_kind)).Tuple(old_row);
  return m.U8('N').Tuple(new_row);
}
inline std::string Delete(uint32_t oid, char old_kind, const PgTuple& old_row) {
  return MessageBytes('D').U32(oid).U8(static_cast<uint8_t>(old_kind)).Tuple(old_row);
}
inline std::string Truncate(const std::vector<uint32_t>& oids) {
  MessageBytes m('T');
  m.U32(static_cast<uint32_t>(oids.size())).U8(0);
  for (uint32_t oid : oids) m.U32(oid);
  return m;
}
inline std::string Message(bool transactional, Lsn lsn, std::string_view prefix,
                           std::string_view content) {
  return MessageBytes('M').U8(transactional ? 1 : 0).U64(lsn).Str(prefix).Counted(content);
}
inline std::string Origin(Lsn lsn, std::string_view name) {
  return MessageBytes('O').U64(lsn).Str(name);
}
inline std::string Type(uint32_t oid, std::string_view schema, std::string_view name) {
  return MessageBytes('Y').U32(oid).Str(schema).Str(name);
}

}  // namespace isowatch::pg::testing
