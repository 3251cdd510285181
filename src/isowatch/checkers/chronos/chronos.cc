// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/chronos/chronos.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "isowatch/checkers/chronos/internal/explain.h"
#include "isowatch/checkers/chronos/internal/ext_rules.h"
#include "isowatch/checkers/chronos/internal/read_walker.h"
#include "isowatch/checkers/chronos/internal/write_index.h"

namespace isowatch::checkers {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::Transaction;
using history::Value;
using report::Anomaly;
using report::ExtKind;
using report::IsolationLevel;
using report::Violation;

// A point of the replay. Phases order the events that share a timestamp: commits first, then
// transactions whose start equals their commit (start and commit handled together), then starts.
// So a write committed at t is visible to a transaction that starts at t, under SER too (where
// every other transaction is one commit event).
enum Phase : uint32_t { kCommit = 0, kPoint = 1, kStart = 2 };

struct Event {
  Timestamp ts;
  uint32_t phase;
  uint32_t txn;

  bool operator<(const Event& o) const {
    if (ts != o.ts) return ts < o.ts;
    if (phase != o.phase) return phase < o.phase;
    return txn < o.txn;
  }
};

// The newest committed version of a register.
struct RegisterVersion {
  Value value;
  TxnId writer;  // invalid: the initial value
};

// Replays a history in timestamp order. Engine-thread only; owns only O(keys + open
// transactions) state: the newest version of each key, the transactions open per key, and the
// scratch state of the one transaction being checked.
class Replayer {
 public:
  Replayer(const History& h, IsolationLevel level, const CheckLimits* limits)
      : h_(h),
        level_(level),
        poller_(limits),
        write_index_(h),
        walker_(h),
        registers_(h.key_count()),
        lists_(h.key_count()),
        ongoing_(level == IsolationLevel::kSnapshotIsolation ? h.key_count() : 0),
        slot_stamp_(h.key_count(), 0) {
    for (uint32_t k = 0; k < h.key_count(); ++k) {
      KeyId key(k);
      if (h.key(key).is_list) {
        auto init = h.InitialList(key);
        lists_[k].assign(init.begin(), init.end());
      } else {
        registers_[k] = RegisterVersion{h.InitialValue(key), TxnId::Invalid()};
      }
    }
  }

  ChronosResult Run() {
    if (poller_.ExpiredNow()) return Incomplete();
    ComputeCommittedPredecessors();
    std::vector<Event> events = BuildEvents();
    if (poller_.ExpiredNow()) return Incomplete();
    for (const Event& e : events) {
      if (poller_.Expired()) return Incomplete();
      TxnId t(e.txn);
      switch (e.phase) {
        case kStart:
          CheckReads(t);
          if (level_ == IsolationLevel::kSnapshotIsolation) OpenWrites(t);
          ++open_;
          result_.stats.peak_ongoing = std::max(result_.stats.peak_ongoing, open_);
          break;
        case kPoint:
          CheckReads(t);
          if (level_ == IsolationLevel::kSnapshotIsolation) OpenWrites(t);
          Commit(t);
          break;
        case kCommit:
          if (level_ == IsolationLevel::kSerializable) {
            CheckReads(t);
          } else {
            --open_;
          }
          Commit(t);
          break;
      }
    }
    result_.stats.external_reads = walker_.external_reads();
    result_.stats.internal_reads = walker_.internal_reads();
    return std::move(result_);
  }

 private:
  // What a run the limits stopped returns: no verdict, only the counts so far.
  ChronosResult Incomplete() {
    result_.complete = false;
    result_.violations.clear();
    result_.stats.external_reads = walker_.external_reads();
    result_.stats.internal_reads = walker_.internal_reads();
    return std::move(result_);
  }

  bool Participates(const Transaction& t) const {
    if (!t.committed() || !t.has_commit) return false;
    return level_ == IsolationLevel::kSerializable || t.has_start;
  }

  // The point in the replay at which `t` reads: its start (SI) or its commit (SER).
  const Timestamp& ReadPoint(const Transaction& t) const {
    return level_ == IsolationLevel::kSerializable ? t.commit : t.start;
  }

  void ComputeCommittedPredecessors() {
    committed_pred_.assign(h_.size(), TxnId::Invalid());
    // Session order is seq order; walking each transaction's predecessor chain with memoisation
    // of the answer keeps this linear.
    std::vector<uint8_t> done(h_.size(), 0);
    std::vector<uint32_t> stack;
    for (uint32_t i = 0; i < h_.size(); ++i) {
      uint32_t cur = i;
      while (!done[cur]) {
        stack.push_back(cur);
        TxnId prev = h_.txn(TxnId(cur)).session_prev;
        if (!prev.valid()) break;
        cur = prev.value();
      }
      while (!stack.empty()) {
        uint32_t x = stack.back();
        stack.pop_back();
        TxnId prev = h_.txn(TxnId(x)).session_prev;
        if (prev.valid()) {
          committed_pred_[x] = Participates(h_.txn(prev)) ? prev : committed_pred_[prev.value()];
        }
        done[x] = 1;
      }
    }
  }

