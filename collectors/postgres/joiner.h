// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

#include "isowatch/history/history.h"
#include "isowatch/v1/history.pb.h"

#include "collectors/postgres/decoded_txn.h"
#include "collectors/postgres/workload.h"

namespace isowatch::pg {

struct JoinerOptions {
  // This run's number: a decoded transaction whose tag names it has a client record coming.
  uint32_t run = 0;
  std::string message_prefix = "isowatch";
  // The workload's table (schema public) and data model, to read decoded rows.
  std::string table;
  history::DataModel data = history::DataModel::kKeyValue;
  // The stream name put on each transaction.
  std::string stream;
  // A committed transaction of this run whose client record has not come this long after its
  // commit was decoded is sent from the WAL alone (and counted as orphaned): its session never
  // finished it, so later commits must not wait for it for ever.
  absl::Duration orphan_timeout = absl::Seconds(30);
};

struct JoinerStats {
  uint64_t joined = 0;            // committed transactions with a client record and a commit LSN
  uint64_t decoded_only = 0;      // of an earlier run, whose client record was lost: writes only
  uint64_t foreign = 0;           // decoded transactions without the workload's message: skipped
  uint64_t aborted = 0;           // client records of aborted or unknown transactions, sent as such
  uint64_t write_mismatches = 0;  // committed transactions whose decoded rows differ
  uint64_t redelivered = 0;       // decoded transactions at or below the handled position: skipped
  uint64_t never_decoded = 0;     // client records given up on (GiveUpWaiting)
  uint64_t orphaned = 0;          // commits of this run sent without their client record
};

// Joins what the workload saw (snapshot, xid, reads, writes, outcome) with the commit order
// logical decoding gives (docs/collectors/postgres.md, "Joining"). A committed transaction is
// emitted once both halves are in, in commit order, with its commit LSN as commit timestamp; the
// watermark is the commit LSN of the last one emitted. Aborted ones need no commit position and
// are emitted at once. Single-threaded.
class Joiner {
 public:
  explicit Joiner(JoinerOptions options);

  // A transaction the workload finished.
  void AddClient(ClientTxn txn);
  // The next transaction of the replication stream (commit order).
  void AddDecoded(DecodedTxn txn);

  struct Output {
    std::vector<v1::Transaction> txns;
    // Every committed transaction with commit LSN <= watermark has been emitted.
    std::optional<Lsn> watermark;
    // The end LSN of the last decoded transaction handled: the replication slot may be
    // confirmed up to it once `txns` are durable downstream.
    std::optional<Lsn> handled_upto;
    // The commit times (microseconds since the Unix epoch, from the WAL) of the committed
    // transactions in `txns`, for measuring the lag from commit to verdict.
    std::vector<int64_t> commit_times_us;
  };
  // Moves out what is ready; `now` decides which commits have waited too long for their
  // client record.
  Output Take(absl::Time now);

  // Decoded transactions ending at or below `lsn` were handled before (by an earlier run): they
  // are skipped when the slot sends them again.
  void SkipUpto(Lsn lsn) { handled_end_ = std::max(handled_end_, lsn); }

  // Gives up on the client records of in-doubt transactions still waiting for a commit (the
  // workload is over and logical decoding never showed them): they are emitted with status
  // UNKNOWN, and counted. Records of acknowledged commits keep waiting: decoding shows them.
  void GiveUpWaiting();

  // Client records of committed (or unknown) transactions still waiting for their commit.
  size_t waiting_clients() const { return clients_.size(); }
  size_t waiting_decoded() const { return decoded_.size(); }
  const JoinerStats& stats() const { return stats_; }

 private:
  struct Tag {
    uint32_t run = 0;
    uint32_t session = 0;
    uint64_t seq = 0;
    std::string text;  // as written: "<run>:<session>:<seq>"
  };
  std::optional<Tag> FindTag(const DecodedTxn& d) const;
  // The 64-bit xid of a decoded 32-bit one, by the epoch of the newest client xid.
  uint64_t WidenXid(uint32_t xid32) const;
  void EmitJoined(ClientTxn c, const DecodedTxn& d);
  void EmitDecodedOnly(const DecodedTxn& d, const Tag& tag);
  // The writes logical decoding shows for the workload's table, as operations.
  std::vector<v1::Operation> DecodedWrites(const DecodedTxn& d) const;

  JoinerOptions options_;
  // By tag, not by xid: PostgreSQL hands an xid out again after a crash if the transaction that
  // had it wrote no WAL, so an xid names a transaction only once it committed.
  absl::flat_hash_map<std::string, ClientTxn> clients_;
  std::deque<DecodedTxn> decoded_;
  std::vector<v1::Transaction> out_;
  std::vector<int64_t> commit_times_us_;
  std::optional<Lsn> watermark_;
  // Since when the first decoded transaction has been waiting for its client record.
  std::optional<absl::Time> head_waiting_since_;
  std::optional<Lsn> handled_upto_;
  Lsn handled_end_ = 0;
  uint64_t newest_xid_ = 0;
  JoinerStats stats_;
};

}  // namespace isowatch::pg
