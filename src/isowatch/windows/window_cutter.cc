// SPDX-License-Identifier: Apache-2.0
#include "isowatch/windows/window_cutter.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/history/checkpoint_codec.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/operation.h"
#include "isowatch/history/snapshot.h"
#include "isowatch/history/transaction.h"
#include "isowatch/history/value.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::windows {

namespace codec = history::checkpoint_codec;
using history::History;
using history::HistoryBuilder;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;

namespace {

// floor(a / b) for b > 0, also for negative a.
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

int64_t SaturatingSub(int64_t a, int64_t b) {
  if (b > 0 && a < std::numeric_limits<int64_t>::min() + b) {
    return std::numeric_limits<int64_t>::min();
  }
  return a - b;
}

// What cannot happen with a history HistoryBuilder accepted, and so is a bug: debug builds stop;
// release builds mark the window defective (its checks report UNKNOWN, never a verdict on a
// window that says something the stream did not) and carry on.
void Defect(Window& w, const absl::Status& status, CutterStats* stats) {
  fmt::print(stderr, "window cutter: window {}: {}\n", w.scope.index, status.ToString());
  assert(false && "a window the cutter could not build");
  if (w.defect.empty()) w.defect = status.ToString();
  ++stats->defects;
}

// A compact copy of a transaction: everything but its operations, which live in the pool's
// operation vector (list reads' elements in its element vector), and its name in the pool's
// name buffer.
constexpr uint64_t kNoXid = ~uint64_t{0};

struct Rec {
  Timestamp key;  // placement key
  Timestamp start;
  Timestamp commit;
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
  TxnStatus status = TxnStatus::kCommitted;
  bool has_start = false;
  bool has_commit = false;
  bool id_numeric = false;
  bool dead = false;  // taken out of the pool; the slot is reclaimed by Compact
};

bool PlacedBefore(const Rec& a, const Rec& b) {
  return a.key != b.key ? a.key < b.key : a.arrival < b.arrival;
}

// Transactions copied out of the source history, with their operations and list elements in
// three vectors (no allocation per transaction). Removal marks records dead; Compact reclaims
// them in one pass once they are many.
class TxnPool {
 public:
  size_t size() const { return recs_.size(); }
  bool empty() const { return recs_.empty(); }
  size_t live() const { return recs_.size() - dead_; }
  const Rec& rec(size_t i) const { return recs_[i]; }
  std::span<const Op> ops(const Rec& r) const {
    return std::span<const Op>(ops_).subspan(r.ops_begin, r.ops_count);
  }
  // REQUIRES: op.kind() == kListRead and op belongs to this pool.
  std::span<const Value> elements(const Op& op) const {
    return std::span<const Value>(elements_).subspan(op.list_offset(), op.list_size());
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

  void AddFromHistory(const History& src, TxnId id, Timestamp key, uint64_t arrival) {
    const history::Transaction& t = src.txn(id);
    Rec r;
    r.key = key;
    r.start = t.start;
    r.commit = t.commit;
    r.arrival = arrival;
    r.source_offset = t.source_offset;
    r.session = t.session;
    r.seq = t.seq;
    r.origin = t.origin;
    r.status = t.status;
    r.has_start = t.has_start;
    r.has_commit = t.has_commit;
    r.id_numeric = t.ext_id_numeric;
    if (t.xid_slot != 0) {
      const bool has_snapshot = src.has_snapshot(t);
      AppendXids(
          &r, src.xid(t),
          has_snapshot ? std::optional<history::SnapshotView>(src.snapshot(t)) : std::nullopt);
    }
    AppendBody(&r, src.txn_name(id), src.ops(t),
               [&](const Op& op) { return src.list_elements(op); });
  }

  void AddFromPool(const TxnPool& from, size_t i) {
    Rec r = from.recs_[i];
    r.dead = false;
    if (r.xid_begin != kNoXid) AppendXids(&r, from.xid(r), from.snapshot(r));
    AppendBody(&r, from.name(from.recs_[i]), from.ops(from.recs_[i]),
               [&](const Op& op) { return from.elements(op); });
  }

  void Kill(size_t i) {
    if (!recs_[i].dead) {
      recs_[i].dead = true;
      ++dead_;
    }
  }

  // Reclaims dead records once they are at least half of the pool.
  void MaybeCompact() {
    if (dead_ == 0 || dead_ * 2 < recs_.size()) return;
    TxnPool kept;
    kept.recs_.reserve(live());
    for (size_t i = 0; i < recs_.size(); ++i) {
      if (!recs_[i].dead) kept.AddFromPool(*this, i);
    }
    *this = std::move(kept);
  }

  // Adds the byte strings of the pooled transactions to `marks` (history::MarkBytes).
  void MarkBytes(std::vector<uint64_t>& marks) const {
    for (const Op& op : ops_) {
      if (op.kind() != OpKind::kListRead) history::MarkBytes(op.value(), marks);
    }
    for (const Value v : elements_) history::MarkBytes(v, marks);
  }

  // Writes the live records, in pool order, to `out` (CutterTxns, checkpoint.proto).
  void Save(v1::CutterTxns& out) const {
    TxnPool packed;
    packed.recs_.reserve(live());
    for (size_t i = 0; i < recs_.size(); ++i) {
      if (!recs_[i].dead) packed.AddFromPool(*this, i);
    }
    for (const Rec& r : packed.recs_) {
      out.add_key_physical(r.key.physical);
      out.add_key_logical(r.key.logical);
      out.add_start_physical(r.start.physical);
      out.add_start_logical(r.start.logical);
      out.add_commit_physical(r.commit.physical);
      out.add_commit_logical(r.commit.logical);
      out.add_arrivals(r.arrival);
      out.add_source_offsets(r.source_offset);
      const std::string_view name = packed.name(r);
      out.add_names(name.data(), name.size());
      out.mutable_flags()->push_back(static_cast<char>(
          static_cast<uint8_t>(r.status) | (r.has_start ? codec::kTxnHasStart : 0) |
          (r.has_commit ? codec::kTxnHasCommit : 0) | (r.id_numeric ? codec::kTxnIdNumeric : 0)));
      out.add_sessions(r.session.value());
      out.add_seqs(r.seq);
      out.add_origins(r.origin);
      out.add_ops_counts(r.ops_count);
      if (r.xid_begin == kNoXid) {
        out.add_xid_sizes(0);
      } else {
        const uint64_t* p = packed.xids_.data() + r.xid_begin;
        out.add_xid_sizes(static_cast<uint32_t>(5 + p[4]));
        out.mutable_xids()->Add(p, p + 5 + p[4]);
      }
    }
    codec::SaveOps(packed.ops_, *out.mutable_ops());
    codec::SaveValues(packed.elements_, *out.mutable_list_elements());
  }

  // The pool `in` holds, checked against `src` (the history saved with it); arrivals below
  // `arrival_end`. DataLoss naming `what` if malformed.
  static absl::StatusOr<TxnPool> Load(const v1::CutterTxns& in, const History& src,
                                      uint64_t arrival_end, std::string_view what) {
    auto malformed = [&](std::string_view detail) {
      return absl::DataLossError(fmt::format("window cutter checkpoint: {}: {}", what, detail));
    };
    const size_t n = static_cast<size_t>(in.key_physical_size());
    for (const size_t size :
         {in.key_logical_size(), in.start_physical_size(), in.start_logical_size(),
          in.commit_physical_size(), in.commit_logical_size(), in.arrivals_size(),
          in.source_offsets_size(), in.names_size(), static_cast<int>(in.flags().size()),
          in.sessions_size(), in.seqs_size(), in.origins_size(), in.ops_counts_size(),
          in.xid_sizes_size()}) {
      if (size != n) return malformed("arrays of different lengths");
    }
    TxnPool pool;
    ASSIGN_OR_RETURN(
        pool.elements_,
        codec::LoadValues(in.list_elements(), src.byte_count(),
                          fmt::format("window cutter checkpoint: {} list element", what)));
    const size_t elements = pool.elements_.size();
    RETURN_IF_ERROR(codec::LoadOps(
        in.ops(), src.key_count(), src.byte_count(),
        [elements](uint64_t offset, uint32_t size) {
          return codec::InRange(offset, size, elements);
        },
        fmt::format("window cutter checkpoint: {}", what), pool.ops_));
    uint64_t ops_end = 0;
    uint64_t xids_end = 0;
    pool.recs_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int j = static_cast<int>(i);
      const uint8_t f = static_cast<uint8_t>(in.flags()[i]);
      Rec r;
      r.key = Timestamp{in.key_physical(j), in.key_logical(j)};
      r.start = Timestamp{in.start_physical(j), in.start_logical(j)};
      r.commit = Timestamp{in.commit_physical(j), in.commit_logical(j)};
      r.arrival = in.arrivals(j);
      r.source_offset = in.source_offsets(j);
      r.session = SessionId(in.sessions(j));
      r.seq = in.seqs(j);
      r.status = static_cast<TxnStatus>(f & 3);
      r.has_start = (f & codec::kTxnHasStart) != 0;
      r.has_commit = (f & codec::kTxnHasCommit) != 0;
      r.id_numeric = (f & codec::kTxnIdNumeric) != 0;
      if ((f & ~codec::kTxnFlags) != 0 || (f & 3) > static_cast<uint8_t>(TxnStatus::kUnknown) ||
          in.origins(j) > UINT16_MAX || r.session.value() >= src.session_count() ||
          r.arrival >= arrival_end) {
        return malformed(fmt::format(
            "transaction {}: flags {:#x}, origin {}, session {} of {}, "
            "arrival {} of {}",
            i, f, in.origins(j), r.session.value(), src.session_count(), r.arrival, arrival_end));
      }
      r.origin = static_cast<uint16_t>(in.origins(j));
      r.ops_begin = ops_end;
      r.ops_count = in.ops_counts(j);
      if (!codec::InRange(r.ops_begin, r.ops_count, pool.ops_.size())) {
        return malformed(fmt::format("transaction {}: operations [{}, +{}) of {}", i, r.ops_begin,
                                     r.ops_count, pool.ops_.size()));
      }
      ops_end += r.ops_count;
      const uint32_t xid_size = in.xid_sizes(j);
      if (xid_size != 0) {
        const uint64_t begin = xids_end;
        if (xid_size < 5 || !codec::InRange(begin, xid_size, in.xids_size())) {
          return malformed(fmt::format("transaction {}: xids [{}, +{}) of {}", i, begin, xid_size,
                                       in.xids_size()));
        }
        const uint64_t* p = in.xids().data() + begin;
        if (p[1] > 1 || p[4] != xid_size - 5) {
          return malformed(fmt::format("transaction {}: xid entry malformed", i));
        }
        const std::span<const uint64_t> xip(p + 5, p[4]);
        if (p[1] == 1) {
          if (auto defect = history::SnapshotDefect(p[2], p[3], xip)) {
            return malformed(fmt::format("transaction {}: {}", i, *defect));
          }
          if (std::adjacent_find(xip.begin(), xip.end(), std::greater_equal<>()) != xip.end()) {
            return malformed(fmt::format("transaction {}: in-progress xids not sorted", i));
          }
        }
        r.xid_begin = pool.xids_.size();
        pool.xids_.insert(pool.xids_.end(), p, p + xid_size);
        xids_end += xid_size;
      }
      r.name_begin = pool.names_.size();
      r.name_size = static_cast<uint32_t>(in.names(j).size());
      pool.names_.append(in.names(j));
      pool.recs_.push_back(r);
    }
    if (ops_end != pool.ops_.size() || xids_end != static_cast<uint64_t>(in.xids_size())) {
      return malformed(fmt::format("{} operations and {} xids, {} and {} used", pool.ops_.size(),
                                   in.xids_size(), ops_end, xids_end));
    }
    return pool;
  }

