// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/axioms/explain.h"
#include "isowatch/axioms/ext_rules.h"
#include "isowatch/axioms/read_walker.h"
#include "isowatch/axioms/snapshot_rules.h"
#include "isowatch/axioms/write_index.h"
#include "isowatch/engine/internal/key_state.h"
#include "isowatch/engine/internal/key_table.h"
#include "isowatch/engine/internal/time_queue.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::engine {

using history::History;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::Transaction;
using history::Value;
using internal::KeyState;
using internal::KeyTable;
using internal::OrderKey;
using internal::ReadInfo;
using internal::TimeQueue;
using internal::VersionInfo;
using verdict::IsolationLevel;
using verdict::Violation;

namespace {

constexpr uint32_t kCommitPhase = 0;
constexpr uint32_t kPointPhase = 1;
constexpr uint32_t kStartPhase = 2;

struct StreamState {
  std::string name;
  bool closed = false;
  bool has_watermark = false;  // sent an explicit watermark
  Timestamp watermark = Timestamp::Min();
  // Streams without explicit watermarks: commit timestamps by arrival time; a transaction that
  // arrived finality_timeout_ms ago lifts the implicit watermark to its commit timestamp.
  std::deque<std::pair<int64_t, Timestamp>> arrivals;
};

// A vector whose front is dropped as it goes: the dropped part is reclaimed once it is the larger
// part (amortised O(1) per element).
template <typename T>
class FrontWindow {
 public:
  bool empty() const { return size() == 0; }
  size_t size() const { return v_.size() - first_; }
  T& operator[](size_t i) { return v_[first_ + i]; }
  const T& operator[](size_t i) const { return v_[first_ + i]; }
  void resize(size_t n) { v_.resize(first_ + n); }
  void clear() {
    v_.clear();
    first_ = 0;
  }
  // Puts n copies of `value` before the first element.
  void insert_front(size_t n, const T& value) {
    v_.insert(v_.begin() + static_cast<ptrdiff_t>(first_), n, value);
  }
  void drop_front(size_t n) {
    first_ += n;
    if (first_ >= 64 && first_ * 2 >= v_.size()) {
      v_.erase(v_.begin(), v_.begin() + static_cast<ptrdiff_t>(first_));
      first_ = 0;
    }
  }

 private:
  std::vector<T> v_;
  size_t first_ = 0;
};

// Per session: the transactions delivered, by position, from `base` on, until no future arrival
// can need them. Positions not delivered yet hold an invalid TxnId.
//
// Invariants: entries[0, prefix) are all delivered; if has_anchor, entries[anchor] is the newest
// participant among them, and anchor == 0 (everything before it has been dropped).
struct SessionState {
  struct Entry {
    TxnId id;
    bool participates = false;
  };
  uint32_t base = 0;
  FrontWindow<Entry> entries;  // from `base` on
  size_t prefix = 0;
  size_t anchor = 0;
  bool has_anchor = false;

  const Entry* At(uint32_t seq) const {
    if (seq < base || seq - base >= entries.size() || !entries[seq - base].id.valid()) {
      return nullptr;
    }
    return &entries[seq - base];
  }
};

// How many pending reads each transaction has, over a window of transaction indexes from the
// lowest one with any: the window spans the transactions delivered while the oldest pending
// read waits for finality, not the history.
class PendingCounts {
 public:
  void Add(uint64_t txn) {
    if (counts_.empty()) {
      counts_.clear();
      base_ = txn;
    } else if (txn < base_) {  // rare: a transaction with a lower index than any pending
      counts_.insert_front(base_ - txn, 0);
      base_ = txn;
    }
    const size_t i = txn - base_;
    if (i >= counts_.size()) counts_.resize(i + 1);
    if (counts_[i]++ == 0) ++transactions_;
  }
  // REQUIRES: txn has a pending read.
  void Remove(uint64_t txn) {
    if (--counts_[txn - base_] == 0) --transactions_;
    size_t zeros = 0;
    while (zeros < counts_.size() && counts_[zeros] == 0) ++zeros;
    counts_.drop_front(zeros);
    base_ += zeros;
  }
  bool Has(uint64_t txn) const {
    return txn >= base_ && txn - base_ < counts_.size() && counts_[txn - base_] > 0;
  }
  size_t transactions() const { return transactions_; }
  size_t window() const { return counts_.size(); }

 private:
  FrontWindow<uint32_t> counts_;  // counts_[i]: transaction base_ + i
  uint64_t base_ = 0;
  size_t transactions_ = 0;
};

// Before the key of every version.
constexpr OrderKey kBeforeAll{Timestamp::Min(), 0, 0};

// Walks a key's versions from `it` towards older ones (checkers/chronos/internal/
// snapshot_rules.h); it() is the version a walk stopped at.
class ChainCursor {
 public:
  using Iterator = internal::ChainMap<VersionInfo>::iterator;
  ChainCursor(const internal::ChainMap<VersionInfo>& chain, const OrderKey& below)
      : begin_(chain.begin()), it_(chain.empty() ? begin_ : chain.lower_bound(below)) {}
  bool Older(TxnId* writer) {
    if (it_ == begin_) return false;
    --it_;
    *writer = TxnId(it_.key().txn());
    return true;
  }
  const Iterator& it() const { return it_; }

 private:
  Iterator begin_;
  Iterator it_;
};

// The smallest key after `k`.
OrderKey After(const OrderKey& k) {
  OrderKey after = k;
  ++after.tie;
  return after;
}

// The greatest key before `k` (for scans that must include k itself).
OrderKey Before(const OrderKey& k) {
  if (k.tie == 0) return OrderKey::Last(Timestamp{k.ts.physical, k.ts.logical - 1});
  OrderKey before = k;
  --before.tie;  // from (phase, 0) to (phase - 1, the greatest transaction)
  return before;
}

// Conversions to and from the checkpoint's messages (proto/isowatch/v1/checkpoint.proto).
void ToProto(const Timestamp& t, v1::Timestamp* out) {
  out->set_physical(t.physical);
  out->set_logical(t.logical);
}
Timestamp FromProto(const v1::Timestamp& t) { return Timestamp{t.physical(), t.logical()}; }
void ToProto(const OrderKey& k, v1::EngineOrderKey* out) {
  ToProto(k.ts, out->mutable_ts());
  out->set_phase(k.phase());
  out->set_txn(k.txn());
}
OrderKey FromProto(const v1::EngineOrderKey& k) {
  return OrderKey{FromProto(k.ts()), k.phase() & 3, k.txn() & OrderKey::kMaxTxn};
}
void ToProto(const Value& v, v1::EngineValue* out) {
  out->set_kind(static_cast<uint32_t>(v.kind()));
  out->set_payload(v.payload());
}
// Nullopt for a value `h` cannot hold (a bad kind, bytes outside its pool).
std::optional<Value> FromProto(const v1::EngineValue& v, const History& h) {
  if (v.kind() > static_cast<uint32_t>(history::ValueKind::kBytes)) return std::nullopt;
  const auto kind = static_cast<history::ValueKind>(v.kind());
  if (kind == history::ValueKind::kBytes &&
      (v.payload() < 0 || static_cast<uint64_t>(v.payload()) >= h.byte_count())) {
    return std::nullopt;
  }
  return Value::FromRaw(kind, v.payload());
}

absl::Status BadCheckpoint(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("engine checkpoint: {}", what));
}

}  // namespace

// Engine-thread only. See engine.h and docs/engine.md.
class EngineImpl {
 public:
  EngineImpl(const History& h, EngineOptions options)
      : h_(h),
        options_(options),
        clock_(options.clock != nullptr ? options.clock : &system_clock_),
        spill_(options.spill),
        write_index_(h),
        walker_(h),
        // Flags only from the history's first held transaction: one restored from a checkpoint
        // has numbered billions (RestoreCheckpoint sets what lies below).
        delivered_(h.size() - h.first_txn(), false),
        delivered_base_(h.first_txn()),
        key_stamp_(h.key_count(), 0),
        sessions_(h.session_count()) {
    keys_.Grow(h.key_count());
  }

  StreamId AddStream(std::string name) {
    streams_.push_back(StreamState{.name = std::move(name)});
    AdvanceFinality();
    return static_cast<StreamId>(streams_.size() - 1);
  }

  void Deliver(StreamId stream, std::span<const TxnId> batch, std::optional<Timestamp> watermark) {
    if (h_.size() != DeliveredEnd() || h_.key_count() != keys_.size() ||
        h_.session_count() != sessions_.size()) {
      Grow();
    }
    StreamState& s = streams_[stream];
    for (size_t i = 0; i < batch.size(); ++i) {
      Prefetch(batch, i);
      DeliverOne(s, batch[i]);
    }
    if (watermark && (!s.has_watermark || *watermark > s.watermark)) {
      s.has_watermark = true;
      s.watermark = *watermark;
      s.arrivals.clear();
    }
    AdvanceFinality();
  }

  void CloseStream(StreamId stream) {
    streams_[stream].closed = true;
    AdvanceFinality();
  }

  void Tick() {
    int64_t now = clock_->NowMs();
    for (StreamState& s : streams_) {
      if (s.has_watermark) continue;
      while (!s.arrivals.empty() &&
             s.arrivals.front().first + options_.finality_timeout_ms <= now) {
        s.watermark = std::max(s.watermark, s.arrivals.front().second);
        s.arrivals.pop_front();
      }
    }
    AdvanceFinality();
  }

  void Finish() {
    for (StreamState& s : streams_) s.closed = true;
    AdvanceFinality();
  }

  std::vector<Violation> TakeFinalViolations() { return std::exchange(final_, {}); }

  Timestamp final_point() const { return final_point_; }

  bool IsFinal(TxnId id) const {
    if (id.value() < delivered_base_) return true;
    if (id.value() >= DeliveredEnd() || !delivered_[id.value() - delivered_base_]) return false;
    const Transaction& t = h_.txn(id);
    if (!Participates(t)) return true;
    return t.commit <= final_point_ && !pending_count_.Has(id.value());
  }

  // Needs waits on the lines of each write's key state and chain end: at each hint, ask for the
  // states of the hinted transaction's writes, and for the chain ends of the one hinted two
  // hints before (whose states have arrived by now).
  void WillRelease(TxnId id) {
    PrefetchNeeds(id, /*chains=*/false);
    const TxnId earlier = will_release_[will_release_next_];
    will_release_[will_release_next_] = id;
    will_release_next_ ^= 1;
    if (earlier.valid()) PrefetchNeeds(earlier, /*chains=*/true);
  }

  bool Release(TxnId id) {
    if (Needs(id)) return true;
    write_index_.Forget(id);
    return false;
  }

