// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "collectors/postgres/decoded_txn.h"
#include "collectors/postgres/pgoutput_assembler.h"

typedef struct pg_conn PGconn;

namespace isowatch::pg {

struct ReplicationOptions {
  // libpq connection string (key=value or URI) of the database to decode; `replication=database`
  // is added to it.
  std::string dsn;
  // Names of the logical replication slot and of the publication: lower-case letters, digits
  // and '_', at most 63 characters.
  std::string slot;
  std::string publication;
  // The tables to publish if the publication does not exist yet: "table" or "schema.table",
  // each part taken literally (as a quoted identifier). An existing publication is used as is.
  std::vector<std::string> tables;
  // Where to start: 0 = where the slot's consumer confirmed last (its confirmed_flush_lsn). The
  // server never sends anything before that position, whatever is asked.
  Lsn start_lsn = 0;
  // How often a standby status update reports the confirmed position.
  absl::Duration status_interval = absl::Seconds(1);
  // Drop the slot when the stream is closed (Close() or the destructor), if Open() got as far as
  // finding or creating a usable one. For tests and one-off runs: a dropped slot forgets its
  // position, and the WAL after it is no longer kept.
  bool drop_slot_on_close = false;
};

// One logical replication stream of one slot with the pgoutput plugin (protocol version 1, with
// logical messages), delivering committed transactions in commit order.
//
// Delivery is at least once. The server sends transactions from the slot's confirmed position
// (see Confirm()); what was sent but not confirmed is sent again by the next stream of the slot,
// after a reconnect or a server restart. The contract for the caller:
//   1. Remember the end_lsn of the last transaction it handled (made durable downstream).
//   2. Confirm(end_lsn) only for transactions handled that way.
//   3. On a new stream, skip every transaction whose end_lsn is <= that remembered end_lsn.
// The server may even go back behind the last Confirm(): the slot's position reaches its disk
// only at checkpoints, so a crash of the server can forget some confirmations.
//
// Errors: UNAVAILABLE when the connection was lost or the server is shutting down or starting:
// open a new stream (later) and continue. FAILED_PRECONDITION when the server or the slot is not
// set up for this (wal_level is not logical, missing rights, a slot of another plugin or
// database...): retrying will not help. INVALID_ARGUMENT for bad options or a pgoutput message
// the decoder rejects. After any error from Next(), the stream is broken: every later Next()
// fails; open a new one.
//
// The server ends the stream if it hears nothing for wal_sender_timeout (60 s by default):
// call Next() more often than that, since status updates are sent from inside it.
//
// Thread-compatible: one thread at a time. Owns its libpq connection.
class LogicalStream {
 public:
  // Connects, checks wal_level, creates the publication and the slot if they do not exist, and
  // starts streaming. The publication is created before the slot (pgoutput fails on WAL written
  // before its publication existed).
  static absl::StatusOr<std::unique_ptr<LogicalStream>> Open(const ReplicationOptions& options);

  LogicalStream(const LogicalStream&) = delete;
  LogicalStream& operator=(const LogicalStream&) = delete;
  // Close(), ignoring its status.
  ~LogicalStream();

  // The next committed transaction, or std::nullopt if none completed within `timeout` (0: only
  // what has already arrived). Answers keepalives and sends the periodic status updates.
  absl::StatusOr<std::optional<DecodedTxn>> Next(absl::Duration timeout);

  // Lets the server forget everything up to `lsn` (an end_lsn of a delivered transaction):
  // reported as flushed and applied by the next status update. Never moves back.
  void Confirm(Lsn lsn);

  // Sends a status update now (Next() sends them every status_interval anyway).
  absl::Status SendStatus();

  // The slot's confirmed position when the stream was opened (its consistent point, if Open()
  // created it): the transactions before it are not sent again.
  Lsn confirmed_flush() const { return start_confirmed_flush_; }
  // Whether Open() created the slot.
  bool created_slot() const { return created_slot_; }
  // The highest position reported to the server as flushed.
  Lsn reported_flush() const { return reported_flush_; }

  // Ends streaming, sending the confirmed position one last time, and drops the slot if
  // drop_slot_on_close. Idempotent.
  absl::Status Close();

  // Ends streaming and drops the slot (and with it its position and the WAL it holds).
  absl::Status DropSlot();

  // How many Truncate messages were dropped (see PgoutputAssembler).
  uint64_t truncates_ignored() const { return assembler_.truncates_ignored(); }

 private:
  LogicalStream(ReplicationOptions options, PGconn* conn);

  absl::Status Setup();
  absl::Status EnsurePublication();
  absl::Status EnsureSlot();
  absl::Status StartStreaming();
  absl::Status EndStreaming();
  absl::StatusOr<std::optional<DecodedTxn>> Receive(absl::Time deadline);
  absl::StatusOr<std::optional<DecodedTxn>> HandleCopyData(std::string_view data);
  absl::Status SendStatusIfDue();
  // The stream's error, kept so that every later Next() returns it.
  absl::Status Fail(absl::Status status);

  ReplicationOptions options_;
  PGconn* conn_;  // owned; nullptr once closed
  PgoutputAssembler assembler_;
  bool streaming_ = false;
  bool created_slot_ = false;
  bool slot_ready_ = false;  // the slot exists and is one this stream may use (and drop)
  absl::Status broken_;
  Lsn start_confirmed_flush_ = 0;
  Lsn received_ = 0;            // highest WAL position received
  Lsn confirmed_ = 0;           // highest position the caller confirmed
  Lsn last_delivered_end_ = 0;  // end_lsn of the last transaction Next() returned
  Lsn idle_flush_ = 0;          // a keepalive position with nothing unconfirmed before it
  Lsn reported_flush_ = 0;
  absl::Time next_status_ = absl::InfinitePast();
};

}  // namespace isowatch::pg