  // Whether the live records are in placement order.
  bool InPlacementOrder() const {
    for (size_t i = 1; i < recs_.size(); ++i) {
      if (PlacedBefore(recs_[i], recs_[i - 1])) return false;
    }
    return true;
  }

  size_t MemoryBytes() const {
    return recs_.capacity() * sizeof(Rec) + ops_.capacity() * sizeof(Op) +
           elements_.capacity() * sizeof(Value) + names_.capacity() +
           xids_.capacity() * sizeof(uint64_t);
  }

 private:
  // [xid, has snapshot, xmin, xmax, number of xip, xip...]
  void AppendXids(Rec* r, uint64_t xid, const std::optional<history::SnapshotView>& snapshot) {
    r->xid_begin = xids_.size();
    xids_.push_back(xid);
    xids_.push_back(snapshot ? 1 : 0);
    xids_.push_back(snapshot ? snapshot->xmin : 0);
    xids_.push_back(snapshot ? snapshot->xmax : 0);
    xids_.push_back(snapshot ? snapshot->xip.size() : 0);
    if (snapshot) xids_.insert(xids_.end(), snapshot->xip.begin(), snapshot->xip.end());
  }

  template <typename ElementsFn>
  void AppendBody(Rec* r, std::string_view name, std::span<const Op> ops, ElementsFn elements) {
    r->name_begin = names_.size();
    r->name_size = static_cast<uint32_t>(name.size());
    names_.append(name);
    r->ops_begin = ops_.size();
    r->ops_count = static_cast<uint32_t>(ops.size());
    for (Op op : ops) {
      if (op.kind() == OpKind::kListRead) {
        std::span<const Value> from = elements(op);
        op = op.WithListOffset(elements_.size());
        elements_.insert(elements_.end(), from.begin(), from.end());
      }
      ops_.push_back(op);
    }
    recs_.push_back(*r);
  }