  void MarkBytes(std::vector<uint64_t>& marks) {
    keys_.ForEachState([&](const KeyState& ks) {
      for (auto it = ks.versions.begin(); it != ks.versions.end(); ++it) {
        history::MarkBytes(it.value().value, marks);
      }
      for (auto it = ks.readers.begin(); it != ks.readers.end(); ++it) {
        history::MarkBytes(it.value().observed, marks);
      }
      for (const Value v : ks.base_list) history::MarkBytes(v, marks);
    });
    for (const auto& [key, v] : base_values_) history::MarkBytes(v, marks);
    // What the spill holds, unless it expired at or before the prune point (never read again).
    for (auto it = spill_pins_.begin(); it != spill_pins_.end();) {
      if (it->second.unbounded == 0 && it->second.expires <= pruned_point_) {
        spill_pins_.erase(it++);
      } else {
        history::MarkBytes(Value::BytesRef(it->first), marks);
        ++it;
      }
    }
  }

  void MarkKeys(std::vector<uint64_t>& marks) const {
    marks.resize((keys_.size() + 63) / 64, 0);
    for (uint32_t k = 0; k < keys_.size(); ++k) {
      const KeyState* ks = keys_.Find(k);
      if (ks != nullptr && !Fresh(*ks)) marks[k / 64] |= uint64_t{1} << (k % 64);
    }
  }

  void ForgetKeys(std::span<const KeyId> keys) {
    if (!evicting_) return;
    for (const KeyId key : keys) {
      if (key.value() >= keys_.size()) continue;
      if (const KeyState* ks = keys_.Find(key.value()); ks != nullptr) {
        // A fresh state holds nothing: it goes. Any other the caller should have kept (MarkKeys).
        if (!Fresh(*ks)) continue;
        keys_.Release(key.value(), /*evicted=*/false);
      }
      keys_.MarkMaybeSpilled(key.value());
      ++stats_.forgotten_keys;
    }
    forgot_keys_ = forgot_keys_ || !keys.empty();
  }

  absl::Status SaveCheckpoint(v1::EngineCheckpoint* out) {
    if (spill_broken_) {
      return absl::FailedPreconditionError(
          "engine checkpoint: the spill has failed, its contents are incomplete");
    }
    if (spill_ != nullptr) {
      if (absl::Status s = spill_->Flush(); !s.ok()) {
        SpillFailed(s);
        return s;
      }
    }
    out->Clear();
    out->set_level(static_cast<uint32_t>(options_.level));
    out->set_txn_count(h_.size());
    out->set_key_count(keys_.size());
    out->set_max_duration(max_duration_);
    ToProto(pruned_point_, out->mutable_pruned_point());
    out->set_saw_snapshot(saw_snapshot_);
    for (const StreamState& s : streams_) {
      v1::EngineStream* p = out->add_streams();
      p->set_name(s.name);
      p->set_closed(s.closed);
      p->set_explicit_watermark(s.has_watermark);
      ToProto(s.watermark, p->mutable_watermark());
    }
    for (const SessionState& ss : sessions_) out->add_session_bases(ss.base);
    for (size_t i = 0; i < delivered_.size(); ++i) {
      if (!delivered_[i]) out->add_undelivered(delivered_base_ + i);
    }
    for (uint64_t i = DeliveredEnd(); i < h_.size(); ++i) {
      out->add_undelivered(i);
    }
    out->set_new_keys_maybe_spilled(forgot_keys_);
    for (uint32_t k = 0; k < keys_.size(); ++k) {
      if (keys_.slot(k) == KeyTable::Slot::kEvicted) {
        out->add_evicted_keys(k);
        continue;
      }
      if (keys_.slot(k) == KeyTable::Slot::kMaybeSpilled) {
        out->add_maybe_spilled_keys(k);
        continue;
      }
      const KeyState* ks = keys_.Find(k);
      // What the held transactions bring back is left out; a key with nothing else is fresh.
      if (ks == nullptr || (ks->versions.empty() && !ks->trimmed && ks->max_duration == 0 &&
                            ks->base_list.empty())) {
        continue;
      }
      v1::EngineKey* p = out->add_keys();
      p->set_key(k);
      p->set_trimmed(ks->trimmed);
      ToProto(ks->trim_point, p->mutable_trim_point());
      p->set_max_duration(ks->max_duration);
      ToProto(ks->dropped_upto, p->mutable_dropped_upto());
      if (ks->base_in_spill) {
        p->set_base_in_spill(true);
        ToProto(ks->spilled_base, p->mutable_spilled_base());
        ToProto(base_values_.at(k), p->mutable_base_value());
      }
      for (const Value& v : ks->base_list) ToProto(v, p->add_base_list());
      if (!ks->versions.empty()) ToProto(ks->versions.front_key(), p->mutable_front());
    }
    std::vector<uint32_t> pinned;
    pinned.reserve(spill_pins_.size());
    for (const auto& [index, pin] : spill_pins_) pinned.push_back(index);
    std::sort(pinned.begin(), pinned.end());
    for (const uint32_t index : pinned) {
      const SpillPin& pin = spill_pins_.at(index);
      v1::EngineSpillPin* p = out->add_spill_pins();
      p->set_index(index);
      p->set_unbounded(pin.unbounded);
      ToProto(pin.expires, p->mutable_expires());
    }
    return absl::OkStatus();
  }

  absl::Status RestoreCheckpoint(const v1::EngineCheckpoint& c, std::span<const HeldTxn> held) {
    if (!streams_.empty() || stats_.delivered > 0) return BadCheckpoint("the engine is not fresh");
    if (c.level() != static_cast<uint32_t>(options_.level)) {
      return BadCheckpoint("saved by an engine checking another level");
    }
    if (c.txn_count() != h_.size() || c.key_count() != h_.key_count() ||
        static_cast<size_t>(c.session_bases_size()) != h_.session_count()) {
      return BadCheckpoint(fmt::format(
          "saved over {} transactions, {} keys and {} sessions, the history has {}, {} and {}",
          c.txn_count(), c.key_count(), c.session_bases_size(), h_.size(), h_.key_count(),
          h_.session_count()));
    }
    for (const HeldTxn& t : held) {
      if (!t.id.valid() || t.id.value() >= h_.size() || !h_.has_txn(t.id) ||
          t.stream >= static_cast<uint32_t>(c.streams_size())) {
        return BadCheckpoint(
            fmt::format("held transaction {} is not in the history, or its "
                        "stream {} is not in the checkpoint",
                        t.id.value(), t.stream));
      }
    }
    // Durations are differences of physical timestamps the engine adds to others: within
    // [0, 2^62) as any it could have measured.
    constexpr int64_t kMaxDuration = int64_t{1} << 62;
    if (c.max_duration() < 0 || c.max_duration() >= kMaxDuration) {
      return BadCheckpoint(fmt::format("longest transaction {} out of range", c.max_duration()));
    }
    // Validate every key before touching the engine.
    uint32_t last = 0;
    for (int i = 0; i < c.keys_size(); ++i) {
      const v1::EngineKey& k = c.keys(i);
      if (k.key() >= h_.key_count() || (i > 0 && k.key() <= last)) {
        return BadCheckpoint(fmt::format("key {} out of range or out of order", k.key()));
      }
      last = k.key();
      if (k.max_duration() < 0 || k.max_duration() >= kMaxDuration) {
        return BadCheckpoint(fmt::format("key {}: duration out of range", k.key()));
      }
      if ((k.base_in_spill() &&
           (FromProto(k.spilled_base()).txn() >= h_.size() || !FromProto(k.base_value(), h_))) ||
          (k.has_front() && FromProto(k.front()).txn() >= h_.size())) {
        return BadCheckpoint(
            fmt::format("key {}: a version of a transaction out of range", k.key()));
      }
      for (const v1::EngineValue& v : k.base_list()) {
        if (!FromProto(v, h_)) return BadCheckpoint(fmt::format("key {}: bad value kind", k.key()));
      }
    }
    for (uint32_t k : c.evicted_keys()) {
      if (k >= h_.key_count()) return BadCheckpoint(fmt::format("evicted key {} out of range", k));
    }
    for (uint32_t k : c.maybe_spilled_keys()) {
      if (k >= h_.key_count()) {
        return BadCheckpoint(fmt::format("key {} the spill may hold: out of range", k));
      }
    }
    for (const v1::EngineSpillPin& p : c.spill_pins()) {
      if (p.index() >= h_.byte_count() || p.unbounded() < 0) {
        return BadCheckpoint(fmt::format("spill pin of byte string {}: out of range", p.index()));
      }
    }
    // Transactions below the history's first were released, so delivered, but for the retired
    // ones among the held.
    uint64_t delivered_base = h_.first_txn();
    for (const HeldTxn& t : held) delivered_base = std::min(delivered_base, t.id.value());
    for (uint64_t t : c.undelivered()) {
      if (t >= h_.size() || t < delivered_base) {
        return BadCheckpoint(fmt::format("transaction {} out of range", t));
      }
    }
    if (c.evicted_keys_size() > 0 && spill_ == nullptr) {
      return absl::FailedPreconditionError(
          "engine checkpoint: keys were evicted to the spill, and this engine has none "
          "(engine.memory_budget)");
    }
    if ((c.maybe_spilled_keys_size() > 0 || c.new_keys_maybe_spilled()) && !evicting_) {
      return absl::FailedPreconditionError(
          "engine checkpoint: keys were forgotten, their states left in the spill, and this "
          "engine has no memory budget (engine.memory_budget)");
    }

    Grow();
    max_duration_ = c.max_duration();
    pruned_point_ = FromProto(c.pruned_point());
    if (spill_ != nullptr && pruned_point_ > Timestamp::Min()) spill_->PruneUpTo(pruned_point_);
    saw_snapshot_ = c.saw_snapshot();
    for (size_t i = 0; i < sessions_.size(); ++i) sessions_[i].base = c.session_bases(i);
    // Every transaction is delivered but the held ones, taken again below, and those still to
    // come.
    delivered_base_ = delivered_base;
    delivered_.assign(h_.size() - delivered_base, true);
    for (const HeldTxn& t : held) delivered_[t.id.value() - delivered_base] = false;
    for (uint64_t t : c.undelivered()) delivered_[t - delivered_base] = false;

    for (const v1::EngineSpillPin& p : c.spill_pins()) {
      spill_pins_[p.index()] =
          SpillPin{.unbounded = p.unbounded(), .expires = FromProto(p.expires())};
    }
    restore_front_.clear();
    for (const v1::EngineKey& k : c.keys()) {
      const KeyId key(k.key());
      KeyState& ks = State(key);
      ks.trimmed = k.trimmed();
      ks.trim_point = FromProto(k.trim_point());
      ks.max_duration = k.max_duration();
      ks.dropped_upto = FromProto(k.dropped_upto());
      if (k.base_in_spill()) {
        ks.base_in_spill = true;
        ks.spilled_base = FromProto(k.spilled_base());
        base_values_[key.value()] = *FromProto(k.base_value(), h_);
        ++leafless_keys_;
      }
      for (const v1::EngineValue& v : k.base_list()) ks.base_list.push_back(*FromProto(v, h_));
      base_list_values_ += ks.base_list.size();
      if (k.has_front()) restore_front_[key.value()] = FromProto(k.front());
      QueueIdle(key, ks);
    }
    uint64_t evicted = 0;
    for (uint32_t k : c.evicted_keys()) {
      if (evicting_) {
        if (keys_.slot(k) != KeyTable::Slot::kNone) continue;  // listed twice, or with a state
        // Evicted long ago, as far as AdaptIdleAdvances is concerned.
        keys_.MarkEvicted(k, advances_ - (uint64_t{1} << 30));
        ++evicted;
      } else if (KeyState& ks = *keys_.Find(k); Fresh(ks) && !ks.base_in_spill) {
        Restore(KeyId(k), ks, /*maybe=*/false);  // without a budget every state stays in memory
      }
    }
    for (uint32_t k : c.maybe_spilled_keys()) {
      if (keys_.slot(k) == KeyTable::Slot::kNone) keys_.MarkMaybeSpilled(k);
    }
    forgot_keys_ = c.new_keys_maybe_spilled();
    for (const v1::EngineStream& s : c.streams()) {
      streams_.push_back(StreamState{.name = s.name(),
                                     .closed = s.closed(),
                                     .has_watermark = s.explicit_watermark(),
                                     .watermark = FromProto(s.watermark())});
    }
    AdvanceFinality();

    // The chains first, as they were: of the versions the held transactions wrote, those from
    // each key's oldest one in memory on (older ones had been collected). Then the transactions
    // themselves, as arrivals whose verdicts were all reported: what they leave behind (pending
    // reads, sessions' windows, snapshots to judge) is what the engine had.
    for (const HeldTxn& t : held) ReinsertVersions(t.id);
    restore_front_.clear();
    restoring_ = true;
    for (const HeldTxn& t : held) DeliverOne(streams_[t.stream], t.id);
    restoring_ = false;
    // Event counters count from here (the gauges stay: they describe what is held).
    stats_.delivered = stats_.checked = stats_.duplicates = stats_.late_arrivals = 0;
    stats_.horizon_misses = stats_.flip_flops = stats_.final_violations = 0;
    stats_.snapshot_unjudged = 0;
    stats_.evicted_keys = evicted;
    return absl::OkStatus();
  }

