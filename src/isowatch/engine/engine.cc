// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/engine.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"

#include "isowatch/checkers/chronos/internal/explain.h"
#include "isowatch/checkers/chronos/internal/ext_rules.h"
#include "isowatch/checkers/chronos/internal/read_walker.h"
#include "isowatch/checkers/chronos/internal/write_index.h"
#include "isowatch/engine/internal/key_state.h"

namespace isowatch::engine {

using history::History;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::Transaction;
using history::Value;
using internal::KeyState;
using internal::OrderKey;
using internal::PendingRead;
using internal::Version;
using report::IsolationLevel;
using report::Violation;

namespace {

constexpr uint32_t kCommitPhase = 0;
constexpr uint32_t kPointPhase = 1;
constexpr uint32_t kStartPhase = 2;

// A read waiting for the final point to pass it.
struct FinalityEntry {
  Timestamp ts;
  KeyId key;
  OrderKey point;

  bool operator>(const FinalityEntry& o) const { return ts > o.ts; }
};

// A version waiting for the collection point to pass it.
struct GcEntry {
  Timestamp ts;
  KeyId key;

  bool operator>(const GcEntry& o) const { return ts > o.ts; }
};

template <typename T>
using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<T>>;

struct StreamState {
  std::string name;
  bool closed = false;
  bool has_watermark = false;  // sent an explicit watermark
  Timestamp watermark = Timestamp::Min();
  // Streams without explicit watermarks: commit timestamps by arrival time; a transaction that
  // arrived finality_timeout_ms ago lifts the implicit watermark to its commit timestamp.
  std::deque<std::pair<int64_t, Timestamp>> arrivals;
};

// Per session: the transactions delivered, by position, until they are no longer needed.
struct SessionState {
  std::map<uint32_t, TxnId> entries;
  uint32_t settled = 0;  // every position below has been delivered
};

}  // namespace

// Engine-thread only. See engine.h and docs/engine.md.
class EngineImpl {
 public:
  EngineImpl(const History& h, EngineOptions options)
      : h_(h),
        options_(options),
        clock_(options.clock != nullptr ? options.clock : &system_clock_),
        write_index_(h),
        walker_(h),
        keys_(h.key_count()),
        delivered_(h.size(), false),
        write_stamp_(h.key_count(), 0) {}

  StreamId AddStream(std::string name) {
    streams_.push_back(StreamState{.name = std::move(name)});
    AdvanceFinality();
    return static_cast<StreamId>(streams_.size() - 1);
  }