  std::vector<Rec> recs_;
  std::vector<Op> ops_;
  std::vector<Value> elements_;
  std::string names_;
  std::vector<uint64_t> xids_;
  size_t dead_ = 0;
};

}  // namespace

struct WindowCutter::Impl {
  Impl(WindowOptions o, CutterStats* s) : options(o), stats(s) {
    options.overlap = std::max<int64_t>(options.overlap, 0);
  }

  bool span_mode() const { return options.span > 0; }
  int64_t WindowOf(Timestamp key) const { return FloorDiv(key.physical, options.span); }

  bool IsLate(Timestamp key) const {
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
    std::sort(out.begin(), out.end(),
              [&](size_t a, size_t b) { return PlacedBefore(staged.rec(a), staged.rec(b)); });
    return out;
  }

  // Span mode: seals the windows, in order, of the staged records `order` (placement order).
  void SealSpans(const History& src, const std::vector<size_t>& order, std::vector<Window>* out) {
    size_t i = 0;
    while (i < order.size()) {
      const int64_t k = WindowOf(staged.rec(order[i]).key);
      TxnPool own;
      for (; i < order.size() && WindowOf(staged.rec(order[i]).key) == k; ++i) {
        own.AddFromPool(staged, order[i]);
        staged.Kill(order[i]);
      }
      out->push_back(SealWindow(src, std::move(own), Timestamp{k * options.span, 0}));
    }
    staged.MaybeCompact();
  }

