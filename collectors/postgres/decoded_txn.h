// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace isowatch::pg {

// A PostgreSQL WAL position (pg_lsn), as a 64-bit integer.
using Lsn = uint64_t;

// "16/B374D848" for an Lsn.
std::string LsnToString(Lsn lsn);

// One row change of a committed transaction, as logical decoding (pgoutput) reports it. Column
// values are in PostgreSQL's text output format; std::nullopt is SQL NULL (or, for an unchanged
// TOASTed column, a value the decoder was not sent).
struct DecodedChange {
  enum class Kind : uint8_t { kInsert, kUpdate, kDelete };
  Kind kind = Kind::kInsert;
  std::string schema;
  std::string table;
  std::vector<std::string> column_names;
  // The new row (insert, update), or the old key (delete).
  std::vector<std::optional<std::string>> values;
};

// A message a transaction wrote with pg_logical_emit_message(true, prefix, content).
struct DecodedMessage {
  std::string prefix;
  std::string content;
};

// One committed transaction from the replication stream. Transactions arrive in commit order.
struct DecodedTxn {
  uint32_t xid = 0;            // the 32-bit xid (no epoch)
  Lsn commit_lsn = 0;          // the LSN of its commit record: its position in the commit order
  Lsn end_lsn = 0;             // the end of its commit record: confirm this once it is safe
  int64_t commit_time_us = 0;  // commit time, microseconds since the Unix epoch
  std::vector<DecodedChange> changes;
  std::vector<DecodedMessage> messages;
};

}  // namespace isowatch::pg