  const EngineStats& stats() {
    stats_.retained_txns = session_entries_ + pending_count_.transactions() + pending_snapshots_;
    stats_.pending_snapshots = pending_snapshots_;
    stats_.memory_bytes = MemoryBytes();
    stats_.spill_bytes = spill_ != nullptr ? spill_->bytes() : 0;
    stats_.spill_pruned = spill_ != nullptr ? spill_->pruned() : 0;
    stats_.spill_pinned_strings = spill_pins_.size();
    stats_.eviction_idle_advances = evicting_ ? idle_advances_ : 0;
    stats_.resident_keys = keys_.resident();
    return stats_;
  }

 private:
  // The history has grown since the last delivery (a live history appended to by the daemon):
  // make room for its new transactions and keys.
  void Grow() {
    // Transactions the history released were all delivered: drop their flags once they are the
    // larger part.
    const uint64_t released = h_.first_txn();
    if (released > delivered_base_ && 2 * (released - delivered_base_) >= delivered_.size()) {
      delivered_.erase(delivered_.begin(), delivered_.begin() + (released - delivered_base_));
      delivered_base_ = released;
    }
    delivered_.resize(h_.size() - delivered_base_, false);
    keys_.Grow(h_.key_count(), forgot_keys_);
    key_stamp_.resize(h_.key_count(), 0);
    sessions_.resize(h_.session_count());
    walker_.Grow();
  }

  size_t DeliveredEnd() const { return delivered_base_ + delivered_.size(); }

  // Whether the engine may still read `id` from the history: it has pending reads, sits in its
  // session's window, or wrote a version still in a chain.
  bool Needs(TxnId id) const {
    if (pending_count_.Has(id.value())) return true;
    const Transaction& t = h_.txn(id);
    if (t.session.value() < sessions_.size()) {
      const SessionState::Entry* e = sessions_[t.session.value()].At(t.seq);
      if (e != nullptr && e->id == id) return true;
    }
    if (!Participates(t)) return false;
    const OrderKey vkey = VersionKey(id, t);
    for (const Op& op : h_.ops(t)) {
      if (!op.is_write() || op.key().value() >= keys_.size()) continue;
      const KeyState* ks = keys_.Find(op.key().value());  // an evicted key holds no version
      if (ks == nullptr || ks->versions.empty() || ks->versions.back_key() < vkey) continue;
      auto it = ks->versions.lower_bound(vkey);
      if (it != ks->versions.end() && it.key() == vkey) return true;
    }
    return false;
  }

  // Asks for what Needs(id) will read of a held transaction's writes: the key states, or with
  // `chains` the ends of their version chains (a hint; nothing changes).
  // One lookup of `id`: a released or unknown one reads as a transaction without operations.
  void PrefetchNeeds(TxnId id, bool chains) const {
    for (const Op& op : h_.ops(id)) {
      if (!op.is_write() || op.key().value() >= keys_.size()) continue;
      const KeyState* ks = keys_.Find(op.key().value());
      if (ks == nullptr) continue;
      if (chains) {
        ks->versions.PrefetchEnds();
      } else {
        ks->PrefetchState();
      }
    }
  }

  bool Participates(const Transaction& t) const {
    if (!t.committed() || !t.has_commit) return false;
    return options_.level == IsolationLevel::kSerializable || t.has_start || h_.has_snapshot(t);
  }

  // Whether `t` is checked by its snapshot (SI only; at SER the snapshot is not used).
  bool BySnapshot(const Transaction& t) const {
    return t.xid_slot != 0 && options_.level == IsolationLevel::kSnapshotIsolation &&
           h_.has_snapshot(t);
  }

  // The point at which `t` reads: its start (SI) or its commit (SER).
  // Under both levels a transaction that starts and commits at the same timestamp t comes after
  // the commits at t (a write committed at t is visible to a transaction that starts at t).
  static bool AtOnePoint(const Transaction& t) { return t.has_start && t.start == t.commit; }

  OrderKey ReadPoint(TxnId id, const Transaction& t) const {
    if (options_.level == IsolationLevel::kSerializable)
      return {t.commit, AtOnePoint(t) ? kPointPhase : kCommitPhase, id.value()};
    return {t.start, t.start == t.commit ? kPointPhase : kStartPhase, id.value()};
  }

  // A transaction with a snapshot (no start) is a commit, at either level.
  OrderKey VersionKey(TxnId id, const Transaction& t) const {
    return {t.commit, AtOnePoint(t) ? kPointPhase : kCommitPhase, id.value()};
  }

  void DeliverOne(StreamState& s, TxnId id) {
    if (id.value() < delivered_base_ || delivered_[id.value() - delivered_base_]) {
      ++stats_.duplicates;
      return;
    }
    delivered_[id.value() - delivered_base_] = true;
    ++stats_.delivered;
    const Transaction& t = h_.txn(id);
    if (t.has_commit) {
      if (s.watermark > Timestamp::Min() && t.commit <= s.watermark) ++stats_.late_arrivals;
      if (!s.has_watermark) s.arrivals.emplace_back(clock_->NowMs(), t.commit);
    }
    OnSessionArrival(id, t);
    if (!Participates(t)) return;
    ++stats_.checked;
    if (t.has_start) max_duration_ = std::max(max_duration_, t.commit.physical - t.start.physical);
    if (restoring_) [[unlikely]] {
      // Its versions are back (ReinsertVersions); a final one left nothing pending.
      if (t.commit <= final_point_) return;
    }
    const bool by_snapshot = BySnapshot(t);
    if (by_snapshot) [[unlikely]] {
      saw_snapshot_ = true;  // keys' versions stay in memory: snapshot walks read the chains
      // INT now; the external reads once every version the snapshot may see has arrived.
      walker_.Walk(
          id, options_.level, [](uint32_t, const Op&, std::span<const Value>) {},
          [&](Violation v) { Emit(std::move(v)); });
    } else {
      const OrderKey point = ReadPoint(id, t);
      walker_.Walk(
          id, options_.level,
          [&](uint32_t op_index, const Op& op, std::span<const Value>) {
            AddRead(op, point, ReadInfo{op.value(), op_index, false});
          },
          [&](Violation v) { Emit(std::move(v)); });
    }
    if (!restoring_) [[likely]] {
      ForEachWrite(id, [&](KeyId key, Value value) { InsertVersion(id, t, key, value); });
    }
    if (by_snapshot) [[unlikely]] {
      if (t.commit <= final_point_) {
        JudgeSnapshot(id);  // a late arrival
      } else {
        snapshot_due_.Push(t.commit, id.value());
        ++pending_snapshots_;
      }
    }
  }

  // RestoreCheckpoint: puts back in the chains the versions `id` wrote that were there at the
  // checkpoint (restore_front_), without any check.
  void ReinsertVersions(TxnId id) {
    const Transaction& t = h_.txn(id);
    if (!Participates(t)) return;
    const OrderKey vkey = VersionKey(id, t);
    ForEachWrite(id, [&](KeyId key, Value value) {
      const auto front = restore_front_.find(key.value());
      if (front == restore_front_.end() || vkey < front->second) return;
      KeyState& ks = *keys_.Find(key.value());  // every key with a front has its state
      if (ks.versions.empty() && ks.base_in_spill) --leafless_keys_;
      ks.versions.insert(vkey, VersionInfo{value});
      ++stats_.retained_versions;
      ScheduleTrim(key, ks);
    });
  }

  // Calls fn(key, value) once for each key transaction `id` writes, with its final value there
  // (registers; lists: the last append, unused).
  template <typename Fn>
  [[gnu::always_inline]] void ForEachWrite(TxnId id, Fn fn) {
    NextStamp();
    auto ops = h_.ops(id);
    for (size_t i = ops.size(); i-- > 0;) {
      const Op& op = ops[i];
      if (!op.is_write()) continue;
      const uint32_t k = op.key().value();
      if (key_stamp_[k] == stamp_) continue;
      key_stamp_[k] = stamp_;
      fn(op.key(), op.value());
    }
  }

  // Software prefetch ahead of the transaction being checked, one level per step: its record,
  // then its operations, then the state of its keys, then the ends of their chains, each asked
  // for once the memory it is found through has been asked for a step earlier. Most of the
  // engine's time is otherwise spent waiting for these lines. (Always inlined: GCC finds a
  // function made only of prefetches free of side effects and drops calls to it.)
  [[gnu::always_inline]] void Prefetch(std::span<const TxnId> batch, size_t i) const {
    const size_t n = batch.size();
    if (i + kPrefetchRecord < n && batch[i + kPrefetchRecord].value() < h_.size()) {
      const char* t = reinterpret_cast<const char*>(&h_.txn(batch[i + kPrefetchRecord]));
      __builtin_prefetch(t);
      __builtin_prefetch(t + 64);
    }
    // Only transactions that take part read their operations and keys (not aborted ones).
    if (const Transaction* t = PrefetchTarget(batch, i + kPrefetchOps)) {
      auto ops = h_.ops(*t);
      const char* p = reinterpret_cast<const char*>(ops.data());
      for (size_t off = 0; off < ops.size_bytes(); off += 64) __builtin_prefetch(p + off);
    }
    if (const Transaction* t = PrefetchTarget(batch, i + kPrefetchState)) {
      for (const Op& op : h_.ops(*t)) {
        if (const KeyState* ks = FindState(op.key())) ks->PrefetchState();
      }
    }
    if (const Transaction* t = PrefetchTarget(batch, i + kPrefetchChains)) {
      for (const Op& op : h_.ops(*t)) {
        if (const KeyState* ks = FindState(op.key())) ks->PrefetchChains();
      }
    }
  }
  // How many transactions ahead each level is asked for.
  static constexpr size_t kPrefetchRecord = 8;
  static constexpr size_t kPrefetchOps = 6;
  static constexpr size_t kPrefetchState = 4;
  static constexpr size_t kPrefetchChains = 2;

