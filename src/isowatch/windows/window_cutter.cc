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
#include "isowatch/windows/internal/cutter_impl.h"

namespace isowatch::windows {

namespace codec = history::checkpoint_codec;
using history::History;
using history::HistoryBuilder;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;

using internal::Rec;
using internal::TxnPool;

namespace {

// What cannot happen with a history HistoryBuilder accepted, and so is a bug: debug builds stop;
// release builds mark the window defective (its checks report UNKNOWN, never a verdict on a
// window that says something the stream did not) and carry on.
void Defect(Window& w, const absl::Status& status, CutterStats* stats) {
  fmt::print(stderr, "window cutter: window {}: {}\n", w.scope.index, status.ToString());
  assert(false && "a window the cutter could not build");
  if (w.defect.empty()) w.defect = status.ToString();
  ++stats->defects;
}

}  // namespace

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
    const int64_t q = internal::FloorDiv(point.physical, options_.span);
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
