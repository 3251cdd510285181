// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "isowatch/history/history.h"
#include "isowatch/windows/internal/txn_pool.h"
#include "isowatch/windows/window_cutter.h"

namespace isowatch::windows {

namespace internal {

// floor(a / b) for b > 0, also for negative a.
inline int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

inline int64_t SaturatingSub(int64_t a, int64_t b) {
  if (b > 0 && a < std::numeric_limits<int64_t>::min() + b) {
    return std::numeric_limits<int64_t>::min();
  }
  return a - b;
}

}  // namespace internal

// What a WindowCutter holds (window_cutter.cc cuts, window_cutter_checkpoint.cc saves and
// restores it).
struct WindowCutter::Impl {
  Impl(WindowOptions o, CutterStats* s) : options(o), stats(s) {
    options.overlap = std::max<int64_t>(options.overlap, 0);
  }

  bool span_mode() const { return options.span > 0; }
  int64_t WindowOf(history::Timestamp key) const {
    return internal::FloorDiv(key.physical, options.span);
  }

  bool IsLate(history::Timestamp key) const {
    if (span_mode()) return sealed_through.has_value() && WindowOf(key) <= *sealed_through;
    return last_point.has_value() && key <= *last_point;
  }

  // Live staged records matching `pred`, in placement order.
  template <typename Pred>
  std::vector<size_t> StagedInOrder(Pred pred) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < staged.size(); ++i) {
      if (!staged.rec(i).dead && pred(staged.rec(i))) out.push_back(i);
    }
    std::sort(out.begin(), out.end(), [&](size_t a, size_t b) {
      return internal::PlacedBefore(staged.rec(a), staged.rec(b));
    });
    return out;
  }

  // Span mode: seals the windows, in order, of the staged records `order` (placement order).
  void SealSpans(const history::History& src, const std::vector<size_t>& order,
                 std::vector<Window>* out) {
    size_t i = 0;
    while (i < order.size()) {
      const int64_t k = WindowOf(staged.rec(order[i]).key);
      internal::TxnPool own;
      for (; i < order.size() && WindowOf(staged.rec(order[i]).key) == k; ++i) {
        own.AddFromPool(staged, order[i]);
        staged.Kill(order[i]);
      }
      out->push_back(SealWindow(src, std::move(own), history::Timestamp{k * options.span, 0}));
    }
    staged.MaybeCompact();
  }

  // Count mode: moves the staged records `order` (placement order) into the open window,
  // sealing it each time it is full. A window never splits transactions placed at the same
  // timestamp (a commit at a reader's start is in its snapshot): a full window takes the rest of
  // its last timestamp's transactions, all of which have been added (they are at or below the
  // seal point), before it is sealed.
  void FillCounts(const history::History& src, const std::vector<size_t>& order,
                  std::vector<Window>* out) {
    for (size_t i : order) {
      if (open.size() >= options.transactions &&
          staged.rec(i).key != open.rec(open.size() - 1).key) {
        SealOpen(src, out);
      }
      open.AddFromPool(staged, i);
      staged.Kill(i);
    }
    if (open.size() >= options.transactions) SealOpen(src, out);
    staged.MaybeCompact();
  }

  void SealOpen(const history::History& src, std::vector<Window>* out) {
    if (open.empty()) return;
    internal::TxnPool own = std::move(open);
    open = internal::TxnPool();
    const history::Timestamp first = own.rec(0).key;
    out->push_back(SealWindow(src, std::move(own), first));
  }

  // The base of a window whose own transactions are `own` and which begins at `begin`.
  history::Timestamp Base(const internal::TxnPool& own, history::Timestamp begin) const {
    history::Timestamp base = begin;
    if (span_mode()) {
      base = std::min(
          base, history::Timestamp{internal::SaturatingSub(begin.physical, options.overlap), 0});
    } else if (options.overlap > 0 && !retained.empty()) {
      const size_t n = retained.size();
      const size_t back = std::min(n, static_cast<size_t>(options.overlap));
      base = std::min(base, retained.rec(n - back).key);
    }
    for (size_t i = 0; i < own.size(); ++i) {
      if (own.rec(i).has_start) base = std::min(base, own.rec(i).start);
    }
    if (!retained.empty()) base = std::max(base, retained.rec(0).key);
    return base;
  }

  Window SealWindow(const history::History& src, internal::TxnPool own, history::Timestamp begin);
  // Records committed `r`'s xid among the writers of the state (WindowScope::base_xid_end).
  void NoteStateWriter(const internal::TxnPool& pool, const internal::Rec& r) {
    const bool writes = std::any_of(pool.ops(r).begin(), pool.ops(r).end(),
                                    [](const history::Op& op) { return op.is_write(); });
    if (!writes) return;
    const uint64_t xid = pool.xid(r);
    if (xid == 0) {
      state_without_xid = true;
    } else {
      state_xid_end = std::max(state_xid_end, xid + 1);
    }
  }
  // Applies the committed transaction `r` of `pool` to the state.
  void Fold(const history::History& src, const internal::TxnPool& pool, const internal::Rec& r);

  size_t StateBytes() const {
    using RegSlot = std::pair<const KeyId, history::Value>;
    using ListSlot = std::pair<const KeyId, std::vector<history::Value>>;
    return registers.capacity() * (sizeof(RegSlot) + 1) +
           lists.capacity() * (sizeof(ListSlot) + 1) + list_bytes;
  }

  WindowOptions options;
  CutterStats* stats;
  uint64_t arrival = 0;
  std::optional<history::Timestamp> max_key;  // largest placement key taken
  // Span mode: windows at or below this index are sealed. Count mode: every transaction placed
  // at or below last_point has been moved into a window.
  std::optional<int64_t> sealed_through;
  std::optional<history::Timestamp> last_point;
  internal::TxnPool staged;    // taken, not yet in a window
  internal::TxnPool open;      // count mode: the open window's own transactions, in placement order
  internal::TxnPool retained;  // the last sealed window's own transactions, in placement order
  // The state after every committed transaction of the windows sealed before `retained`'s: the
  // newest value of each register written, the contents of each list appended to.
  absl::flat_hash_map<KeyId, history::Value> registers;
  absl::flat_hash_map<KeyId, std::vector<history::Value>> lists;
  size_t list_bytes = 0;  // capacity of the vectors in `lists`
  // Every committed writer folded into the state has an xid below this, unless
  // state_without_xid (one had none).
  uint64_t state_xid_end = 0;
  bool state_without_xid = false;
};

}  // namespace isowatch::windows