  std::vector<Event> BuildEvents() {
    std::vector<Event> events;
    events.reserve(level_ == IsolationLevel::kSerializable ? h_.size() : 2 * h_.size());
    for (uint32_t i = 0; i < h_.size(); ++i) {
      const Transaction& t = h_.txn(TxnId(i));
      if (!Participates(t)) {
        ++result_.stats.transactions_skipped;
        continue;
      }
      ++result_.stats.transactions_checked;
      if (level_ == IsolationLevel::kSerializable && !(t.has_start && t.start == t.commit)) {
        events.push_back({t.commit, kCommit, i});
      } else if (t.start == t.commit) {
        events.push_back({t.commit, kPoint, i});
      } else {
        events.push_back({t.start, kStart, i});
        events.push_back({t.commit, kCommit, i});
      }
    }
    std::sort(events.begin(), events.end());
    return events;
  }

  // Session, Int and Ext for transaction `t` against the current state.
  void CheckReads(TxnId id) {
    const Transaction& t = h_.txn(id);
    TxnId pred = committed_pred_[id.value()];
    if (pred.valid()) {
      const Transaction& p = h_.txn(pred);
      if (p.commit > ReadPoint(t)) {
        Emit(internal::ExplainSession(h_, level_, id, pred));
      }
    }
    walker_.Walk(
        id, level_,
        [&](uint32_t, const Op& op, std::span<const Value> own) {
          if (op.kind() == OpKind::kListRead) {
            CheckExternalList(id, op, own);
          } else {
            CheckExternalRegister(id, op);
          }
        },
        [&](Violation v) { Emit(std::move(v)); });
  }

  void CheckExternalRegister(TxnId reader, const Op& op) {
    const RegisterVersion& current = registers_[op.key().value()];
    if (internal::RegisterReadMatches(op.value(), current.value,
                                      !current.writer.valid() && h_.AbsentReadsInitial(op.key()))) {
      return;
    }
    Emit(internal::RegisterViolation(h_, write_index_, level_, reader, op.key(), current.value,
                                     current.writer, op.value()));
  }

  void CheckExternalList(TxnId reader, const Op& op, std::span<const Value> own) {
    const std::vector<Value>& committed = lists_[op.key().value()];
    auto observed = h_.list_elements(op);
    if (internal::ListReadMatches(committed, own, observed)) return;
    Emit(internal::ListViolation(h_, write_index_, level_, reader, op.key(), committed, own,
                                 observed));
  }

  // Registers `t` as open on each key it writes (SI).
  void OpenWrites(TxnId id) {
    ++stamp_;
    for (const Op& op : h_.ops(id)) {
      if (!op.is_write()) continue;
      uint32_t k = op.key().value();
      if (slot_stamp_[k] == stamp_) continue;
      slot_stamp_[k] = stamp_;
      ongoing_[k].push_back(id.value());
    }
  }

  // Installs `t`'s writes; under SI, reports NOCONFLICT with every other transaction still open
  // on a key it writes, and closes it on those keys.
  void Commit(TxnId id) {
    ++stamp_;
    auto ops = h_.ops(id);
    for (const Op& op : ops) {
      if (!op.is_write()) continue;
      uint32_t k = op.key().value();
      if (op.kind() == OpKind::kAppend) {
        lists_[k].push_back(op.value());
      } else {
        registers_[k] = RegisterVersion{op.value(), id};
      }
      if (level_ != IsolationLevel::kSnapshotIsolation || slot_stamp_[k] == stamp_) continue;
      slot_stamp_[k] = stamp_;
      auto& open = ongoing_[k];
      for (uint32_t other : open) {
        if (other == id.value()) continue;
        Emit(internal::ExplainNoConflict(h_, id, TxnId(other), op.key()));
      }
      open.erase(std::find(open.begin(), open.end(), id.value()));
    }
  }

  void Emit(Violation v) {
    v.level = level_;
    result_.violations.push_back(std::move(v));
  }

  const History& h_;
  IsolationLevel level_;
  LimitPoller poller_;
  internal::WriteIndex write_index_;
  internal::ReadWalker walker_;
  std::vector<RegisterVersion> registers_;
  std::vector<std::vector<Value>> lists_;
  std::vector<std::vector<uint32_t>> ongoing_;
  std::vector<TxnId> committed_pred_;
  size_t open_ = 0;

  // Deduplicates keys within one transaction's writes: key -> stamp of the last visit.
  uint32_t stamp_ = 0;
  std::vector<uint32_t> slot_stamp_;

  ChronosResult result_;
};

}  // namespace

ChronosResult RunChronos(const History& h, const ChronosOptions& options) {
  return Replayer(h, options.level, options.limits).Run();
}

}  // namespace isowatch::checkers
