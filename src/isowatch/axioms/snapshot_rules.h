// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::axioms {

// The axioms for a transaction that reads from a PostgreSQL snapshot (docs/engine.md,
// "Snapshots"), shared by Chronos and the online engine. Both hold, per key, the committed
// versions in commit order; they differ only in how they walk them. A walk starts just below the
// reader's own version key (its commit) and goes to older versions through a cursor:
//
//   bool cursor.Older(TxnId* writer)  // steps to the next older version; false past the oldest
//                                     // version held
//
// and stops where the rule says, leaving the cursor on the version it stopped at.

// Where a walk stopped.
enum class SnapshotStop : uint8_t {
  kVisible,   // NewestVisible: the newest version the snapshot sees, at the cursor
  kBoundary,  // a writer with xid < xmin, at the cursor: it and every older version are visible
  kEnd,       // past the oldest version held without stopping
  kUnknown,   // a writer without an xid, at the cursor: the snapshot cannot be judged
};

// Registers: the newest version whose writer the snapshot of `reader` sees.
// REQUIRES: h.has_snapshot(reader).
template <typename Cursor>
SnapshotStop NewestVisible(const history::History& h, const history::Transaction& reader, Cursor& c,
                           TxnId* writer) {
  while (c.Older(writer)) {
    switch (h.SnapshotSees(reader, h.txn(*writer))) {
      case history::Visibility::kVisible:
        return SnapshotStop::kVisible;
      case history::Visibility::kUnknown:
        return SnapshotStop::kUnknown;
      case history::Visibility::kInvisible:
        break;
    }
  }
  return SnapshotStop::kEnd;
}

// Lists: the writers the snapshot sees above the boundary, newest first, into `visible`. At
// kBoundary, the committed list is the list up to and including the boundary's version followed
// by the appends of `visible` in commit order; at kEnd, the initial list followed by them.
template <typename Cursor>
SnapshotStop VisibleWriters(const history::History& h, const history::Transaction& reader,
                            Cursor& c, std::vector<TxnId>* visible, TxnId* boundary) {
  visible->clear();
  const uint64_t xmin = h.snapshot(reader).xmin;
  while (c.Older(boundary)) {
    const history::Transaction& w = h.txn(*boundary);
    const uint64_t xid = h.xid(w);
    if (xid == 0) return SnapshotStop::kUnknown;
    if (xid < xmin) return SnapshotStop::kBoundary;
    if (h.SnapshotSees(reader, w) == history::Visibility::kVisible) visible->push_back(*boundary);
  }
  return SnapshotStop::kEnd;
}

// NoConflict for writer `t` with a snapshot: calls on_conflict(u) for each writer u of the key
// committed before t whose writes t's snapshot does not see, up to the boundary (a writer with
// xid < xmin); a writer without an xid is skipped and counted in *unknown.
template <typename Cursor, typename OnConflict>
SnapshotStop ConcurrentWriters(const history::History& h, const history::Transaction& t, Cursor& c,
                               OnConflict&& on_conflict, uint64_t* unknown) {
  const uint64_t xmin = h.snapshot(t).xmin;
  TxnId u;
  while (c.Older(&u)) {
    const history::Transaction& w = h.txn(u);
    const uint64_t xid = h.xid(w);
    if (xid == 0) {
      ++*unknown;
      continue;
    }
    if (xid < xmin) return SnapshotStop::kBoundary;
    if (h.SnapshotSees(t, w) == history::Visibility::kInvisible) on_conflict(u);
  }
  return SnapshotStop::kEnd;
}

// SESSION: whether `t` breaks its session's order against its committed predecessor `pred`:
// under SI, t's snapshot does not see pred (nullopt: pred has no xid, not judged), or, for a
// transaction with a start, pred committed after it; under SER, pred committed after t.
inline std::optional<bool> SessionBroken(const history::History& h, verdict::IsolationLevel level,
                                         TxnId t, TxnId pred) {
  const history::Transaction& tt = h.txn(t);
  const history::Transaction& p = h.txn(pred);
  if (level == verdict::IsolationLevel::kSerializable) return p.commit > tt.commit;
  if (h.has_snapshot(tt)) {
    const history::Visibility v = h.SnapshotSees(tt, p);
    if (v == history::Visibility::kUnknown) return std::nullopt;
    return v == history::Visibility::kInvisible;
  }
  return p.commit > tt.start;
}

// Appends `writer`'s appends to `key`, in program order, to `out`; only those before operation
// `limit` if given.
inline void AppendsOf(const history::History& h, TxnId writer, KeyId key,
                      std::vector<history::Value>* out, size_t limit = static_cast<size_t>(-1)) {
  auto ops = h.ops(writer);
  for (size_t i = 0; i < ops.size() && i < limit; ++i) {
    if (ops[i].kind() == history::OpKind::kAppend && ops[i].key() == key) {
      out->push_back(ops[i].value());
    }
  }
}

}  // namespace isowatch::axioms