  void Deliver(StreamId stream, std::span<const TxnId> batch, std::optional<Timestamp> watermark) {
    StreamState& s = streams_[stream];
    for (TxnId id : batch) DeliverOne(s, id);
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

  const EngineStats& stats() {
    stats_.retained_txns = session_entries_ + pending_by_txn_.size();
    return stats_;
  }

 private:
  bool Participates(const Transaction& t) const {
    if (!t.committed() || !t.has_commit) return false;
    return options_.level == IsolationLevel::kSerializable || t.has_start;
  }

  // The point at which `t` reads: its start (SI) or its commit (SER).
  OrderKey ReadPoint(TxnId id, const Transaction& t) const {
    if (options_.level == IsolationLevel::kSerializable)
      return {t.commit, kCommitPhase, id.value()};
    return {t.start, t.start == t.commit ? kPointPhase : kStartPhase, id.value()};
  }

  OrderKey VersionKey(TxnId id, const Transaction& t) const {
    if (options_.level == IsolationLevel::kSerializable)
      return {t.commit, kCommitPhase, id.value()};
    return {t.commit, t.start == t.commit ? kPointPhase : kCommitPhase, id.value()};
  }

  void DeliverOne(StreamState& s, TxnId id) {
    if (delivered_[id.value()]) {
      ++stats_.duplicates;
      return;
    }
    delivered_[id.value()] = true;
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
    const OrderKey point = ReadPoint(id, t);
    walker_.Walk(
        id, options_.level,
        [&](uint32_t op_index, const Op& op, std::span<const Value>) {
          AddRead(op.key(), PendingRead{point, op_index, false});
        },
        [&](Violation v) { Emit(std::move(v)); });
    ++write_stamp_epoch_;
    auto ops = h_.ops(id);
    // Each key once, with the transaction's final value for registers.
    for (size_t i = ops.size(); i-- > 0;) {
      const Op& op = ops[i];
      if (!op.is_write()) continue;
      uint32_t k = op.key().value();
      if (write_stamp_[k] == write_stamp_epoch_) continue;
      write_stamp_[k] = write_stamp_epoch_;
      InsertVersion(id, t, op.key(), op.value());
    }
  }

  // --- Session -------------------------------------------------------------------------------

  void OnSessionArrival(TxnId id, const Transaction& t) {
    SessionState& ss = sessions_[t.session.value()];
    ss.entries.emplace(t.seq, id);
    ++session_entries_;
    if (Participates(t)) CheckSessionBack(ss, t.seq, id);
    // The first participant after this one may now see its predecessor.
    for (uint32_t seq = t.seq + 1;; ++seq) {
      auto it = ss.entries.find(seq);
      if (it == ss.entries.end()) break;
      if (Participates(h_.txn(it->second))) {
        CheckSessionBack(ss, seq, it->second);
        break;
      }
    }
    // Keep only what a future arrival can still need: from the newest participant of the
    // delivered prefix on.
    while (ss.entries.count(ss.settled) != 0) ++ss.settled;
    auto anchor = ss.entries.end();
    for (auto it = ss.entries.lower_bound(ss.settled); it != ss.entries.begin();) {
      --it;
      if (Participates(h_.txn(it->second))) {
        anchor = it;
        break;
      }
    }
    if (anchor != ss.entries.end()) {
      session_entries_ -= static_cast<uint64_t>(std::distance(ss.entries.begin(), anchor));
      ss.entries.erase(ss.entries.begin(), anchor);
    }
  }

  // Checks transaction `id` at position `seq` against its nearest committed predecessor, if
  // every transaction between them has arrived.
  void CheckSessionBack(const SessionState& ss, uint32_t seq, TxnId id) {
    for (uint32_t s = seq; s-- > 0;) {
      auto it = ss.entries.find(s);
      if (it == ss.entries.end()) return;  // not delivered yet: checked when it arrives
      const Transaction& p = h_.txn(it->second);
      if (!Participates(p)) continue;
      const Transaction& t = h_.txn(id);
      if (p.commit > ReadPoint(id, t).ts) {
        Emit(checkers::internal::ExplainSession(h_, options_.level, id, it->second));
      }
      return;
    }
  }

  // --- Ext -----------------------------------------------------------------------------------

  void AddRead(KeyId key, PendingRead read) {
    KeyState& ks = keys_[key.value()];
    if (ks.trimmed && read.point.ts <= ks.trim_point) ++stats_.horizon_misses;
    read.wrong = Wrong(key, ks, read);
    if (read.point.ts <= final_point_) {
      if (read.wrong) Emit(Explain(key, ks, read));
      return;
    }
    auto pos =
        std::lower_bound(ks.readers.begin(), ks.readers.end(), read.point,
                         [](const PendingRead& r, const OrderKey& p) { return r.point < p; });
    ks.readers.insert(pos, read);
    finality_.push(FinalityEntry{read.point.ts, key, read.point});
    ++stats_.provisional_reads;
    if (read.wrong) ++stats_.provisional_violations;
    ++pending_by_txn_[read.point.txn];
  }

  // The reader's operation.
  const Op& ReadOp(const PendingRead& r) const { return h_.ops(TxnId(r.point.txn))[r.op_index]; }

  // The newest version of a register visible at `point`, or nullptr for the initial value.
  const Version* VisibleVersion(const KeyState& ks, const OrderKey& point) const {
    auto it = std::lower_bound(ks.versions.begin(), ks.versions.end(), point,
                               [](const Version& v, const OrderKey& p) { return v.key < p; });
    if (it == ks.versions.begin()) return nullptr;
    return &*(it - 1);
  }

  // The committed list visible at `point`, into `out`.
  void VisibleList(KeyId key, const KeyState& ks, const OrderKey& point,
                   std::vector<Value>* out) const {
    out->clear();
    if (ks.trimmed) {
      out->assign(ks.base_list.begin(), ks.base_list.end());
    } else {
      auto init = h_.InitialList(key);
      out->assign(init.begin(), init.end());
    }
    for (const Version& v : ks.versions) {
      if (!(v.key < point)) break;
      AppendsOf(TxnId(v.key.txn), key, out);
    }
  }

  // Appends `writer`'s appends to `key`, in program order, to `out`; up to op `limit` if given.
  void AppendsOf(TxnId writer, KeyId key, std::vector<Value>* out,
                 size_t limit = static_cast<size_t>(-1)) const {
    auto ops = h_.ops(writer);
    for (size_t i = 0; i < ops.size() && i < limit; ++i) {
      if (ops[i].kind() == OpKind::kAppend && ops[i].key() == key) out->push_back(ops[i].value());
    }
  }

  bool Wrong(KeyId key, const KeyState& ks, const PendingRead& r) {
    const Op& op = ReadOp(r);
    if (op.kind() == OpKind::kListRead) {
      VisibleList(key, ks, r.point, &committed_scratch_);
      own_scratch_.clear();
      AppendsOf(TxnId(r.point.txn), key, &own_scratch_, r.op_index);
      return !checkers::internal::ListReadMatches(committed_scratch_, own_scratch_,
                                                  h_.list_elements(op));
    }
    const Version* v = VisibleVersion(ks, r.point);
    if (v == nullptr) {
      return !checkers::internal::RegisterReadMatches(op.value(), h_.InitialValue(key), true);
    }
    return !checkers::internal::RegisterReadMatches(op.value(), v->value, false);
  }

  Violation Explain(KeyId key, const KeyState& ks, const PendingRead& r) {
    const Op& op = ReadOp(r);
    TxnId reader(r.point.txn);
    if (op.kind() == OpKind::kListRead) {
      VisibleList(key, ks, r.point, &committed_scratch_);
      own_scratch_.clear();
      AppendsOf(reader, key, &own_scratch_, r.op_index);
      return checkers::internal::ListViolation(h_, write_index_, options_.level, reader, key,
                                               committed_scratch_, own_scratch_,
                                               h_.list_elements(op));
    }
    const Version* v = VisibleVersion(ks, r.point);
    Value expected = v == nullptr ? h_.InitialValue(key) : v->value;
    TxnId writer = v == nullptr ? TxnId::Invalid() : TxnId(v->key.txn);
    return checkers::internal::RegisterViolation(h_, write_index_, options_.level, reader, key,
                                                 expected, writer, op.value());
  }

  // Re-evaluates the pending reads in [first, last) of `ks`.
  void Recheck(KeyId key, KeyState& ks, std::vector<PendingRead>::iterator first,
               std::vector<PendingRead>::iterator last) {
    for (auto it = first; it != last; ++it) {
      bool wrong = Wrong(key, ks, *it);
      if (wrong == it->wrong) continue;
      ++stats_.flip_flops;
      if (wrong) {
        ++stats_.provisional_violations;
      } else {
        --stats_.provisional_violations;
      }
      it->wrong = wrong;
    }
  }

  // --- Versions and NoConflict ---------------------------------------------------------------

  void InsertVersion(TxnId id, const Transaction& t, KeyId key, Value value) {
    KeyState& ks = keys_[key.value()];
    Version v{VersionKey(id, t), t.start, value};
    if (options_.level == IsolationLevel::kSnapshotIsolation) {
      if (ks.trimmed && t.start < ks.trim_point) ++stats_.horizon_misses;
      // Overlapping writers U: U.commit > t.start and U.start < t.commit. A writer that started
      // before t.commit commits before t.commit + max_duration, which bounds the scan.
      auto it =
          std::upper_bound(ks.versions.begin(), ks.versions.end(), t.start,
                           [](const Timestamp& ts, const Version& u) { return ts < u.key.ts; });
      int64_t horizon =
          t.commit.physical + std::max(ks.max_duration, t.commit.physical - t.start.physical);
      for (; it != ks.versions.end() && it->key.ts.physical <= horizon; ++it) {
        if (it->start < t.commit && it->key.ts > t.start && it->key.txn != id.value()) {
          bool u_first = it->key < v.key;
          TxnId u(it->key.txn);
          Emit(checkers::internal::ExplainNoConflict(h_, u_first ? u : id, u_first ? id : u, key));
        }
      }
      ks.max_duration = std::max(ks.max_duration, t.commit.physical - t.start.physical);
    }
    auto pos = std::lower_bound(ks.versions.begin(), ks.versions.end(), v.key,
                                [](const Version& u, const OrderKey& k) { return u.key < k; });
    pos = ks.versions.insert(pos, v);
    ++stats_.retained_versions;
    gc_.push(GcEntry{t.commit, key});
    // The reads whose snapshot now ends at (registers) or includes (lists) the new version.
    auto from =
        std::upper_bound(ks.readers.begin(), ks.readers.end(), v.key,
                         [](const OrderKey& k, const PendingRead& r) { return k < r.point; });
    auto to = ks.readers.end();
    if (!h_.key(key).is_list && pos + 1 != ks.versions.end()) {
      const OrderKey next = (pos + 1)->key;
      to = std::upper_bound(from, ks.readers.end(), next,
                            [](const OrderKey& k, const PendingRead& r) { return k < r.point; });
    }
    Recheck(key, ks, from, to);
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
    while (!finality_.empty() && finality_.top().ts <= final_point_) {
      FinalityEntry e = finality_.top();
      finality_.pop();
      Finalize(e);
    }
    Collect();
  }

  void Finalize(const FinalityEntry& e) {
    KeyState& ks = keys_[e.key.value()];
    auto it = std::lower_bound(ks.readers.begin(), ks.readers.end(), e.point,
                               [](const PendingRead& r, const OrderKey& p) { return r.point < p; });
    if (it == ks.readers.end() || it->point != e.point) return;
    if (it->wrong) {
      Emit(Explain(e.key, ks, *it));
      --stats_.provisional_violations;
    }
    --stats_.provisional_reads;
    auto p = pending_by_txn_.find(it->point.txn);
    if (--p->second == 0) pending_by_txn_.erase(p);
    ks.readers.erase(it);
  }

  // Drops what no read at or after the collection point can need: for registers every version
  // older than the newest one at or below it; for lists those versions, folded into base_list.
  void Collect() {
    // A transaction still to come commits after the final point and starts, if it is no longer
    // than the longest seen so far (or the configured retention), after g.
    Timestamp g = final_point_;
    if (g != Timestamp::Max()) {
      int64_t keep = std::max(options_.retention, max_duration_);
      if (g.physical < std::numeric_limits<int64_t>::min() + keep) return;
      g = Timestamp{g.physical - keep, std::numeric_limits<int64_t>::min()};
    }
    while (!gc_.empty() && gc_.top().ts <= g) {
      KeyId key = gc_.top().key;
      gc_.pop();
      KeyState& ks = keys_[key.value()];
      auto last =
          std::upper_bound(ks.versions.begin(), ks.versions.end(), g,
                           [](const Timestamp& ts, const Version& v) { return ts < v.key.ts; });
      if (last == ks.versions.begin()) continue;
      bool is_list = h_.key(key).is_list;
      auto keep = is_list ? last : last - 1;
      if (keep == ks.versions.begin()) continue;
      if (is_list) {
        if (!ks.trimmed) {
          auto init = h_.InitialList(key);
          ks.base_list.assign(init.begin(), init.end());
        }
        for (auto it = ks.versions.begin(); it != keep; ++it) {
          AppendsOf(TxnId(it->key.txn), key, &ks.base_list);
        }
      }
      stats_.retained_versions -= static_cast<uint64_t>(keep - ks.versions.begin());
      ks.versions.erase(ks.versions.begin(), keep);
      ks.trimmed = true;
      ks.trim_point = std::max(ks.trim_point, g);
    }
  }

  void Emit(Violation v) {
    v.checker = "online";
    v.level = options_.level;
    ++stats_.final_violations;
    final_.push_back(std::move(v));
  }

  const History& h_;
  EngineOptions options_;
  SystemClock system_clock_;
  const Clock* clock_;
  checkers::internal::WriteIndex write_index_;
  checkers::internal::ReadWalker walker_;

  std::vector<KeyState> keys_;
  std::vector<bool> delivered_;  // per transaction of the history: duplicate detection
  std::vector<uint32_t> write_stamp_;
  uint32_t write_stamp_epoch_ = 0;
  absl::flat_hash_map<uint32_t, SessionState> sessions_;
  uint64_t session_entries_ = 0;
  absl::flat_hash_map<uint32_t, uint32_t> pending_by_txn_;  // reader -> pending reads

  std::vector<StreamState> streams_;
  Timestamp final_point_ = Timestamp::Min();
  int64_t max_duration_ = 0;  // longest transaction seen, in physical timestamp units
  MinHeap<FinalityEntry> finality_;
  MinHeap<GcEntry> gc_;

  std::vector<Value> committed_scratch_;
  std::vector<Value> own_scratch_;
  std::vector<Violation> final_;
  EngineStats stats_;
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

}  // namespace isowatch::engine
