// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

#include "collectors/tidb/cdc_event.h"

namespace isowatch::tidb {

// The committed changes of one commit ts: one transaction's rows (or, rarely, those of several
// transactions TiDB gave the same commit ts), and the DDL committed at it.
struct CdcTxn {
  Tso commit_ts = 0;
  std::vector<RowChange> rows;  // distinct, in a canonical order (not arrival order)
  std::vector<SchemaChange> schema_changes;

  bool operator==(const CdcTxn&) const = default;
};

// Counters of a TxnGrouper. Every event added is counted in exactly one of the first group.
struct TxnGrouperStats {
  uint64_t rows = 0;            // rows kept
  uint64_t duplicate_rows = 0;  // rows equal to one already kept (dropped)
  uint64_t late_rows = 0;       // refused: below the release point, not a duplicate
  uint64_t schema_changes = 0;  // DDL kept
  uint64_t duplicate_schema_changes = 0;
  uint64_t late_schema_changes = 0;  // refused as late_rows
  uint64_t watermarks = 0;           // watermarks that moved their stream forward (or held)
  uint64_t stale_watermarks = 0;     // below their stream's last one (ignored)
  uint64_t released_txns = 0;
};

// Groups the row changes of a set of streams (the partitions of a topic, or one storage sink)
// into transactions by commit ts, and releases each transaction once it is complete: when
// every stream's watermark is above its commit ts.
//
// Invariants:
//  1. release_point() never decreases; every transaction with a commit ts below it has been
//     returned by Release(), exactly once, and nothing at or above it has.
//  2. A row (equal per RowFingerprint) is kept at most once, whatever the arrival order and
//     however often it is sent; a duplicate is counted, not kept.
//  3. A row below release_point() that is not a remembered duplicate is refused (its
//     transaction went out without it) and counted: never added, never dropped unseen.
//  4. Each stream's watermark only moves forward; a lower one is counted and ignored.
//
// The watermarks are taken as TiCDC documents them: a resolved ts W on a stream promises
// every row change below W (not at W) on that stream has been sent. So the release point is
// the minimum of the streams' watermarks, and release_point() - 1 is a watermark for the
// daemon's stream (every transaction at or below it has been released).
//
// Duplicates of released transactions are recognised while their fingerprints are
// remembered: the last `remembered_rows` released rows (and DDLs). An older duplicate is
// counted as late.
//
// Thread-compatible.
class TxnGrouper {
 public:
  explicit TxnGrouper(size_t streams, size_t remembered_rows = size_t{1} << 16);

  // Adds an event of stream `stream` (0 .. streams-1).
  // Errors: OUT_OF_RANGE for an unknown stream; FAILED_PRECONDITION for a late row or DDL
  // (invariant 3), naming it and the release point. Both are counted; nothing else is an error.
  absl::Status Add(size_t stream, CdcEvent event);

  // The transactions that became complete since the last call, in commit ts order.
  std::vector<CdcTxn> Release();

  // Every transaction below this has been released: the minimum watermark over all streams
  // (0 until each stream has sent one).
  Tso release_point() const { return release_point_; }

  // Transactions waiting for the watermarks.
  size_t pending_txns() const { return pending_.size(); }

  const TxnGrouperStats& stats() const { return stats_; }

 private:
  struct Pending {
    std::vector<std::pair<std::string, RowChange>> rows;  // fingerprint, row
    std::vector<std::pair<std::string, SchemaChange>> schema_changes;
    absl::flat_hash_set<std::string> fingerprints;
  };

  // The three counters of one kind of event.
  struct Counters {
    uint64_t TxnGrouperStats::*kept;
    uint64_t TxnGrouperStats::*duplicate;
    uint64_t TxnGrouperStats::*late;
  };

  // Adds `event` (fingerprint `fingerprint`, described as `what` in errors) to `list` of its
  // commit ts's pending transaction, unless it is a duplicate or late (CheckLate()).
  template <typename Event>
  absl::Status Keep(Event event, Tso commit_ts, std::string fingerprint, std::string_view what,
                    Counters counters, std::vector<std::pair<std::string, Event>> Pending::*list);
  absl::Status AddRow(RowChange row);
  absl::Status AddSchemaChange(SchemaChange change);
  // Whether `fingerprint` at `commit_ts` is already kept (pending or remembered). For an event
  // below the release point that is not, the error to return.
  absl::Status CheckLate(Tso commit_ts, const std::string& fingerprint, std::string_view what,
                         bool& duplicate);
  void Remember(Tso commit_ts, absl::flat_hash_set<std::string> fingerprints);

  std::vector<std::optional<Tso>> watermarks_;
  Tso release_point_ = 0;
  std::map<Tso, Pending> pending_;
  // The fingerprints of released transactions, oldest first, bounded by remembered_rows_.
  std::map<Tso, absl::flat_hash_set<std::string>> remembered_;
  size_t remembered_count_ = 0;
  size_t remembered_rows_;
  TxnGrouperStats stats_;
};

}  // namespace isowatch::tidb
