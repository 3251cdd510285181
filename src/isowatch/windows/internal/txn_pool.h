// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/history/operation.h"
#include "isowatch/history/snapshot.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/history/transaction.h"
#include "isowatch/history/value.h"

namespace isowatch::v1 {
class CutterTxns;
}  // namespace isowatch::v1

namespace isowatch::windows::internal {

// operation vector (list reads' elements in its element vector), and its name in the pool's
// name buffer.
constexpr uint64_t kNoXid = ~uint64_t{0};

struct Rec {
  history::Timestamp key;  // placement key
  history::Timestamp start;
  history::Timestamp commit;
  uint64_t arrival = 0;  // order of Add calls, for ties
  uint64_t source_offset = 0;
  uint64_t ops_begin = 0;
  uint64_t name_begin = 0;
  // The xid and snapshot in the pool's xid vector (TxnPool::xid), or kNoXid.
  uint64_t xid_begin = kNoXid;
  uint32_t ops_count = 0;
  uint32_t name_size = 0;
  SessionId session;
  uint32_t seq = 0;
  uint16_t origin = 0;
  history::TxnStatus status = history::TxnStatus::kCommitted;
  bool has_start = false;
  bool has_commit = false;
  bool id_numeric = false;
  bool dead = false;  // taken out of the pool; the slot is reclaimed by Compact
};

inline bool PlacedBefore(const Rec& a, const Rec& b) {
  return a.key != b.key ? a.key < b.key : a.arrival < b.arrival;
}

// Transactions copied out of the source history, with their operations and list elements in
// three vectors (no allocation per transaction). Removal marks records dead; Compact reclaims

class TxnPool {
 public:
  size_t size() const { return recs_.size(); }
  bool empty() const { return recs_.empty(); }
  size_t live() const { return recs_.size() - dead_; }
  const Rec& rec(size_t i) const { return recs_[i]; }
  std::span<const history::Op> ops(const Rec& r) const {
    return std::span<const history::Op>(ops_).subspan(r.ops_begin, r.ops_count);
  }
  // REQUIRES: op.kind() == kListRead and op belongs to this pool.
  std::span<const history::Value> elements(const history::Op& op) const {
    return std::span<const history::Value>(elements_).subspan(op.list_offset(), op.list_size());
  }
  std::string_view name(const Rec& r) const {
    const std::string_view names = names_;
    return names.substr(r.name_begin, r.name_size);
  }
  // The xid of `r`, 0 if none.
  uint64_t xid(const Rec& r) const { return r.xid_begin == kNoXid ? 0 : xids_[r.xid_begin]; }
  // The snapshot of `r`, if it has one.
  std::optional<history::SnapshotView> snapshot(const Rec& r) const {
    if (r.xid_begin == kNoXid || xids_[r.xid_begin + 1] == 0) return std::nullopt;
    const uint64_t* p = xids_.data() + r.xid_begin;
    return history::SnapshotView{p[2], p[3], std::span<const uint64_t>(p + 5, p[4])};
  }

  // Copies transaction `id` of `src` (REQUIRES: src.has_txn(id)), placed at `key`, arrived as
  // the `arrival`-th.
  void AddFromHistory(const history::History& src, TxnId id, history::Timestamp key,
                      uint64_t arrival);
  // Copies record `i` of `from`.
  void AddFromPool(const TxnPool& from, size_t i);
  // Marks record `i` dead (taken out of the pool).
  void Kill(size_t i) {
    if (!recs_[i].dead) {
      recs_[i].dead = true;
      ++dead_;
    }
  }
  // Reclaims dead records once they are at least half of the pool.
  void MaybeCompact();
  // Adds the byte strings of the pooled transactions to `marks` (history::MarkBytes).
  void MarkBytes(std::vector<uint64_t>& marks) const;
  // Writes the live records, in pool order, to `out` (CutterTxns, checkpoint.proto).
  void Save(v1::CutterTxns& out) const;
  // The pool `in` holds, checked against `src` (the history saved with it); arrivals below
  // `arrival_end`. DataLoss naming `what` if malformed.
  static absl::StatusOr<TxnPool> Load(const v1::CutterTxns& in, const history::History& src,
                                      uint64_t arrival_end, std::string_view what);
  // Whether the live records are in placement order.
  bool InPlacementOrder() const;
  size_t MemoryBytes() const;

 private:
  // [xid, has snapshot, xmin, xmax, number of xip, xip...]
  void AppendXids(Rec* r, uint64_t xid, const std::optional<history::SnapshotView>& snapshot);
  template <typename ElementsFn>
  void AppendBody(Rec* r, std::string_view name, std::span<const history::Op> ops,
                  ElementsFn elements);

  std::vector<Rec> recs_;
  std::vector<history::Op> ops_;
  std::vector<history::Value> elements_;
  std::string names_;
  std::vector<uint64_t> xids_;
  size_t dead_ = 0;
};

}  // namespace isowatch::windows::internal