  std::string SpillName(KeyId key) const { return SpillKeyName(h_, key); }

  // The key's state if memory holds one (prefetching and scans of queues must not restore an
  // evicted key's).
  const KeyState* FindState(KeyId key) const {
    return key.value() < keys_.size() ? keys_.Find(key.value()) : nullptr;
  }
  KeyState* FindState(KeyId key) {
    return key.value() < keys_.size() ? keys_.Find(key.value()) : nullptr;
  }

  // The state of `key`, made when it has none, restored from the spill when it was evicted.
  [[gnu::always_inline]] KeyState& State(KeyId key) {
    if (KeyState* ks = keys_.Find(key.value())) [[likely]] {
      return *ks;
    }
    return NewState(key);
  }
  [[gnu::noinline]] KeyState& NewState(KeyId key) {
    const KeyTable::Slot slot = keys_.slot(key.value());
    const bool evicted = slot == KeyTable::Slot::kEvicted;
    // An evicted key back soon after it left (AdaptIdleAdvances).
    if (evicted && keys_.EvictedAge(key.value(), advances_) <= kIdleAdvances) ++quick_returns_;
    KeyState& ks = keys_.Create(key.value());
    if (evicted) [[unlikely]] {
      Restore(key, ks, /*maybe=*/false);
    } else if (slot == KeyTable::Slot::kMaybeSpilled) [[unlikely]] {
      Restore(key, ks, /*maybe=*/true);
    }
    return ks;
  }

  // Brings back the state of evicted `key` from its record in the spill (Evict): no version in
  // memory, the base in the spill. If the spill cannot answer, a state under which every check
  // that needs what the key held up to the final point is a horizon miss. Queues the key as idle,
  // so that it leaves memory again if it stays so. With `maybe` (a key the spill may hold,
  // KeyTable::Slot::kMaybeSpilled), a key the spill has no record of keeps its fresh state.
  [[gnu::noinline, gnu::cold]] void Restore(KeyId key, KeyState& ks, bool maybe) {
    std::optional<SpilledKey> record;
    bool answered = false;
    if (!spill_broken_) {
      const ReloadTimer timer(this);  // a read of the spill, counted and timed as a reload
      auto r = spill_->FindKey(SpillName(key));
      if (r.ok()) {
        record = *r;
        answered = true;
      } else {
        SpillFailed(r.status());
      }
    }
    if (maybe && answered && !record) {
      ++stats_.new_key_lookups;  // a key never evicted: nothing to bring back
      return;
    }
    ++stats_.restored_keys;
    if (maybe && record) ++stats_.forgotten_returns;
    ks.trimmed = true;
    if (record) {
      ks.spilled_base = record->base;
      ks.base_in_spill = true;
      base_values_[key.value()] = record->base_value;
      ks.trim_point = record->trim_point;
      ks.dropped_upto = record->dropped_upto;
      ks.max_duration = record->max_duration;
      ++leafless_keys_;
    } else {
      // The base lay at or below the final point: treat everything up to it as dropped.
      ks.trim_point = final_point_;
      ks.dropped_upto = OrderKey::Last(final_point_);
      ks.max_duration = max_duration_;
    }
    ks.last_active = static_cast<uint32_t>(advances_);
    QueueIdle(key, ks);
  }

  // batch[j], if it exists and takes part in the checks.
  const Transaction* PrefetchTarget(std::span<const TxnId> batch, size_t j) const {
    if (j >= batch.size() || batch[j].value() >= h_.size()) return nullptr;
    const Transaction& t = h_.txn(batch[j]);
    return Participates(t) ? &t : nullptr;
  }

  // A fresh value of stamp_ (key_stamp_ deduplicates keys within one pass); all stamps are
  // cleared when it wraps around.
  void NextStamp() {
    if (++stamp_ == 0) {
      std::fill(key_stamp_.begin(), key_stamp_.end(), 0);
      stamp_ = 1;
    }
  }

  // --- Session -------------------------------------------------------------------------------

  void OnSessionArrival(TxnId id, const Transaction& t) {
    SessionState& ss = sessions_[t.session.value()];
    if (t.seq < ss.base) return;  // cannot happen: positions below base were all delivered
    const size_t index = t.seq - ss.base;
    const bool participates = Participates(t);
    if (index >= ss.entries.size()) {
      // A position too far past the session's first missing one would make the window hold
      // every position in between: the transaction is left out of its session, counted.
      if (index - ss.prefix >= kMaxSessionLead) {
        if (participates) ++stats_.session_unjudged;
        return;
      }
      ss.entries.resize(index + 1);
    }
    ss.entries[index] = SessionState::Entry{id, participates};
    ++session_entries_;
    if (participates) CheckSessionBack(ss, t.seq, id);
    // The first participant after this one may now reach its predecessor.
    for (uint32_t seq = t.seq + 1;; ++seq) {
      const SessionState::Entry* next = ss.At(seq);
      if (next == nullptr) break;
      if (next->participates) {
        CheckSessionBack(ss, seq, next->id);
        break;
      }
    }
    // Keep only what a future arrival can still need: from the newest participant of the
    // delivered prefix on.
    if (index != ss.prefix) return;
    while (ss.prefix < ss.entries.size() && ss.entries[ss.prefix].id.valid()) {
      if (ss.entries[ss.prefix].participates) {
        ss.anchor = ss.prefix;
        ss.has_anchor = true;
      }
      ++ss.prefix;
    }
    if (ss.has_anchor && ss.anchor > 0) {
      ss.entries.drop_front(ss.anchor);
      ss.base += static_cast<uint32_t>(ss.anchor);
      ss.prefix -= ss.anchor;
      session_entries_ -= ss.anchor;
      ss.anchor = 0;
    }
  }

  // Checks transaction `id` at position `seq` against its nearest committed predecessor, once
  // every transaction between them has arrived.
  void CheckSessionBack(const SessionState& ss, uint32_t seq, TxnId id) {
    for (uint32_t s = seq; s-- > 0;) {
      const SessionState::Entry* prev_entry = ss.At(s);
      if (prev_entry == nullptr) return;  // not delivered yet: checked when it arrives
      if (!prev_entry->participates) continue;
      const TxnId prev = prev_entry->id;
      const std::optional<bool> broken = axioms::SessionBroken(h_, options_.level, id, prev);
      if (!broken) {
        ++stats_.snapshot_unjudged;
      } else if (*broken) {
        Emit(axioms::ExplainSession(h_, options_.level, id, prev));
      }
      return;
    }
  }

  // --- Ext -----------------------------------------------------------------------------------

  void AddRead(const Op& op, const OrderKey& point, ReadInfo read) {
    const KeyId key = op.key();
    KeyState& ks = State(key);
    if (evicting_) ks.last_active = static_cast<uint32_t>(advances_);
    if (Collected(key, ks, point)) {
      CheckCollectedRead(key, ks, op, point, read.op_index);
      return;
    }
    read.wrong = Wrong(key, ks, point, op, read.op_index);
    if (point.ts <= final_point_) {
      if (read.wrong) Emit(Explain(key, ks, point, read));
      return;
    }
    if (ks.readers.empty() || point.ts < ks.finality_at) {
      // The key's earliest pending read: its entry in the finality queue moves here.
      ks.finality_at = point.ts;
      finality_.Push(point.ts, key.value());
    }
    ks.readers.insert(point, read);
    ++stats_.provisional_reads;
    if (read.wrong) ++stats_.provisional_violations;
    pending_count_.Add(point.txn());
  }

  // A read whose snapshot has been collected. With a spill it is reloaded: everything collected
  // lies at or below the final point, so the verdict is final at once. Without one (or if the
  // spill fails), rather than risk a false alarm, the read goes unjudged and is counted.
  [[gnu::noinline, gnu::cold]] void CheckCollectedRead(KeyId key, const KeyState& ks, const Op& op,
                                                       const OrderKey& point, uint32_t op_index) {
    Violation v;
    const std::optional<bool> wrong =
        spill_ != nullptr ? Judge(key, ks, point, op, op_index, &v) : std::nullopt;
    if (!wrong) {
      ++stats_.horizon_misses;
    } else if (*wrong) {
      Emit(std::move(v));
    }
  }

  // Whether versions visible at `point` may have been collected: for a register, the point lies
  // before the oldest version kept; for a list, at or below the collection point.
  // Always at or below the final point: a read above it whose visible version memory does not
  // hold (a spilled base) stays pending, since a version still to come may be the one it sees.
  bool Collected(KeyId key, const KeyState& ks, const OrderKey& point) const {
    if (!ks.trimmed || point.ts > final_point_) return false;
    if (h_.key(key).is_list) return point.ts <= ks.trim_point;
    return ks.versions.empty() || point < ks.versions.front_key();
  }

  // The newest version of a register visible at `point`, or nullptr for the initial value.
  struct Visible {
    OrderKey key;
    const VersionInfo* info;
  };
  // Nullopt also when the version visible at `point` is a key's spilled base (memory holds
  // nothing newer before the point).
  static std::optional<Visible> VisibleVersion(const KeyState& ks, const OrderKey& point) {
    std::optional<Visible> v = NewestInMemory(ks, point);
    if (ks.base_in_spill) [[unlikely]] {
      if (ks.spilled_base < point && (!v || v->key < ks.spilled_base)) return std::nullopt;
    }
    return v;
  }
  static std::optional<Visible> NewestInMemory(const KeyState& ks, const OrderKey& point) {
    if (ks.versions.empty()) return std::nullopt;
    if (ks.versions.back_key() < point) {
      auto last = ks.versions.last();  // usually: the read arrives after what it sees
      return Visible{last.key(), &last.value()};
    }
    auto it = ks.versions.lower_bound(point);
    if (it == ks.versions.begin()) return std::nullopt;
    --it;
    return Visible{it.key(), &it.value()};
  }

