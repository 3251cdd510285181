// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

#include "collectors/postgres/decoded_txn.h"
#include "collectors/postgres/pgoutput.h"

namespace isowatch::pg {

// Turns the pgoutput messages of one replication session, in order, into committed
// transactions. Keeps the relation cache ('R' messages by OID) that changes are resolved with.
//
// What ends up where:
//  - Begin opens a transaction; Insert, Update, Delete become its DecodedChanges (the new row for
//    insert and update, the old key or row for delete; 'n' and 'u' columns are std::nullopt);
//    transactional logical messages become its DecodedMessages; Commit completes it.
//  - Relation updates the cache, inside a transaction or not. Origin and Type are accepted and
//    dropped.
//  - Truncate is dropped and counted (truncates_ignored()): a DecodedTxn has no way to say
//    "every row is gone", and the publications this collector creates do not publish truncates.
//  - Non-transactional logical messages (pg_logical_emit_message(false, ...)) are dropped: they
//    belong to no transaction.
//
// Errors (all INVALID_ARGUMENT): malformed messages; a change, a transactional message or a
// Commit outside a transaction; Begin inside one; a change of a relation the cache does not
// know, or with another number of columns than its relation; a binary column value; a Commit
// whose LSN is not the final LSN its Begin announced. After an error the open transaction, if
// any, is dropped and the assembler waits for a Begin; the relation cache is kept.
//
// Thread-compatible.
class PgoutputAssembler {
 public:
  // Decodes `message` (one XLogData payload) and applies it. Returns the transaction it
  // completes (a Commit), std::nullopt for every other message.
  absl::StatusOr<std::optional<DecodedTxn>> Feed(std::string_view message);

  // Applies an already decoded message; as Feed().
  absl::StatusOr<std::optional<DecodedTxn>> Apply(PgoutputMessage message);

  // Whether a Begin has been applied and its Commit not yet.
  bool in_transaction() const { return open_.has_value(); }

  // The cached relation `oid`, or nullptr.
  const PgRelation* relation(uint32_t oid) const;

  // How many Truncate messages were dropped.
  uint64_t truncates_ignored() const { return truncates_ignored_; }

 private:
  absl::StatusOr<std::optional<DecodedTxn>> ApplyOrError(PgoutputMessage& message);
  absl::Status AddChange(DecodedChange::Kind kind, uint32_t relation_oid, const PgTuple& tuple);

  absl::flat_hash_map<uint32_t, PgRelation> relations_;
  std::optional<DecodedTxn> open_;
  uint64_t truncates_ignored_ = 0;
};

}  // namespace isowatch::pg
