// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

#include "isowatch/history/history.h"
#include "isowatch/v1/history.pb.h"

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/txn_grouper.h"

namespace isowatch::tidb {

struct JoinerOptions {
  // The workload's table: columns k (key), v (value; for lists the elements, comma-separated)
  // and t (the id of the transaction that wrote the row last).
  std::string schema = "test";
  std::string table = "isowatch_kv";
  history::DataModel data = history::DataModel::kKeyValue;
  // The stream name put on each transaction.
  std::string stream = "tidb";
  // Live: client records arrive while the changefeed is read (a workload run in-process), each
  // session's in order of seq, and the caller gives Take only release points below which every
  // client record is in (ClientFeed). Then Take may emit, and give watermarks, before
  // SealClients; an unknown outcome's horizon is set when its session's next record arrives.
  bool live = false;
  // Live: the ids of records emitted this far (in TSO) below the release point are forgotten, so
  // that a run without end keeps bounded memory; a row that names one after that is taken as the
  // changefeed's alone. 0 = remember every id.
  Tso forget_after = 0;
};

struct JoinerStats {
  uint64_t joined = 0;                // client records matched with their rows in the CDC stream
  uint64_t client_only = 0;           // committed read-only, and aborted, records: need no rows
  uint64_t cdc_only = 0;              // row groups whose id names no client record: writes only
  uint64_t foreign_rows = 0;          // rows of other tables, or without an id: skipped
  uint64_t deleted_rows = 0;          // deletes of the workload's table: skipped
  uint64_t bad_rows = 0;              // rows of the workload's table whose k or v does not parse
  uint64_t write_mismatches = 0;      // joined records whose rows differ from their writes
  uint64_t commit_ts_mismatches = 0;  // joined records whose client commit ts differs
  uint64_t unknown_committed = 0;     // unknown outcomes resolved as committed by the rows
  uint64_t unknown_aborted = 0;       // unknown outcomes resolved as aborted (no rows in time)
  uint64_t missing_in_cdc = 0;        // acknowledged commits whose rows never came: sent UNKNOWN
  uint64_t split_commits = 0;         // an id seen at a second commit ts: the later one dropped
  uint64_t already_sent = 0;          // decided below the resumed release point: not sent again
  uint64_t duplicate_client_ids = 0;  // client records with an id seen before: refused
};

// Joins the client's record of each transaction (start ts, reads, writes, outcome: from the
// client log) with its committed row changes from TiCDC (commit ts), and says which watermark
// the daemon may be given (docs/collectors/tidb.md, "The join").
//
// Each record has a *position*, the TSO at which it is decided:
//  - aborted: its start ts; committed read-only: its commit ts (its start ts if the client has
//    none); both need nothing from the CDC stream;
//  - committed with writes: the commit ts of its rows; if they have not come once the release
//    point passed the client's commit ts, that commit ts (sent UNKNOWN, counted missing);
//  - unknown outcome (and committed without a commit ts): its horizon, the start ts of the next
//    transaction of its session (the largest TSO of the log for a session's last one): the client
//    had given up on it by then. Committed if its rows came below the release point, aborted
//    otherwise.
// Take(R) emits every record whose position is below R, once. So what is emitted for a release
// point depends only on the client log and the rows below it: a restart that re-reads them and
// drops what is below the release point it had made durable (SkipBelow) sends nothing twice.
//
// The watermark: every transaction that could commit at or below W has been emitted. W is R - 1,
// lowered below the start ts of every undecided unknown-outcome record (it may commit anywhere
// above its start).
//
// Single-threaded.
class Joiner {
 public:
  explicit Joiner(JoinerOptions options);

  // A transaction of the client log (id, session, seq, status, start, commit if known, ops).
  // REQUIRES: before SealClients(). Errors: INVALID_ARGUMENT for a record without an id or
  // start ts, or with an id seen before (counted).
  absl::Status AddClient(v1::Transaction txn);
  // Every client record is in: computes the horizons of the unknown outcomes still without one
  // (a session's last record: the largest TSO of the log, or `end_ts` if larger: a TSO taken
  // once every session had ended).
  void SealClients(Tso end_ts = 0);
  bool sealed() const { return sealed_; }

  // A released transaction of the CDC stream (commit ts order, below the release point).
  void AddCdc(const CdcTxn& txn);

  struct Output {
    std::vector<v1::Transaction> txns;
    std::optional<Tso> watermark;  // never lower than an earlier one
  };
  // Emits what is decided below `release_point` (REQUIRES: every CDC transaction below it added).
  Output Take(Tso release_point);

  // Records decided below `release_point` were sent by an earlier run: dropped when decided.
  void SkipBelow(Tso release_point) { skip_below_ = release_point; }

  // Records not yet emitted, and among them the unknown outcomes not yet decided.
  size_t waiting() const { return waiting_.size() + unknown_.size(); }
  size_t unknown_pending() const { return unknown_.size(); }
  const JoinerStats& stats() const { return stats_; }

 private:
  struct Rows {
    Tso commit_ts = 0;
    std::vector<v1::Operation> writes;                 // as the rows show them
    std::vector<std::pair<int64_t, std::string>> raw;  // key, v column text
  };
  void Emit(Tso position, v1::Transaction txn);
  void EmitJoined(v1::Transaction txn, const Rows& rows);
  bool SameWrites(const v1::Transaction& txn, const Rows& rows) const;
  void HandleRows(std::string id, Rows rows);
  void Forget(Tso release_point);

  JoinerOptions options_;
  bool sealed_ = false;
  Tso skip_below_ = 0;
  Tso max_client_ts_ = 0;
  Tso last_watermark_ = 0;
  // Committed records with writes waiting for their rows, by id.
  absl::flat_hash_map<std::string, v1::Transaction> waiting_;
  // Their client commit ts (by commit ts, then id): when the release point passes it, they are
  // missing.
  std::multimap<Tso, std::string> waiting_by_commit_;
  // Records decided without the CDC stream, by position.
  std::multimap<Tso, v1::Transaction> client_only_;
  // Unknown outcomes by id, and their horizons, by horizon.
  absl::flat_hash_map<std::string, v1::Transaction> unknown_;
  std::multimap<Tso, std::string> unknown_by_horizon_;
  // Rows of unknown outcomes, until their horizon.
  absl::flat_hash_map<std::string, Rows> unknown_rows_;
  // Ids of every client record; ids whose rows have been handled, with their commit ts.
  absl::flat_hash_set<std::string> ids_;
  absl::flat_hash_map<std::string, Tso> handled_rows_;
  // Every record's session, place in it and start ts, for the horizons.
  struct Place {
    std::string session;
    int64_t seq = 0;
    Tso start = 0;
    std::string id;
  };
  std::vector<Place> places_;
  // Live: per session, its last record's seq and, when that record is an unknown outcome
  // waiting for its horizon, its id.
  struct SessionTail {
    int64_t seq = 0;
    std::string unknown_id;
    Tso unknown_start = 0;
  };
  absl::flat_hash_map<std::string, SessionTail> tails_;
  // Live with forget_after: (position, id) of the emitted records, in order of emission.
  std::deque<std::pair<Tso, std::string>> emitted_;
  std::vector<v1::Transaction> out_;
  JoinerStats stats_;
};

// The id of a transaction as text: id_str, or id_int in decimal.
std::string TxnIdText(const v1::Transaction& txn);

}  // namespace isowatch::tidb