  // The committed list visible at `point`, into `out`: the initial list, then the appends of
  // every version before the point, in order; from the spill when the point lies at or below
  // what memory folded into base_list. False if the spill could not be read.
  bool VisibleList(KeyId key, const KeyState& ks, const OrderKey& point, std::vector<Value>* out) {
    out->clear();
    if (ks.trimmed && point.ts <= ks.trim_point && spill_ != nullptr) {
      // base_list holds the appends of every version up to trim_point, in order; those of the
      // versions at or after the point are in the spill (all of them, if nothing at or after
      // the point was dropped): the list at the point is base_list without them.
      if (spill_broken_ || !(ks.dropped_upto < point) || point.ts <= pruned_point_) return false;
      const ReloadTimer timer(this);
      size_t after = 0;
      absl::Status s =
          spill_->ScanAfter(SpillName(key), Before(point), [&](const SpilledVersion& v) {
            after += v.appends.size();
            return true;
          });
      if (!s.ok()) return SpillFailed(s);
      if (after > ks.base_list.size()) return false;  // cannot happen: the spill is a subset
      out->assign(ks.base_list.begin(), ks.base_list.end() - static_cast<ptrdiff_t>(after));
    } else if (ks.trimmed) {
      out->assign(ks.base_list.begin(), ks.base_list.end());
    } else {
      auto init = h_.InitialList(key);
      out->assign(init.begin(), init.end());
    }
    for (auto it = ks.versions.begin(); it != ks.versions.end() && it.key() < point; ++it) {
      AppendsOf(TxnId(it.key().txn()), key, out);
    }
    return true;
  }

  // The newest version of register `key` visible at `point` (writer invalid: the initial
  // value); from the spill when memory holds nothing before the point and versions were
  // collected. False if the spill could not be read.
  struct RegisterView {
    Value value;
    TxnId writer = TxnId::Invalid();
  };
  bool VisibleRegister(KeyId key, const KeyState& ks, const OrderKey& point, RegisterView* out) {
    if (const auto v = VisibleVersion(ks, point)) {
      *out = RegisterView{v->info->value, TxnId(v->key.txn())};
      return true;
    }
    if (ks.trimmed && spill_ != nullptr) {
      // At or below the prune point the spill may have dropped the version the point sees.
      if (spill_broken_ || point.ts <= pruned_point_) return false;
      if (ks.base_in_spill && ks.spilled_base < point) {
        // Memory holds nothing newer before the point (VisibleVersion), and the spill nothing
        // newer than the base: the point sees the base, whose value came back with the key's
        // state (Restore, the only place that sets base_in_spill). Not a reload: the spill was
        // read, and counted, when the state came back.
        const auto it = base_values_.find(key.value());
        if (it == base_values_.end()) return false;  // cannot happen
        *out = RegisterView{it->second, TxnId(ks.spilled_base.txn())};
        return true;
      }
      const ReloadTimer timer(this);
      auto r = spill_->NewestBefore(SpillName(key), point);
      if (!r.ok()) return SpillFailed(r.status());
      // Exact unless a dropped version may be newer than what the spill has before the point.
      if (r->has_value() && ks.dropped_upto < (*r)->at) {
        *out = RegisterView{(*r)->value, TxnId((*r)->at.txn())};
        return true;
      }
      if (r->has_value() || ks.dropped_upto != kBeforeAll) return false;
    }
    *out = RegisterView{h_.InitialValue(key), TxnId::Invalid()};
    return true;
  }