  // Count mode: moves the staged records `order` (placement order) into the open window,
  // sealing it each time it is full. A window never splits transactions placed at the same
  // timestamp (a commit at a reader's start is in its snapshot): a full window takes the rest of
  // its last timestamp's transactions, all of which have been added (they are at or below the
  // seal point), before it is sealed.
  void FillCounts(const History& src, const std::vector<size_t>& order, std::vector<Window>* out) {
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

  void SealOpen(const History& src, std::vector<Window>* out) {
    if (open.empty()) return;
    TxnPool own = std::move(open);
    open = TxnPool();
    const Timestamp first = own.rec(0).key;
    out->push_back(SealWindow(src, std::move(own), first));
  }

  // The base of a window whose own transactions are `own` and which begins at `begin`.
  Timestamp Base(const TxnPool& own, Timestamp begin) const {
    Timestamp base = begin;
    if (span_mode()) {
      base = std::min(base, Timestamp{SaturatingSub(begin.physical, options.overlap), 0});
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

  Window SealWindow(const History& src, TxnPool own, Timestamp begin);
  // Records committed `r`'s xid among the writers of the state (WindowScope::base_xid_end).
  void NoteStateWriter(const TxnPool& pool, const Rec& r) {
    const bool writes = std::any_of(pool.ops(r).begin(), pool.ops(r).end(),
                                    [](const Op& op) { return op.is_write(); });
    if (!writes) return;
    const uint64_t xid = pool.xid(r);
    if (xid == 0) {
      state_without_xid = true;
    } else {
      state_xid_end = std::max(state_xid_end, xid + 1);
    }
  }
  // Applies the committed transaction `r` of `pool` to the state.
  void Fold(const History& src, const TxnPool& pool, const Rec& r);

  size_t StateBytes() const {
    using RegSlot = std::pair<const KeyId, Value>;
    using ListSlot = std::pair<const KeyId, std::vector<Value>>;
    return registers.capacity() * (sizeof(RegSlot) + 1) +
           lists.capacity() * (sizeof(ListSlot) + 1) + list_bytes;
  }

  WindowOptions options;
  CutterStats* stats;
  uint64_t arrival = 0;
  std::optional<Timestamp> max_key;  // largest placement key taken
  // Span mode: windows at or below this index are sealed. Count mode: every transaction placed
  // at or below last_point has been moved into a window.
  std::optional<int64_t> sealed_through;
  std::optional<Timestamp> last_point;
  TxnPool staged;    // taken, not yet in a window
  TxnPool open;      // count mode: the open window's own transactions, in placement order
  TxnPool retained;  // the last sealed window's own transactions, in placement order
  // The state after every committed transaction of the windows sealed before `retained`'s: the
  // newest value of each register written, the contents of each list appended to.
  absl::flat_hash_map<KeyId, Value> registers;
  absl::flat_hash_map<KeyId, std::vector<Value>> lists;
  size_t list_bytes = 0;  // capacity of the vectors in `lists`
  // Every committed writer folded into the state has an xid below this, unless
  // state_without_xid (one had none).
  uint64_t state_xid_end = 0;
  bool state_without_xid = false;
};

void WindowCutter::Impl::Fold(const History& src, const TxnPool& pool, const Rec& r) {
  if (r.status != TxnStatus::kCommitted) return;
  NoteStateWriter(pool, r);
  for (const Op& op : pool.ops(r)) {
    if (op.kind() == OpKind::kWrite) {
      registers[op.key()] = op.value();
    } else if (op.kind() == OpKind::kAppend) {
      auto [it, inserted] = lists.try_emplace(op.key());
      std::vector<Value>& list = it->second;
      const size_t before = list.capacity();
      if (inserted) {
        std::span<const Value> initial = src.InitialList(op.key());
        list.assign(initial.begin(), initial.end());
      }
      list.push_back(op.value());
      list_bytes += (list.capacity() - before) * sizeof(Value);
    }
  }
}

Window WindowCutter::Impl::SealWindow(const History& src, TxnPool own, Timestamp begin) {
  Window w;
  const Timestamp base = Base(own, begin);
  w.scope.index = stats->sealed;
  w.scope.base = base;

  // Transactions of the window: lead-in (retained, placed at or after the base), then own.
  struct Member {
    const TxnPool* pool;
    size_t index;
  };
  std::vector<Member> members;
  for (size_t i = 0; i < retained.size(); ++i) {
    if (retained.rec(i).key >= base) members.push_back({&retained, i});
  }
  w.lead_in = members.size();
  for (size_t i = 0; i < own.size(); ++i) members.push_back({&own, i});
  w.own = own.size();
  w.scope.first_proper = static_cast<uint32_t>(w.lead_in);

  bool any_commit = false;
  for (size_t i = 0; i < own.size(); ++i) {
    const Rec& r = own.rec(i);
    if (r.has_start && r.start < base) ++w.own_beyond_base;
    if (!r.has_commit) continue;
    w.first_commit = any_commit ? std::min(w.first_commit, r.commit) : r.commit;
    w.last_commit = any_commit ? std::max(w.last_commit, r.commit) : r.commit;
    any_commit = true;
  }

  HistoryBuilder b;
  b.set_source(fmt::format("window {}", w.scope.index));
  auto value_in = [&](Value v) {
    return v.is_bytes() ? b.BytesValue(src.bytes(v.bytes_index())) : v;
  };
  b.SetDefaultInitialValue(value_in(src.initial().default_value));

  // Keys the window touches, in order of first use, with what the window does to them.
  struct KeyUse {
    KeyId src;
    KeyId win;
    bool list = false;
    // Committed retained transactions placed before the base, applied over the state.
    bool written = false;
    Value last_write;
    std::vector<Value> appended;
  };
  std::vector<KeyUse> keys;
  absl::flat_hash_map<KeyId, size_t> key_index;
  auto use_key = [&](KeyId k) -> KeyUse& {
    auto [it, inserted] = key_index.try_emplace(k, keys.size());
    if (inserted) {
      const history::KeyInfo& info = src.key(k);
      KeyUse u;
      u.src = k;
      u.win = info.is_int ? b.IntKey(info.payload)
                          : b.BytesKey(src.bytes(static_cast<uint32_t>(info.payload)));
      u.list = info.is_list || lists.contains(k);
      keys.push_back(std::move(u));
    }
    return keys[it->second];
  };
  for (const Member& m : members) {
    for (const Op& op : m.pool->ops(m.pool->rec(m.index))) {
      KeyUse& u = use_key(op.key());
      if (op.kind() == OpKind::kAppend || op.kind() == OpKind::kListRead) u.list = true;
    }
  }

  // The initial state at the base: the state, then the retained transactions placed before it.
  const uint64_t xid_end_before = state_xid_end;
  const bool without_xid_before = state_without_xid;
  for (size_t i = 0; i < retained.size(); ++i) {
    const Rec& r = retained.rec(i);
    if (r.key >= base || r.status != TxnStatus::kCommitted) continue;
    NoteStateWriter(retained, r);
    for (const Op& op : retained.ops(r)) {
      auto it = key_index.find(op.key());
      if (it == key_index.end()) continue;
      KeyUse& u = keys[it->second];
      if (op.kind() == OpKind::kWrite) {
        u.written = true;
        u.last_write = op.value();
      } else if (op.kind() == OpKind::kAppend) {
        u.appended.push_back(op.value());
      }
    }
  }
  w.scope.base_xid_end = state_xid_end;
  w.scope.base_without_xid = state_without_xid;
  state_xid_end = xid_end_before;  // the retained ones are folded when they leave
  state_without_xid = without_xid_before;
  std::vector<Value> elements;
  for (const KeyUse& u : keys) {
    if (u.list) {
      elements.clear();
      auto it = lists.find(u.src);
      std::span<const Value> before =
          it != lists.end() ? std::span<const Value>(it->second) : src.InitialList(u.src);
      for (Value v : before) elements.push_back(value_in(v));
      for (Value v : u.appended) elements.push_back(value_in(v));
      b.SetInitialList(u.win, elements);
    } else {
      // A value some transaction wrote is a version: an absent read does not match it.
      if (u.written) {
        b.SetInitialVersion(u.win, value_in(u.last_write));
      } else if (auto it = registers.find(u.src); it != registers.end()) {
        b.SetInitialVersion(u.win, value_in(it->second));
      } else if (src.AbsentReadsInitial(u.src)) {
        b.SetInitialRegister(u.win, value_in(src.InitialValue(u.src)));
      } else {
        b.SetInitialVersion(u.win, value_in(src.InitialValue(u.src)));
      }
    }
  }

  // Session positions: the copied ones, ranked, so that the order is kept even if a session
  // repeats a position (a live history does not check that).
  std::vector<uint32_t> by_session(members.size());
  for (uint32_t i = 0; i < by_session.size(); ++i) by_session[i] = i;
  auto rec_of = [&](uint32_t i) -> const Rec& { return members[i].pool->rec(members[i].index); };
  std::stable_sort(by_session.begin(), by_session.end(), [&](uint32_t x, uint32_t y) {
    const Rec& a = rec_of(x);
    const Rec& c = rec_of(y);
    return a.session != c.session ? a.session < c.session : a.seq < c.seq;
  });
  std::vector<int64_t> position(members.size());
  for (size_t i = 0; i < by_session.size(); ++i) {
    const bool same = i > 0 && rec_of(by_session[i - 1]).session == rec_of(by_session[i]).session;
    position[by_session[i]] = same ? position[by_session[i - 1]] + 1 : 0;
  }

  absl::flat_hash_set<std::string> names;
  w.origins.reserve(members.size());
  for (uint32_t i = 0; i < members.size(); ++i) {
    const TxnPool& pool = *members[i].pool;
    const Rec& r = pool.rec(members[i].index);
    std::string name(pool.name(r));
    if (names.contains(name)) {
      std::string renamed;
      for (int n = 1;; ++n) {
        renamed = fmt::format("{}#dup{}", name, n);
        if (!names.contains(renamed)) break;
      }
      name = std::move(renamed);
      ++stats->renamed;
    }
    names.insert(name);
    history::TxnHeader header{
        .id = name,
        .id_numeric = r.id_numeric,
        .session = src.session_name(r.session),
        .session_numeric = src.session_numeric(r.session),
        .seq = position[i],
        .status = r.status,
        .start = r.has_start ? std::optional<Timestamp>(r.start) : std::nullopt,
        .commit = r.has_commit ? std::optional<Timestamp>(r.commit) : std::nullopt,
        .source_offset = r.source_offset,
        .xid = pool.xid(r),
        .snapshot = pool.snapshot(r),
    };
    if (absl::Status st = b.BeginTxn(header); !st.ok()) {
      Defect(w, st, stats);
      continue;
    }
    for (const Op& op : pool.ops(r)) {
      const KeyId k = keys[key_index.find(op.key())->second].win;
      switch (op.kind()) {
        case OpKind::kRead:
          if (op.unknown()) {
            b.UnknownRead(k);
          } else {
            b.Read(k, value_in(op.value()));
          }
          break;
        case OpKind::kWrite:
          b.Write(k, value_in(op.value()));
          break;
        case OpKind::kAppend:
          b.Append(k, value_in(op.value()));
          break;
        case OpKind::kListRead:
          if (op.unknown()) {
            b.UnknownRead(k);  // the key is a list in the window: Finish makes it a list read
          } else {
            b.ListReadBegin(k);
            for (Value v : pool.elements(op)) b.ListReadElement(value_in(v));
            b.ListReadEnd();
          }
          break;
      }
    }
    b.EndTxn();
    w.origins.push_back(r.origin);
  }
  absl::StatusOr<History> h = std::move(b).Finish();
  if (h.ok()) {
    w.history = *std::move(h);
  } else {
    Defect(w, h.status(), stats);
    w.origins.clear();
  }

  // The previous window's transactions can no longer be lead-in: into the state with them.
  for (size_t i = 0; i < retained.size(); ++i) Fold(src, retained, retained.rec(i));
  retained = std::move(own);
  ++stats->sealed;
  return w;
}

namespace {

void SaveTimestamp(Timestamp t, v1::Timestamp* out) {
  out->set_physical(t.physical);
  out->set_logical(t.logical);
}

Timestamp LoadTimestamp(const v1::Timestamp& t) { return Timestamp{t.physical(), t.logical()}; }

}  // namespace

void WindowCutter::Save(v1::CutterCheckpoint* out) const {
  const Impl& m = *impl_;
  out->Clear();
  out->set_span(m.options.span);
  out->set_transactions(m.options.transactions);
  out->set_overlap(m.options.overlap);
  out->set_arrival(m.arrival);
  if (m.max_key) SaveTimestamp(*m.max_key, out->mutable_max_key());
  if (m.sealed_through) {
    out->set_has_sealed_through(true);
    out->set_sealed_through(*m.sealed_through);
  }
  if (m.last_point) SaveTimestamp(*m.last_point, out->mutable_last_point());
  m.staged.Save(*out->mutable_staged());
  m.open.Save(*out->mutable_open());
  m.retained.Save(*out->mutable_retained());
  std::vector<std::pair<KeyId, Value>> registers(m.registers.begin(), m.registers.end());
  std::sort(registers.begin(), registers.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Value> values;
  values.reserve(registers.size());
  for (const auto& [key, v] : registers) {
    out->add_register_keys(key.value());
    values.push_back(v);
  }
  codec::SaveValues(values, *out->mutable_register_values());
  std::vector<KeyId> list_keys;
  list_keys.reserve(m.lists.size());
  for (const auto& [key, list] : m.lists) list_keys.push_back(key);
  std::sort(list_keys.begin(), list_keys.end());
  values.clear();
  for (const KeyId key : list_keys) {
    const std::vector<Value>& list = m.lists.at(key);
    out->add_list_keys(key.value());
    out->add_list_sizes(static_cast<uint32_t>(list.size()));
    values.insert(values.end(), list.begin(), list.end());
  }
  codec::SaveValues(values, *out->mutable_list_elements());
  out->set_state_xid_end(m.state_xid_end);
  out->set_state_without_xid(m.state_without_xid);
  out->set_added(stats_.added);
  out->set_sealed(stats_.sealed);
  out->set_late(stats_.late);
  out->set_renamed(stats_.renamed);
  out->set_defects(stats_.defects);
}

absl::Status WindowCutter::Restore(const history::History& src, const v1::CutterCheckpoint& in) {
  if (stats_.added != 0 || stats_.sealed != 0) {
    return absl::FailedPreconditionError("the window cutter has taken transactions already");
  }
  Impl& m = *impl_;
  if (in.span() != m.options.span || in.transactions() != m.options.transactions ||
      in.overlap() != m.options.overlap) {
    return absl::FailedPreconditionError(fmt::format(
        "the checkpoint's windows were cut by {} with overlap {}; these options cut by {} with "
        "overlap {}",
        in.span() > 0 ? fmt::format("commit time, {} per window", in.span())
                      : fmt::format("transactions, {} per window", in.transactions()),
        in.overlap(),
        m.options.span > 0 ? fmt::format("commit time, {} per window", m.options.span)
                           : fmt::format("transactions, {} per window", m.options.transactions),
        m.options.overlap));
  }
  auto malformed = [](std::string_view detail) {
    return absl::DataLossError(fmt::format("window cutter checkpoint: {}", detail));
  };
  auto fresh = std::make_unique<Impl>(options_, &stats_);
  Impl& c = *fresh;
  c.arrival = in.arrival();
  if (in.has_max_key()) c.max_key = LoadTimestamp(in.max_key());
  if (in.has_sealed_through()) c.sealed_through = in.sealed_through();
  if (in.has_last_point()) c.last_point = LoadTimestamp(in.last_point());
  if (c.span_mode() ? c.last_point.has_value() : c.sealed_through.has_value()) {
    return malformed("a seal point of the other way of cutting");
  }
  ASSIGN_OR_RETURN(c.staged, TxnPool::Load(in.staged(), src, c.arrival, "staged"));
  ASSIGN_OR_RETURN(c.open, TxnPool::Load(in.open(), src, c.arrival, "open"));
  ASSIGN_OR_RETURN(c.retained, TxnPool::Load(in.retained(), src, c.arrival, "retained"));
  if (!c.open.InPlacementOrder() || !c.retained.InPlacementOrder() ||
      (c.span_mode() && !c.open.empty())) {
    return malformed("open or retained transactions out of placement order");
  }
  auto check_keys = [&](const google::protobuf::RepeatedField<uint32_t>& keys,
                        std::string_view what) -> absl::Status {
    for (int i = 0; i < keys.size(); ++i) {
      if (keys[i] >= src.key_count() || (i > 0 && keys[i] <= keys[i - 1])) {
        return malformed(
            fmt::format("{} {}: key {} of {}, or out of order", what, i, keys[i], src.key_count()));
      }
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(check_keys(in.register_keys(), "register"));
  RETURN_IF_ERROR(check_keys(in.list_keys(), "list"));
  ASSIGN_OR_RETURN(const std::vector<Value> registers,
                   codec::LoadValues(in.register_values(), src.byte_count(),
                                     "window cutter checkpoint: register"));
  if (registers.size() != static_cast<size_t>(in.register_keys_size())) {
    return malformed(
        fmt::format("{} registers for {} values", in.register_keys_size(), registers.size()));
  }
  c.registers.reserve(registers.size());
  for (size_t i = 0; i < registers.size(); ++i) {
    c.registers.emplace(KeyId(in.register_keys(static_cast<int>(i))), registers[i]);
  }
  ASSIGN_OR_RETURN(const std::vector<Value> elements,
                   codec::LoadValues(in.list_elements(), src.byte_count(),
                                     "window cutter checkpoint: list element"));
  if (in.list_sizes_size() != in.list_keys_size()) {
    return malformed(
        fmt::format("{} lists for {} sizes", in.list_keys_size(), in.list_sizes_size()));
  }
  uint64_t used = 0;
  for (int i = 0; i < in.list_keys_size(); ++i) {
    const uint32_t size = in.list_sizes(i);
    if (!codec::InRange(used, size, elements.size())) {
      return malformed(
          fmt::format("list {}: elements [{}, +{}) of {}", i, used, size, elements.size()));
    }
    std::vector<Value>& list = c.lists[KeyId(in.list_keys(i))];
    list.assign(elements.begin() + static_cast<ptrdiff_t>(used),
                elements.begin() + static_cast<ptrdiff_t>(used + size));
    c.list_bytes += list.capacity() * sizeof(Value);
    used += size;
  }
  if (used != elements.size()) {
    return malformed(fmt::format("{} list elements, {} used", elements.size(), used));
  }
  c.state_xid_end = in.state_xid_end();
  c.state_without_xid = in.state_without_xid();
  const uint64_t staged = c.staged.live() + c.open.live();
  if (in.added() < staged + in.late()) {
    return malformed(
        fmt::format("{} taken, fewer than {} staged and {} late", in.added(), staged, in.late()));
  }
  impl_ = std::move(fresh);
  stats_.added = in.added();
  stats_.staged = staged;
  stats_.sealed = in.sealed();
  stats_.late = in.late();
  stats_.renamed = in.renamed();
  stats_.defects = in.defects();
  stats_.memory_bytes = MemoryBytes();
  return absl::OkStatus();
}

WindowCutter::WindowCutter(WindowOptions options)
    : options_(options), impl_(std::make_unique<Impl>(options, &stats_)) {}

WindowCutter::~WindowCutter() = default;

void WindowCutter::MarkBytes(std::vector<uint64_t>& marks) {
  impl_->staged.MarkBytes(marks);
  impl_->open.MarkBytes(marks);
  impl_->retained.MarkBytes(marks);
  for (const auto& [key, v] : impl_->registers) history::MarkBytes(v, marks);
  for (const auto& [key, list] : impl_->lists) {
    for (const Value v : list) history::MarkBytes(v, marks);
  }
}

void WindowCutter::Add(const history::History& src, TxnId id) {
  if (!src.has_txn(id)) return;
  const history::Transaction& t = src.txn(id);
  Impl& m = *impl_;
  Timestamp key;
  if (t.has_commit) {
    key = t.commit;
  } else if (t.has_start) {
    key = t.start;
  } else {
    key = m.max_key.value_or(Timestamp::Min());
  }
  ++stats_.added;
  m.max_key = m.max_key ? std::max(*m.max_key, key) : key;
  if (m.IsLate(key)) {
    ++stats_.late;
    return;
  }
  m.staged.AddFromHistory(src, id, key, m.arrival++);
  ++stats_.staged;
  stats_.memory_bytes = MemoryBytes();
}

std::vector<Window> WindowCutter::Seal(const history::History& src, history::Timestamp point) {
  Impl& m = *impl_;
  std::vector<Window> out;
  if (m.span_mode()) {
    // Window q = floor(p / span) ends at q * span + span - 1: sealed only if that is p itself.
    const int64_t q = FloorDiv(point.physical, options_.span);
    const int64_t through = point.physical - q * options_.span == options_.span - 1 ? q : q - 1;
    if (m.sealed_through && *m.sealed_through >= through) return out;
    m.sealed_through = through;
    m.SealSpans(src, m.StagedInOrder([&](const Rec& r) { return m.WindowOf(r.key) <= through; }),
                &out);
  } else {
    if (m.last_point && *m.last_point >= point) return out;
    m.last_point = point;
    m.FillCounts(src, m.StagedInOrder([&](const Rec& r) { return r.key <= point; }), &out);
  }
  Settle(out);
  return out;
}

std::vector<Window> WindowCutter::Flush(const history::History& src) {
  Impl& m = *impl_;
  std::vector<Window> out;
  std::vector<size_t> order = m.StagedInOrder([](const Rec&) { return true; });
  if (m.span_mode()) {
    if (!order.empty()) {
      const int64_t last = m.WindowOf(m.staged.rec(order.back()).key);
      m.sealed_through = m.sealed_through ? std::max(*m.sealed_through, last) : last;
    }
    m.SealSpans(src, order, &out);
  } else {
    if (!order.empty()) {
      const Timestamp last = m.staged.rec(order.back()).key;
      m.last_point = m.last_point ? std::max(*m.last_point, last) : last;
    }
    m.FillCounts(src, order, &out);
    m.SealOpen(src, &out);
  }
  Settle(out);
  return out;
}

void WindowCutter::Settle(const std::vector<Window>& sealed) {
  for (const Window& w : sealed) stats_.staged -= w.own;
  stats_.memory_bytes = MemoryBytes();
}

size_t WindowCutter::MemoryBytes() const {
  const Impl& m = *impl_;
  return m.staged.MemoryBytes() + m.open.MemoryBytes() + m.retained.MemoryBytes() + m.StateBytes();
}

}  // namespace isowatch::windows
