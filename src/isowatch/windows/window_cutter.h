// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "isowatch/checkers/plugin.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/history/live_history.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::v1 {
class CutterCheckpoint;
}  // namespace isowatch::v1

namespace isowatch::windows {

// How a stream is cut into windows (docs/windows.md). Exactly one of `span` and `transactions`
// is positive.
struct WindowOptions {
  // Windows of commit time: window k holds the transactions committed in
  // [k * span, (k + 1) * span), in the unit of the stream's timestamps. Empty windows are skipped.
  int64_t span = 0;
  // Windows of this many transactions, in commit order.
  uint64_t transactions = 0;
  // Lead-in: each window also carries the transactions of the previous one that committed in
  // its last `overlap` (span units, or transactions), so that an anomaly straddling the boundary
  // is seen whole. At most one window's worth: the lead-in reaches back at most to the start of
  // the previous window.
  int64_t overlap = 0;
};

// A sealed window: a self-contained history for a plug-in checker.
struct Window {
  // Transactions in commit order: the lead-in ones (context), then the window's own. Its initial
  // state is the state of the stream after every commit before `scope.base`: for each key the
  // window reads or writes, the value (or list) the newest such commit left.
  history::History history;
  // scope.index counts the windows sealed, from 0; scope.first_proper is the first own
  // transaction; scope.base is at or below every own transaction's start, unless the lead-in
  // could not reach that far (own_beyond_base).
  checkers::WindowScope scope;
  // For each transaction of `history`: the origin (stream) of the transaction it copies.
  std::vector<uint16_t> origins;
  history::Timestamp first_commit;  // of its own transactions
  history::Timestamp last_commit;
  size_t own = 0;      // transactions of its own (committed, aborted, unknown)
  size_t lead_in = 0;  // lead-in transactions
  // Own transactions that started before `scope.base`: longer than the lead-in could cover.
  size_t own_beyond_base = 0;
  // Not empty: the cutter could not build the window as the stream has it (a bug, logged and
  // counted in CutterStats::defects); its checks report UNKNOWN.
  std::string defect;
};

struct CutterStats {
  uint64_t added = 0;       // transactions taken, late ones included
  uint64_t staged = 0;      // taken, not yet in a sealed window
  uint64_t sealed = 0;      // windows sealed
  uint64_t late = 0;        // arrived after the window they belong to was sealed: in no window
  uint64_t renamed = 0;     // a source id seen twice in one window, the second renamed
  uint64_t defects = 0;     // windows the cutter could not build (Window::defect): bugs
  size_t memory_bytes = 0;  // staged and retained transactions and the state at the cut
};

// Cuts a stream of transactions, delivered in any order, into windows, and seals a window once
// every transaction it can hold has been delivered. Keeps the stream's state (the newest value
// of every key written before the retained transactions) to give each window its initial state.
//
// The cutter copies what it takes: keys and values as `src`'s ids, so every call must pass the
// same history, whose interning of keys and values must be stable. It is a holder of a live
// history (history::LiveHistory) that pins keys: the history never forgets a key while it is
// registered, may forget transactions once they are added, and may forget byte strings that
// MarkBytes did not mark. Transactions are placed by commit timestamp; those without
// one (aborted, unknown) by start timestamp, else after everything added before them.
// Thread-compatible.
class WindowCutter final : public history::HistoryHolder {
 public:
  explicit WindowCutter(WindowOptions options);
  ~WindowCutter() override;
  WindowCutter(const WindowCutter&) = delete;
  WindowCutter& operator=(const WindowCutter&) = delete;

  // Takes a copy of transaction `id` of `src`, or counts it as late (docs/windows.md).
  // REQUIRES: src.has_txn(id); a transaction released already is ignored.
  void Add(const history::History& src, TxnId id);

  // Every transaction with commit timestamp at or below `point` has been added: seals and
  // returns, in order, the windows that can no longer gain a transaction. By span, the
  // physical part of `point` decides: window k is sealed once (k + 1) * span - 1 <= its physical.
  std::vector<Window> Seal(const history::History& src, history::Timestamp point);

  // The end of the input: seals everything staged (the last window may be short).
  std::vector<Window> Flush(const history::History& src);

  // Adds every byte string of `src` the cutter holds (in the transactions it keeps and in the
  // stream's state) to `marks` (history::MarkBytes).
  void MarkBytes(std::vector<uint64_t>& marks) override;
  // The stream's state is kept by key id.
  bool PinsKeys() const override { return true; }

  // Writes what the cutter holds and where it is (v1::CutterCheckpoint) to `out`, whose previous
  // contents are replaced. Keys, values and sessions are saved as `src`'s ids: the checkpoint
  // restores with the live history saved at the same point (HistoryBuilder::SaveLive).
  void Save(v1::CutterCheckpoint* out) const;
  // Makes this cutter, which has taken nothing yet, the one `checkpoint` was saved from: the same
  // windows come out of what is added next. `src` is the live history restored with it.
  // Errors: FailedPrecondition if the cutter has taken transactions, or if `checkpoint` was cut
  // with other options (the message says both); DataLoss naming what is inconsistent when the
  // checkpoint is malformed. On error the cutter is left as it was.
  absl::Status Restore(const history::History& src, const v1::CutterCheckpoint& checkpoint);

  const CutterStats& stats() const { return stats_; }

 private:
  struct Impl;
  // Accounts for windows just sealed: staged count, memory.
  void Settle(const std::vector<Window>& sealed);
  size_t MemoryBytes() const;

  WindowOptions options_;
  CutterStats stats_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace isowatch::windows