  // Counts a reload (a check that reads the spill) and, with on_reload, times it.
  class ReloadTimer {
   public:
    explicit ReloadTimer(EngineImpl* e) : e_(e) {
      ++e_->stats_.reloads;
      if (e_->options_.on_reload) start_ = std::chrono::steady_clock::now();
    }
    ~ReloadTimer() {
      if (!e_->options_.on_reload) return;
      e_->options_.on_reload(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    ReloadTimer(const ReloadTimer&) = delete;
    ReloadTimer& operator=(const ReloadTimer&) = delete;

   private:
    EngineImpl* e_;
    std::chrono::steady_clock::time_point start_;
  };

  // A failed spill read or write: counted and logged once; the spill is off from then on (the
  // checks that need it go unjudged, as horizon misses). Returns false.
  [[gnu::cold]] bool SpillFailed(const absl::Status& s) {
    ++stats_.spill_errors;
    if (!spill_broken_) {
      spdlog::error("engine: the version spill failed, checks that need it go unjudged: {}",
                    std::string(s.message()));
    }
    spill_broken_ = true;
    return false;
  }

  // Appends `writer`'s appends to `key`, in program order, to `out`; only those before op
  // `limit` if given.
  void AppendsOf(TxnId writer, KeyId key, std::vector<Value>* out,
                 size_t limit = static_cast<size_t>(-1)) const {
    axioms::AppendsOf(h_, writer, key, out, limit);
  }

  const Op& ReadOp(const OrderKey& point, const ReadInfo& r) const {
    return h_.ops(TxnId(point.txn()))[r.op_index];
  }

  bool Wrong(KeyId key, const KeyState& ks, const OrderKey& point, const ReadInfo& r) {
    return Judge(key, ks, point, ReadOp(point, r), r.op_index, nullptr).value_or(r.wrong);
  }
  bool Wrong(KeyId key, const KeyState& ks, const OrderKey& point, const Op& op,
             uint32_t op_index) {
    if (op.kind() != OpKind::kListRead) {
      // The common case inline: a register whose visible version memory holds.
      if (const auto v = VisibleVersion(ks, point)) {
        return !axioms::RegisterReadMatches(op.value(), v->info->value, false);
      }
      if (!ks.trimmed || spill_ == nullptr) {
        return !axioms::RegisterReadMatches(op.value(), h_.InitialValue(key),
                                            h_.AbsentReadsInitial(key));
      }
    }
    // Nullopt: the spill could not answer (an evicted key's base after a spill error). The read
    // goes unjudged, counted, unless a version arriving later gives it something to compare.
    const std::optional<bool> wrong = Judge(key, ks, point, op, op_index, nullptr);
    if (!wrong) ++stats_.horizon_misses;
    return wrong.value_or(false);
  }

  // Whether the read `op` (operation op_index of the reader point.txn) at `point` is wrong, and
  // if so and `violation` is given, the violation; nullopt if the snapshot could not be had.
  [[gnu::noinline]] std::optional<bool> Judge(KeyId key, const KeyState& ks, const OrderKey& point,
                                              const Op& op, uint32_t op_index,
                                              Violation* violation) {
    const TxnId reader(point.txn());
    if (op.kind() == OpKind::kListRead) {
      if (!VisibleList(key, ks, point, &committed_scratch_)) return std::nullopt;
      own_scratch_.clear();
      AppendsOf(reader, key, &own_scratch_, op_index);
      if (axioms::ListReadMatches(committed_scratch_, own_scratch_, h_.list_elements(op))) {
        return false;
      }
      if (violation != nullptr) {
        *violation = axioms::ListViolation(h_, write_index_, options_.level, reader, key,
                                           committed_scratch_, own_scratch_, h_.list_elements(op));
      }
      return true;
    }
    RegisterView v;
    if (!VisibleRegister(key, ks, point, &v)) return std::nullopt;
    if (axioms::RegisterReadMatches(op.value(), v.value,
                                    !v.writer.valid() && h_.AbsentReadsInitial(key))) {
      return false;
    }
    if (violation != nullptr) {
      *violation = axioms::RegisterViolation(h_, write_index_, options_.level, reader, key, v.value,
                                             v.writer, op.value());
    }
    return true;
  }

  Violation Explain(KeyId key, const KeyState& ks, const OrderKey& point, const ReadInfo& r) {
    Violation v;
    Judge(key, ks, point, ReadOp(point, r), r.op_index, &v);
    return v;
  }

  // --- Versions and NoConflict ---------------------------------------------------------------

  // Reports the writers of `key` in the spill whose intervals overlap writer `t`'s (SI
  // NoConflict). False if the spill could not be read.
  // Some writers overlapping `t` may have been collected: they are in the spill, or, without
  // one, the check is a horizon miss.
  [[gnu::noinline, gnu::cold]] void CollectedOverlaps(TxnId id, const Transaction& t, KeyId key,
                                                      const KeyState& ks, const OrderKey& vkey,
                                                      int64_t horizon) {
    if (spill_ == nullptr || !SpilledOverlaps(id, t, key, ks, vkey, horizon)) {
      ++stats_.horizon_misses;
    }
  }
  bool SpilledOverlaps(TxnId id, const Transaction& t, KeyId key, const KeyState& ks,
                       const OrderKey& vkey, int64_t horizon) {
    if (spill_broken_) return false;
    const ReloadTimer timer(this);
    absl::Status s =
        spill_->ScanAfter(SpillName(key), OrderKey::Last(t.start), [&](const SpilledVersion& u) {
          if (u.at.ts.physical > horizon) return false;
          if (u.at.txn() != id.value() && u.writer_start < t.commit) {
            const TxnId other(u.at.txn());
            const bool u_first = u.at < vkey;
            // The other writer may be one the history no longer holds: the spill has its name.
            std::pair<TxnId, std::string> released{other, u.writer_name};
            Emit(axioms::ExplainNoConflict(h_, u_first ? other : id, u_first ? id : other, key,
                                           h_.has_txn(other)
                                               ? std::span<const std::pair<TxnId, std::string>>()
                                               : std::span(&released, 1)));
          }
          return true;
        });
    if (!s.ok()) return SpillFailed(s);
    // Complete unless a writer committed after t's start was dropped rather than spilled, or
    // pruned from the spill (every version committed after a start above the prune point is
    // kept: it expires later still).
    return ks.dropped_upto.ts <= t.start && pruned_point_ <= t.start;
  }

  void InsertVersion(TxnId id, const Transaction& t, KeyId key, Value value) {
    KeyState& ks = State(key);
    const OrderKey vkey = VersionKey(id, t);
    if (options_.level == IsolationLevel::kSnapshotIsolation && !t.has_start) [[unlikely]] {
      SnapshotWriterOverlaps(id, t, key, ks, vkey);
    } else if (options_.level == IsolationLevel::kSnapshotIsolation) {
      // Overlapping writers U: U.commit > t.start and U.start < t.commit. A writer that started
      // before t.commit commits before t.commit + max_duration, which bounds the scan. A writer
      // with a snapshot (no start) overlaps if it committed first (t did not see it); one that
      // committed after t judges the pair by its snapshot (JudgeSnapshot).
      int64_t duration = t.commit.physical - t.start.physical;
      int64_t horizon = t.commit.physical + std::max(ks.max_duration, duration);
      if (ks.trimmed && t.start < ks.trim_point) CollectedOverlaps(id, t, key, ks, vkey, horizon);
      // Usually every version of the key committed before t started: nothing to scan.
      auto it = ks.versions.end();
      if (!ks.versions.empty() && ks.versions.back_key().ts > t.start) {
        it = ks.versions.upper_bound(OrderKey::Last(t.start));
      }
      for (; it != ks.versions.end() && it.key().ts.physical <= horizon; ++it) {
        if (it.key().ts <= t.start || it.key().txn() == id.value()) continue;
        const Transaction& other = h_.txn(TxnId(it.key().txn()));
        const bool u_first = it.key() < vkey;
        if (other.has_start ? other.start < t.commit : u_first) {
          TxnId u(it.key().txn());
          Emit(axioms::ExplainNoConflict(h_, u_first ? u : id, u_first ? id : u, key));
        }
      }
      ks.max_duration = std::max(ks.max_duration, duration);
    }
    if (ks.versions.empty() && ks.base_in_spill) --leafless_keys_;
    auto pos = ks.versions.insert(vkey, VersionInfo{value});
    ++stats_.retained_versions;
    ScheduleTrim(key, ks);
    if (evicting_) {
      ks.last_active = static_cast<uint32_t>(advances_);
      if (ks.versions.size() == 1 && ks.readers.empty()) QueueIdle(key, ks);  // for Evict
    }
    // The reads whose snapshot now ends at (registers: points in (vkey, next version]) or
    // includes (lists: every point after vkey) the new version.
    if (ks.readers.empty() || !(vkey < ks.readers.back_key())) return;
    const bool is_list = h_.key(key).is_list;
    bool bounded = false;
    OrderKey limit;
    if (!is_list) {
      auto next = pos;
      ++next;
      if (next != ks.versions.end()) {
        bounded = true;
        limit = next.key();
      }
      if (ks.base_in_spill && vkey < ks.spilled_base && (!bounded || ks.spilled_base < limit)) {
        // A late version older than the spilled base: reads after the base do not see it.
        bounded = true;
        limit = ks.spilled_base;
      }
    }
    const auto end = ks.readers.end();
    for (auto it = ks.readers.upper_bound(vkey); it != end; ++it) {
      if (bounded && limit < it.key()) break;
      // A register read between the new version and the next one now sees exactly the new
      // version; a list read sees one more append somewhere in its list.
      bool wrong = is_list ? Wrong(key, ks, it.key(), it.value())
                           : !axioms::RegisterReadMatches(it.value().observed, value, false);
      if (wrong == it.value().wrong) continue;
      ++stats_.flip_flops;
      if (wrong) {
        ++stats_.provisional_violations;
      } else {
        --stats_.provisional_violations;
      }
      it.value().wrong = wrong;
    }
  }

  // --- Snapshots (docs/engine.md, "Snapshots") ------------------------------------------------

  // NoConflict for writer `t` with a snapshot, at its arrival, against the writers with a start
  // that committed after it and started before it committed (their rule: they did not see it).
  // The writers before it are judged by its snapshot, in JudgeSnapshot.
  [[gnu::noinline]] void SnapshotWriterOverlaps(TxnId id, const Transaction& t, KeyId key,
                                                const KeyState& ks, const OrderKey& vkey) {
    if (ks.max_duration == 0 || ks.versions.empty() || !(vkey < ks.versions.back_key())) return;
    const int64_t horizon = t.commit.physical + ks.max_duration;
    for (auto it = ks.versions.upper_bound(vkey);
         it != ks.versions.end() && it.key().ts.physical <= horizon; ++it) {
      const Transaction& u = h_.txn(TxnId(it.key().txn()));
      if (u.has_start && u.start < t.commit) {
        Emit(axioms::ExplainNoConflict(h_, id, TxnId(it.key().txn()), key));
      }
    }
  }

  // Judges transaction `id`, which has a snapshot, once the final point has passed its commit:
  // every version it can see (committed before it) has arrived, so the verdicts are final at
  // once. EXT against the newest version of each key its snapshot sees, NoConflict against the
  // writers committed before it that it does not see. A walk that reaches collected state
  // without an answer is a horizon miss.
  void JudgeSnapshot(TxnId id) {
    const Transaction& t = h_.txn(id);
    const OrderKey vkey = VersionKey(id, t);
    walker_.Walk(
        id, options_.level,
        [&](uint32_t, const Op& op, std::span<const Value> own) {
          JudgeSnapshotRead(id, t, vkey, op, own);
        },
        [](Violation) {});  // INT was reported at arrival
    NextStamp();
    for (const Op& op : h_.ops(t)) {
      if (!op.is_write()) continue;
      const uint32_t k = op.key().value();
      if (key_stamp_[k] == stamp_) continue;
      key_stamp_[k] = stamp_;
      const KeyState& ks = State(op.key());
      ChainCursor c(ks.versions, vkey);
      const auto stop = axioms::ConcurrentWriters(
          h_, t, c, [&](TxnId u) { Emit(axioms::ExplainNoConflict(h_, u, id, op.key())); },
          &stats_.snapshot_unjudged);
      if (stop == axioms::SnapshotStop::kEnd && ks.trimmed) ++stats_.horizon_misses;
    }
  }

  void JudgeSnapshotRead(TxnId reader, const Transaction& t, const OrderKey& vkey, const Op& op,
                         std::span<const Value> own) {
    using axioms::SnapshotStop;
    const KeyId key = op.key();
    const KeyState& ks = State(key);
    ChainCursor c(ks.versions, vkey);
    TxnId w;
    if (op.kind() != OpKind::kListRead) {
      const SnapshotStop stop = axioms::NewestVisible(h_, t, c, &w);
      if (stop == SnapshotStop::kUnknown) {
        ++stats_.snapshot_unjudged;
        return;
      }
      if (stop == SnapshotStop::kEnd && ks.trimmed) {
        ++stats_.horizon_misses;
        return;
      }
      const bool initial = stop == SnapshotStop::kEnd;
      const Value expected = initial ? h_.InitialValue(key) : c.it().value().value;
      if (!axioms::RegisterReadMatches(op.value(), expected,
                                       initial && h_.AbsentReadsInitial(key))) {
        Emit(axioms::RegisterViolation(h_, write_index_, options_.level, reader, key, expected,
                                       initial ? TxnId::Invalid() : w, op.value()));
      }
      return;
    }
    const SnapshotStop stop = axioms::VisibleWriters(h_, t, c, &visible_scratch_, &w);
    if (stop == SnapshotStop::kUnknown) {
      ++stats_.snapshot_unjudged;
      return;
    }
    if (stop == SnapshotStop::kBoundary) {
      // The list up to and including the boundary's version, as any read just after it sees it.
      if (!VisibleList(key, ks, After(c.it().key()), &committed_scratch_)) {
        ++stats_.horizon_misses;
        return;
      }
    } else if (ks.trimmed) {
      ++stats_.horizon_misses;
      return;
    } else {
      auto init = h_.InitialList(key);
      committed_scratch_.assign(init.begin(), init.end());
    }
    for (size_t i = visible_scratch_.size(); i-- > 0;) {
      AppendsOf(visible_scratch_[i], key, &committed_scratch_);
    }
    const auto observed = h_.list_elements(op);
    if (axioms::ListReadMatches(committed_scratch_, own, observed)) return;
    Emit(axioms::ListViolation(h_, write_index_, options_.level, reader, key, committed_scratch_,
                               own, observed));
  }

  // --- Finality and collection ---------------------------------------------------------------

  void AdvanceFinality() {
    Timestamp f = Timestamp::Max();
    for (const StreamState& s : streams_) {
      if (!s.closed) f = std::min(f, s.watermark);
    }
    if (streams_.empty()) f = Timestamp::Min();
    if (f <= final_point_) return;
    final_point_ = f;
    ++advances_;
    const uint64_t spill_writes_before = SpillWrites();
    // A key's entry is current while it sits at the key's finality_at; older ones are stale.
    due_keys_.clear();
    finality_.TakeUpTo(final_point_, [this](uint64_t key) {
      due_keys_.push_back(KeyId(static_cast<uint32_t>(key)));
    });
    for (size_t i = 0; i < due_keys_.size(); ++i) {
      if (i + 2 < due_keys_.size()) {
        if (const KeyState* ks = FindState(due_keys_[i + 2])) ks->PrefetchState();
      }
      if (i + 1 < due_keys_.size()) {
        if (const KeyState* ks = FindState(due_keys_[i + 1])) ks->readers.PrefetchEnds();
      }
      FinalizeKey(due_keys_[i]);
    }
    ReleaseIdleKeys();
    if (pending_snapshots_ > 0) [[unlikely]] {
      due_snapshots_.clear();
      snapshot_due_.TakeUpTo(final_point_, [this](uint64_t t) { due_snapshots_.push_back(t); });
      // In commit order, so that what they report comes in a stable order.
      std::sort(due_snapshots_.begin(), due_snapshots_.end(), [this](uint64_t a, uint64_t b) {
        return h_.txn(TxnId(a)).commit < h_.txn(TxnId(b)).commit;
      });
      for (uint64_t t : due_snapshots_) JudgeSnapshot(TxnId(t));
      pending_snapshots_ -= due_snapshots_.size();
    }
    Collect();
    FlushSpill(spill_writes_before);
  }

  // Makes final every pending read of `key` at or below the final point, and queues the key
  // again at its earliest read left.
  void FinalizeKey(KeyId key) {
    KeyState* state = FindState(key);
    // A stale entry (already done), perhaps of a key released or evicted since.
    if (state == nullptr || state->finality_at > final_point_) return;
    KeyState& ks = *state;
    auto it = ks.readers.begin();
    const auto end = ks.readers.end();
    for (; it != end && it.key().ts <= final_point_; ++it) {
      if (it.value().wrong) {
        Emit(Explain(key, ks, it.key(), it.value()));
        --stats_.provisional_violations;
      }
      --stats_.provisional_reads;
      pending_count_.Remove(it.key().txn());
    }
    ks.readers.erase_prefix(it);
    if (ks.readers.empty()) {
      ks.finality_at = Timestamp::Max();
      QueueIdle(key, ks);
    } else {
      ks.finality_at = ks.readers.front_key().ts;
      finality_.Push(ks.finality_at, key.value());
    }
  }

  // Frees the pending-read leaf of the keys whose reads all became final kIdleAdvances advances
  // of the final point ago and that have had none since: cold keys give back their leaf, while
  // a key read again soon (a hot one) keeps it rather than allocating one at each read. Over
  // the memory budget, such a key left with a single final version of a register moves it to
  // the spill (Evict). Keys enter the queue when their last pending read becomes final, and
  // when they are left with one version (a register written once, or trimmed to one).
  //
  // Under a budget a key is queued once at a time, and one touched since it was queued waits
  // again; how long a key must stay idle adapts (AdaptIdleAdvances).
  void ReleaseIdleKeys() {
    const uint64_t wait = evicting_ ? idle_advances_ : kIdleAdvances;
    // The evicted keys' records go to the spill in one write with the advance (FlushSpill): at
    // most kMaxEvictionsPerAdvance of them, and the rest wait for the next advances, so that a
    // burst (the budget first exceeded with a hundred thousand idle keys queued) does not hold
    // the engine thread for the best part of a second.
    const uint64_t evicted_before = stats_.evicted_keys;
    while (!idle_keys_.empty() && idle_keys_.front().first + wait <= advances_ &&
           stats_.evicted_keys - evicted_before < kMaxEvictionsPerAdvance) {
      const KeyId key(idle_keys_.front().second);
      idle_keys_.pop_front();
      KeyState* state = FindState(key);
      // Cannot happen: a key's state leaves memory only as its entry is taken here.
      if (state == nullptr) continue;
      KeyState& ks = *state;
      if (evicting_) {
        ks.idle_queued = false;
        if (static_cast<uint32_t>(advances_) - ks.last_active < wait) {
          QueueIdle(key, ks);
          continue;
        }
      }
      if (!ks.readers.empty()) continue;  // queued again when its reads are final
      if (evicting_ && Fresh(ks)) {
        // Only read, never written: nothing a fresh state would not hold. (Without a budget
        // the state stays: making it again at the next read costs more than it frees.)
        keys_.Release(key.value(), /*evicted=*/false);
        continue;
      }
      ks.readers.clear();
      // A version not final yet (the wait can be shorter than the delivery's disorder): the
      // key is tried again after another wait, or it would stay in memory until touched again.
      if (EvictionAllowed() && !Evict(key, ks)) QueueIdle(key, ks);
    }
    if (evicting_) {
      AdaptIdleAdvances();
      // The states of keys once in memory together, and since evicted, give their memory back
      // (no reference to a state is held here).
      if (advances_ % kIdleAdvances == 0) keys_.Compact();
    }
  }
  // How far past the first position of a session not delivered yet a position may lie and still
  // be checked against its session neighbours (docs/engine.md, "Session positions").
  static constexpr size_t kMaxSessionLead = size_t{1} << 14;
  static constexpr uint64_t kIdleAdvances = 64;
  static constexpr uint64_t kMaxEvictionsPerAdvance = 16384;
  static constexpr uint64_t kMaxIdleAdvances = uint64_t{1} << 16;
  static constexpr uint64_t kMinIdleAdvances = 1;

  void QueueIdle(KeyId key, KeyState& ks) {
    if (evicting_) {
      if (ks.idle_queued) return;
      ks.idle_queued = true;
    }
    idle_keys_.emplace_back(advances_, key.value());
  }

  // Every kIdleAdvances advances: when evicted keys came back soon (within kIdleAdvances
  // advances of their eviction: each such return costs a lookup in the spill and freed memory
  // only for a while) for more than half of the keys evicted meanwhile, the budget evicts keys
  // that are not cold: keys must then stay idle twice as long. When fewer than one in four came
  // back soon, half as long, down to a single advance: keys that stay away long after their
  // eviction (many keys touched rarely, new keys) leave memory as soon as they are final. The
  // horizon is fixed: one that grew with the wait would count ever later returns as soon ones,
  // and the wait would grow without end.
  void AdaptIdleAdvances() {
    if (advances_ % kIdleAdvances != 0) return;
    const uint64_t evicted = stats_.evicted_keys - evicted_mark_;
    const uint64_t returned = quick_returns_ - returns_mark_;
    evicted_mark_ = stats_.evicted_keys;
    returns_mark_ = quick_returns_;
    if (evicted == 0 && returned == 0) return;
    if (returned * 2 > evicted) {
      idle_advances_ = std::min(idle_advances_ * 2, kMaxIdleAdvances);
    } else if (returned * 4 < evicted) {
      idle_advances_ = std::max(idle_advances_ / 2, kMinIdleAdvances);
    }
  }

  // Whether `ks` holds nothing a state made afresh would not: no version, pending read, trim or
  // queue entry (but the idle one). Such a state can leave memory without a trace.
  static bool Fresh(const KeyState& ks) {
    return ks.versions.empty() && ks.readers.empty() && !ks.trimmed && !ks.in_gc &&
           ks.max_duration == 0 && ks.base_list.empty();
  }

  bool EvictionAllowed() const {
    return evicting_ && !spill_broken_ && !saw_snapshot_ && MemoryBytes() > options_.memory_budget;
  }

  // Moves the single version of register `key`, final and with no read pending, to the spill,
  // then the key's state itself (SpilledKey): its writer is then no longer needed in memory
  // either (Needs). Reads see the version from the spill (VisibleRegister) until a newer one
  // replaces it; the state comes back at the key's next read or write (State). A key restored
  // and not written since leaves again as it is: its record in the spill still holds.
  // `ks` is not to be used afterwards if the key was evicted.
  // Returns false when the key could go but for its version, which is not final yet (it must
  // then be tried again later), true otherwise.
  bool Evict(KeyId key, KeyState& ks) {
    if (ks.in_gc || h_.key(key).is_list) return true;
    if (ks.versions.empty() && ks.base_in_spill) {
      --leafless_keys_;
      ++stats_.evicted_keys;
      base_values_.erase(key.value());
      keys_.Release(key.value(), /*evicted=*/true, advances_);
      return true;
    }
    if (ks.versions.size() != 1) return true;
    const OrderKey at = ks.versions.front_key();
    if (at.ts > final_point_) return false;
    if (ks.base_in_spill) {
      if (!(ks.spilled_base < at) || !ReplaceSpilledBase(key, ks, at.ts)) return true;
    }
    // It expires once a newer version replaces it (ReplaceSpilledBase).
    PutInSpill(key, /*is_list=*/false, at, ks.versions.begin().value(), Timestamp::Max());
    spill_->PutKey(SpillName(key), SpilledKey{.base = at,
                                              .base_value = ks.versions.begin().value().value,
                                              .trim_point = std::max(ks.trim_point, at.ts),
                                              .dropped_upto = ks.dropped_upto,
                                              .max_duration = ks.max_duration});
    ++stats_.evicted_keys;
    stats_.retained_versions -= ks.versions.size();
    keys_.Release(key.value(), /*evicted=*/true, advances_);
    return true;
  }

  // Writes the in-memory version `at` of `key` to the spill, with what a check needs without its
  // writer's record (SpilledVersion).
  void PutInSpill(KeyId key, bool is_list, const OrderKey& at, const VersionInfo& info,
                  const Timestamp& expires) {
    const TxnId writer(at.txn());
    const Transaction& w = h_.txn(writer);
    SpilledVersion v;
    v.at = at;
    v.expires = expires;
    v.writer_start = w.has_start ? w.start : Timestamp::Min();
    v.writer_name = h_.txn_name(writer);
    if (is_list) {
      AppendsOf(writer, key, &v.appends);
    } else {
      v.value = info.value;
    }
    PinSpilled(v, +1);
    spill_->Put(SpillName(key), v);
    ++stats_.spilled_versions;
  }

  // Counts the byte strings of spilled version `v` in (`delta` +1) or out (-1) of spill_pins_.
  void PinSpilled(const SpilledVersion& v, int delta) {
    // Only a live history under a memory budget forgets strings (Engine::MarkBytes).
    if (options_.memory_budget == 0) return;
    auto pin = [&](Value value) {
      if (!value.is_bytes()) return;
      SpillPin& p = spill_pins_[value.bytes_index()];
      // Without pruning nothing leaves the spill: every pin is for good.
      if (v.expires == Timestamp::Max() || options_.spill_retention == 0) {
        p.unbounded += delta;
      } else if (delta > 0) {
        p.expires = std::max(p.expires, v.expires);
      }
    };
    pin(v.value);
    for (const Value a : v.appends) pin(a);
  }

  // The spilled base of `key` is no longer the newest version at or below the final point: a
  // version committed at `next` follows it. Writes it again with that expiry (so that pruning
  // can drop it; without pruning, spill_retention 0, there is no need) and clears
  // base_in_spill. False, with base_in_spill left set, if the spill failed.
  bool ReplaceSpilledBase(KeyId key, KeyState& ks, const Timestamp& next) {
    if (options_.spill_retention > 0) {
      auto r = spill_->Find(SpillName(key), ks.spilled_base);
      if (!r.ok()) return SpillFailed(r.status());
      if (r->has_value()) {
        PinSpilled(**r, -1);
        (*r)->expires = next;
        PinSpilled(**r, +1);
        spill_->Replace(SpillName(key), **r);
        ++spill_rewrites_;
      }
    }
    ks.base_in_spill = false;
    base_values_.erase(key.value());
    return true;
  }

  // Drops what no read at or after the collection point can need: for registers every version
  // older than the newest one at or below it; for lists those versions, folded into base_list.
  void Collect() {
    // A transaction still to come commits after the final point and starts, if it is no longer
    // than the longest seen so far (or the configured retention), after g.
    const Timestamp normal = BelowFinal(std::max(options_.retention, max_duration_));
    if (spill_ != nullptr && options_.spill_retention > 0) Prune(normal);
    Timestamp g = normal;
    if (spill_ != nullptr && !spill_broken_ && options_.memory_budget > 0 &&
        MemoryBytes() > options_.memory_budget) {
      // Over budget: keep in memory only what reads above the final point can need (for a
      // register the newest version at or below it); what the normal collection point would
      // have kept goes to the spill.
      g = final_point_;
      ++stats_.budget_collections;
    }
    if (g == Timestamp::Min()) return;
    collect_keys_.clear();
    // A key in gc_ keeps its state (neither Evict nor Fresh lets it go).
    gc_.TakeUpTo(g, [this](uint64_t k) {
      const auto key = static_cast<uint32_t>(k);
      keys_.Find(key)->in_gc = false;
      collect_keys_.push_back(KeyId(key));
    });
    for (size_t i = 0; i < collect_keys_.size(); ++i) {
      if (i + 2 < collect_keys_.size()) keys_.Find(collect_keys_[i + 2].value())->PrefetchState();
      if (i + 1 < collect_keys_.size()) {
        keys_.Find(collect_keys_[i + 1].value())->versions.PrefetchEnds();
      }
      const KeyId key = collect_keys_[i];
      KeyState& ks = *keys_.Find(key.value());
      Trim(key, ks, g, normal);
      ScheduleTrim(key, ks);
      if (evicting_ && ks.versions.size() == 1 && ks.readers.empty()) QueueIdle(key, ks);
    }
  }

  // Makes what was put in the spill since `writes_before` (SpillWrites) visible to reads.
  void FlushSpill(uint64_t writes_before) {
    if (spill_ == nullptr || spill_broken_ || SpillWrites() == writes_before) return;
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = spill_->Flush(); !s.ok()) SpillFailed(s);
    if (options_.on_spill_pause) {
      options_.on_spill_pause(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  uint64_t SpillWrites() const { return stats_.spilled_versions + spill_rewrites_; }

  // The final point lowered by `keep` physical units: Max while the final point is Max (every
  // stream closed), Min where it would fall below the first timestamp.
  Timestamp BelowFinal(int64_t keep) const {
    if (final_point_ == Timestamp::Max()) return Timestamp::Max();
    if (final_point_.physical < std::numeric_limits<int64_t>::min() + keep) return Timestamp::Min();
    return Timestamp{final_point_.physical - keep, std::numeric_limits<int64_t>::min()};
  }

  // Lets the spill drop what only checks of snapshots more than spill_retention below the final
  // point could need, and never what the normal collection point `normal` keeps.
  void Prune(const Timestamp& normal) {
    const Timestamp p = std::min(normal, BelowFinal(options_.spill_retention));
    if (p == Timestamp::Max() || p <= pruned_point_) return;
    pruned_point_ = p;
    spill_->PruneUpTo(p);
  }

  // Puts `key` in the collection heap if it holds a version a future collection could drop (for
  // a register, any but the oldest; for a list, any), under the commit timestamp from which on
  // there is something to drop. One entry per key: a version inserted below that point later
  // only delays its collection to the entry's turn.
  void ScheduleTrim(KeyId key, KeyState& ks) {
    if (ks.in_gc) return;
    const bool is_list = h_.key(key).is_list;
    if (ks.versions.size() < (is_list ? 1U : 2U)) return;
    auto it = ks.versions.begin();
    if (!is_list) ++it;
    gc_.Push(it.key().ts, key.value());
    ks.in_gc = true;
  }

  // Collects the versions of `key` at or below `g` (keeping, for a register, the newest of
  // them). With a spill, the ones the normal collection point `normal` would have kept (for a
  // register also the newest at or below it) are written to it, and the others too if
  // spill_collected; the rest are dropped and recorded in dropped_upto.
  void Trim(KeyId key, KeyState& ks, const Timestamp& g, const Timestamp& normal) {
    // The first version above g: usually among the first few.
    auto last = ks.versions.begin();
    const auto end = ks.versions.end();
    for (int i = 0; i < 8 && last != end && last.key().ts <= g; ++i) ++last;
    if (last != end && last.key().ts <= g) last = ks.versions.upper_bound(OrderKey::Last(g));
    if (last == ks.versions.begin()) return;
    bool is_list = h_.key(key).is_list;
    auto keep = last;
    if (!is_list) --keep;
    if (keep == ks.versions.begin()) return;
    if (spill_ != nullptr && !spill_broken_) {
      for (auto it = ks.versions.begin(); it != keep; ++it) {
        if (!options_.spill_collected && it.key().ts <= normal) {
          auto next = it;
          ++next;
          // A register's newest version at or below `normal` is still needed above it.
          const bool needed = !is_list && (next == end || next.key().ts > normal);
          if (!needed) {
            ks.dropped_upto = std::max(ks.dropped_upto, it.key());
            continue;
          }
        }
        Timestamp expires = it.key().ts;
        if (!is_list) {
          auto next = it;
          ++next;  // exists: `keep` comes after `it`
          expires = next.key().ts;
        }
        PutInSpill(key, is_list, it.key(), it.value(), expires);
      }
    }
    if (is_list) {
      const size_t before = ks.base_list.size();
      if (!ks.trimmed) {
        auto init = h_.InitialList(key);
        ks.base_list.assign(init.begin(), init.end());
      }
      for (auto it = ks.versions.begin(); it != keep; ++it) {
        AppendsOf(TxnId(it.key().txn()), key, &ks.base_list);
      }
      base_list_values_ += ks.base_list.size() - before;
    }

    stats_.retained_versions -= ks.versions.erase_prefix(keep);
    ks.trimmed = true;
    ks.trim_point = std::max(ks.trim_point, g);
    // A version newer than the spilled base is now the newest at or below g: reads after it
    // never see the base again, and those before it are late ones, checked from the spill.
    if (ks.base_in_spill && ks.spilled_base < ks.versions.front_key() && !spill_broken_) {
      ReplaceSpilledBase(key, ks, ks.versions.front_key().ts);
    }
  }

  // The engine's own accounting of the memory it holds (docs/engine.md, "Memory"). Chain leaves
  // are counted at twice their entries (a leaf off the tree's edges is at least half full),
  // plus one small leaf per key.
  uint64_t MemoryBytes() const {
    constexpr uint64_t kVersionEntry = sizeof(OrderKey) + sizeof(VersionInfo);
    constexpr uint64_t kReadEntry = sizeof(OrderKey) + sizeof(ReadInfo);
    constexpr uint64_t kSmallLeaf = 32 + 4 * kVersionEntry;
    return keys_.MemoryBytes() + key_stamp_.capacity() * sizeof(uint32_t) +
           (keys_.resident() - leafless_keys_) * kSmallLeaf +
           stats_.retained_versions * 2 * kVersionEntry +
           stats_.provisional_reads * 2 * kReadEntry + base_list_values_ * sizeof(Value) +
           session_entries_ * sizeof(SessionState::Entry) * 2 + pending_snapshots_ * 24 +
           sessions_.capacity() * sizeof(SessionState) + delivered_.capacity() / 8 +
           pending_count_.window() * sizeof(uint32_t) +
           idle_keys_.size() * sizeof(std::pair<uint64_t, uint32_t>) +
           base_values_.capacity() * (sizeof(std::pair<uint32_t, Value>) + 1) +
           spill_pins_.capacity() * (sizeof(std::pair<uint32_t, SpillPin>) + 1);
  }

  void Emit(Violation v) {
    if (restoring_) return;  // reported before the checkpoint
    v.checker = "online";
    v.level = options_.level;
    ++stats_.final_violations;
    final_.push_back(std::move(v));
  }

  const History& h_;
  EngineOptions options_;
  SystemClock system_clock_;
  const Clock* clock_;
  VersionSpill* spill_;        // may be null
  bool spill_broken_ = false;  // a spill operation failed: the spill is no longer used
  uint64_t base_list_values_ = 0;
  axioms::WriteIndex write_index_;
  axioms::ReadWalker walker_;

  // A spill and a memory budget: cold keys may move their last version and their state to the
  // spill, so the key table is sparse.
  const bool evicting_ = spill_ != nullptr && options_.memory_budget > 0;
  KeyTable keys_{/*sparse=*/evicting_};
  // The history forgot keys (ForgetKeys): a key it interns from now on may be one of them, whose
  // state the spill holds.
  bool forgot_keys_ = false;
  // Per transaction from delivered_base_ on: delivered (duplicates). Transactions below
  // delivered_base_ were released by the history, so delivered.
  std::vector<bool> delivered_;
  uint64_t delivered_base_ = 0;
  PendingCounts pending_count_;
  // The last two transactions WillRelease was told of, the older at will_release_next_.
  std::array<TxnId, 2> will_release_ = {TxnId::Invalid(), TxnId::Invalid()};
  size_t will_release_next_ = 0;
  std::vector<uint32_t> key_stamp_;  // per key: deduplication within one pass
  uint32_t stamp_ = 0;
  std::vector<KeyId> collect_keys_;
  std::vector<SessionState> sessions_;  // by session
  uint64_t session_entries_ = 0;

  std::vector<StreamState> streams_;
  Timestamp final_point_ = Timestamp::Min();
  // The spill may have dropped versions that expire at or before it (Prune).
  Timestamp pruned_point_ = Timestamp::Min();
  int64_t max_duration_ = 0;  // longest transaction seen, in physical timestamp units
  TimeQueue finality_;        // keys with pending reads, by their earliest (KeyState::finality_at)
  std::vector<KeyId> due_keys_;  // keys taken from finality_, to finalise
  uint64_t advances_ = 0;        // times the final point moved up
  // Keys whose pending reads all became final or that were left with one version, with
  // advances_ then (ReleaseIdleKeys).
  std::deque<std::pair<uint64_t, uint32_t>> idle_keys_;
  uint64_t leafless_keys_ = 0;  // keys in memory with base_in_spill and no version there
  // The value of each key in memory with base_in_spill: its spilled base's, from its record.
  absl::flat_hash_map<uint32_t, Value> base_values_;
  // The byte strings of spilled versions (values and appends), by pool index: the live history
  // must not forget them while the spill may still be read for them (MarkBytes). `unbounded`
  // counts the versions that never expire (a key's spilled base until a newer version follows
  // it; every version when nothing is pruned); `expires` is the latest expiry of the others.
  struct SpillPin {
    int64_t unbounded = 0;
    Timestamp expires = Timestamp::Min();
  };
  absl::flat_hash_map<uint32_t, SpillPin> spill_pins_;
  // Eviction's idle time, in advances (AdaptIdleAdvances), and what it counts.
  uint64_t idle_advances_ = kIdleAdvances;
  uint64_t quick_returns_ = 0;  // evicted keys back within the wait (AdaptIdleAdvances)
  uint64_t evicted_mark_ = 0;
  uint64_t returns_mark_ = 0;
  uint64_t spill_rewrites_ = 0;  // spilled bases written again (ReplaceSpilledBase)
  bool saw_snapshot_ = false;    // a transaction checked by its snapshot was delivered
  TimeQueue gc_;                 // keys with versions to collect (ScheduleTrim), at most one each
  // Transactions with a snapshot, under their commit, until the final point passes it.
  TimeQueue snapshot_due_;
  uint64_t pending_snapshots_ = 0;
  std::vector<uint64_t> due_snapshots_;
  std::vector<TxnId> visible_scratch_;

  std::vector<Value> committed_scratch_;
  std::vector<Value> own_scratch_;
  std::vector<Violation> final_;
  EngineStats stats_;
  // RestoreCheckpoint: each key's oldest version in memory at the checkpoint, and whether the
  // held transactions are being taken again.
  absl::flat_hash_map<uint32_t, OrderKey> restore_front_;
  bool restoring_ = false;
};

Engine::Engine(const History& history, EngineOptions options)
    : impl_(std::make_unique<EngineImpl>(history, options)) {}
Engine::~Engine() = default;
StreamId Engine::AddStream(std::string name) { return impl_->AddStream(std::move(name)); }
void Engine::Deliver(StreamId stream, std::span<const TxnId> batch,
                     std::optional<Timestamp> watermark) {
  impl_->Deliver(stream, batch, watermark);
}
void Engine::CloseStream(StreamId stream) { impl_->CloseStream(stream); }
void Engine::Tick() { impl_->Tick(); }
void Engine::Finish() { impl_->Finish(); }
std::vector<Violation> Engine::TakeFinalViolations() { return impl_->TakeFinalViolations(); }
const EngineStats& Engine::stats() const { return impl_->stats(); }
Timestamp Engine::final_point() const { return impl_->final_point(); }
bool Engine::IsFinal(TxnId id) const { return impl_->IsFinal(id); }
std::string SpillKeyName(const History& h, KeyId key) {
  const history::KeyInfo& k = h.key(key);
  std::string name;
  if (k.is_int) {
    spill_format::AppendIntKeyName(name, k.payload);
  } else {
    spill_format::AppendBytesKeyName(name, h.bytes(static_cast<uint32_t>(k.payload)));
  }
  return name;
}

bool Engine::Release(TxnId id) { return impl_->Release(id); }
void Engine::WillRelease(TxnId id) { impl_->WillRelease(id); }
void Engine::MarkBytes(std::vector<uint64_t>& marks) { impl_->MarkBytes(marks); }
void Engine::MarkKeys(std::vector<uint64_t>& marks) const { impl_->MarkKeys(marks); }
void Engine::ForgetKeys(std::span<const KeyId> keys) { impl_->ForgetKeys(keys); }
absl::Status Engine::SaveCheckpoint(v1::EngineCheckpoint* out) {
  return impl_->SaveCheckpoint(out);
}
absl::Status Engine::RestoreCheckpoint(const v1::EngineCheckpoint& checkpoint,
                                       std::span<const HeldTxn> held) {
  return impl_->RestoreCheckpoint(checkpoint, held);
}

}  // namespace isowatch::engine
