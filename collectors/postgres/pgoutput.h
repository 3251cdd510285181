// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

#include "collectors/postgres/decoded_txn.h"

// The messages of PostgreSQL's built-in logical decoding output plugin, pgoutput, protocol
// version 1 (docs/collectors/postgres.md, "Logical decoding"; PostgreSQL's documentation,
// "Logical Replication Message Formats"). Decoding only: no I/O, no state.

namespace isowatch::pg {

// Parses "16/B374D848" (two hexadecimal halves of at most 8 digits each, upper or lower case).
// INVALID_ARGUMENT otherwise.
absl::StatusOr<Lsn> ParseLsn(std::string_view text);

// Microseconds since 2000-01-01 (PostgreSQL's epoch) to microseconds since 1970-01-01.
// INVALID_ARGUMENT if the result would not fit in 64 bits.
absl::StatusOr<int64_t> PgTimestampToUnixMicros(int64_t pg_micros);

// 'B': the first message of a transaction.
struct PgBegin {
  Lsn final_lsn = 0;           // the LSN of the commit record
  int64_t commit_time_us = 0;  // microseconds since the Unix epoch
  uint32_t xid = 0;
};

// 'C': the last message of a transaction.
struct PgCommit {
  uint8_t flags = 0;
  Lsn commit_lsn = 0;
  Lsn end_lsn = 0;
  int64_t commit_time_us = 0;  // microseconds since the Unix epoch
};

// 'O': the transaction came from another node through replication.
struct PgOrigin {
  Lsn commit_lsn = 0;  // on the origin
  std::string name;
};

// 'R': a table's schema; sent before the first change of the table in a session, and again
// after the table changes.
struct PgRelation {
  struct Column {
    bool part_of_key = false;
    std::string name;
    uint32_t type_oid = 0;
    int32_t type_modifier = 0;
  };
  uint32_t oid = 0;
  std::string schema;  // empty for pg_catalog
  std::string name;
  char replica_identity = 'd';  // 'd' default, 'n' nothing, 'f' full, 'i' index
  std::vector<Column> columns;
};

// 'Y': a non-built-in data type.
struct PgType {
  uint32_t oid = 0;
  std::string schema;
  std::string name;
};

// One column of a TupleData.
struct PgColumnValue {
  enum class Kind : uint8_t {
    kNull,            // 'n'
    kUnchangedToast,  // 'u': the value is TOASTed, unchanged and not sent
    kText,            // 't': text output format
    kBinary,          // 'b': binary format (only when `binary 'true'` was requested)
  };
  Kind kind = Kind::kNull;
  std::string data;  // kText, kBinary only

  bool operator==(const PgColumnValue&) const = default;
};
using PgTuple = std::vector<PgColumnValue>;

// 'I'.
struct PgInsert {
  uint32_t relation_oid = 0;
  PgTuple new_tuple;
};

// 'U'. The old tuple is there only with REPLICA IDENTITY FULL ('O') or when the key changed
// ('K': key columns only, the others null).
struct PgUpdate {
  uint32_t relation_oid = 0;
  char old_kind = 0;  // 0 (absent), 'K' or 'O'
  PgTuple old_tuple;
  PgTuple new_tuple;
};

// 'D'.
struct PgDelete {
  uint32_t relation_oid = 0;
  char old_kind = 'K';  // 'K' or 'O'
  PgTuple old_tuple;
};

// 'T'.
struct PgTruncate {
  uint8_t options = 0;  // 1: CASCADE, 2: RESTART IDENTITY
  std::vector<uint32_t> relation_oids;
};

// 'M': pg_logical_emit_message(transactional, prefix, content), with `messages 'true'`.
struct PgLogicalMessage {
  bool transactional = false;
  Lsn lsn = 0;
  std::string prefix;
  std::string content;
};

using PgoutputMessage = std::variant<PgBegin, PgCommit, PgOrigin, PgRelation, PgType, PgInsert,
                                     PgUpdate, PgDelete, PgTruncate, PgLogicalMessage>;

// Decodes one pgoutput message (the payload of one XLogData). INVALID_ARGUMENT, naming the
// message and what is wrong, if `bytes` is empty, truncated, longer than its message, or of an
// unknown or unsupported kind (the streaming and two-phase messages of protocol versions 2-4).
absl::StatusOr<PgoutputMessage> ParsePgoutputMessage(std::string_view bytes);

}  // namespace isowatch::pg
