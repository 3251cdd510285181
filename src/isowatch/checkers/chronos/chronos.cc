// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/chronos/chronos.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "isowatch/checkers/chronos/internal/explain.h"
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
// So a write committed at t is visible to a transaction that starts at t.
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

// The state of one key inside the transaction being checked.
struct LocalKey {
  bool observed = false;      // a read of the key has been checked (external or internal)
  bool wrote = false;         // the transaction wrote or appended to the key
  bool int_reported = false;  // INT already reported for this (transaction, key)
  Value last;                 // registers: last value read or written
  bool has_list = false;      // lists: list_slot holds what the transaction knows of the list
  uint32_t list_slot = 0;     // lists: index into list_scratch_: the last list read followed by
                              // the appends since, or (before any read) the appends so far
};

// Replays a history in timestamp order. Engine-thread only; owns only O(keys + open
// transactions) state: the newest version of each key, the transactions open per key, and the
// scratch state of the one transaction being checked.
class Replayer {
 public:
  Replayer(const History& h, IsolationLevel level)
      : h_(h),
        level_(level),
        write_index_(h),
        registers_(h.key_count()),
        lists_(h.key_count()),
        ongoing_(level == IsolationLevel::kSnapshotIsolation ? h.key_count() : 0),
        slot_stamp_(h.key_count(), 0),
        slot_index_(h.key_count(), 0) {
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
    ComputeCommittedPredecessors();
    std::vector<Event> events = BuildEvents();
    for (const Event& e : events) {
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
    return std::move(result_);
  }

 private:
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
      if (level_ == IsolationLevel::kSerializable) {
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

  // Returns the scratch state of `key` for the transaction being checked (stamp `stamp_`).
  LocalKey& Local(KeyId key) {
    uint32_t k = key.value();
    if (slot_stamp_[k] != stamp_) {
      slot_stamp_[k] = stamp_;
      slot_index_[k] = static_cast<uint32_t>(locals_.size());
      locals_.push_back(LocalKey{});
    }
    return locals_[slot_index_[k]];
  }

  std::vector<Value>& NewListSlot(LocalKey& local) {
    local.has_list = true;
    local.list_slot = static_cast<uint32_t>(lists_used_++);
    if (lists_used_ > list_scratch_.size()) list_scratch_.emplace_back();
    list_scratch_[local.list_slot].clear();
    return list_scratch_[local.list_slot];
  }

  void BeginTxnScratch() {
    ++stamp_;
    locals_.clear();
    lists_used_ = 0;
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
    BeginTxnScratch();
    for (const Op& op : h_.ops(t)) {
      if (op.unknown()) continue;
      LocalKey& local = Local(op.key());
      switch (op.kind()) {
        case OpKind::kWrite:
          local.wrote = true;
          local.observed = true;  // later reads are internal
          local.last = op.value();
          break;
        case OpKind::kAppend:
          if (!local.has_list) NewListSlot(local);
          local.wrote = true;
          list_scratch_[local.list_slot].push_back(op.value());
          break;
        case OpKind::kRead:
          if (!local.observed) {
            ++result_.stats.external_reads;
            CheckExternalRegister(id, op);
            local.observed = true;
          } else {
            ++result_.stats.internal_reads;
            if (op.value() != local.last && !local.int_reported) {
              local.int_reported = true;
              Emit(internal::ExplainInt(h_, level_, id, op.key(), h_.ValueToString(local.last),
                                        h_.ValueToString(op.value())));
            }
          }
          local.last = op.value();
          break;
        case OpKind::kListRead: {
          auto observed = h_.list_elements(op);
          if (!local.observed) {
            ++result_.stats.external_reads;
            std::span<const Value> own;
            if (local.has_list) own = list_scratch_[local.list_slot];
            CheckExternalList(id, op, own);
            local.observed = true;
          } else {
            ++result_.stats.internal_reads;
            const std::vector<Value>& expected = list_scratch_[local.list_slot];
            if (!std::equal(expected.begin(), expected.end(), observed.begin(), observed.end()) &&
                !local.int_reported) {
              local.int_reported = true;
              Emit(internal::ExplainInt(h_, level_, id, op.key(), h_.ListToString(expected),
                                        h_.ListToString(observed)));
            }
          }
          if (!local.has_list) NewListSlot(local);
          list_scratch_[local.list_slot].assign(observed.begin(), observed.end());
          break;
        }
      }
    }
  }

  void CheckExternalRegister(TxnId reader, const Op& op) {
    const RegisterVersion& current = registers_[op.key().value()];
    Value observed = op.value();
    if (observed == current.value) return;
    // An absent observation matches the initial version, whatever the initial value convention.
    if (observed.absent() && !current.writer.valid()) return;
    internal::ExtFinding f = write_index_.Classify(reader, op.key(), observed, level_);
    Emit(internal::ExplainExtRegister(h_, level_, reader, op.key(), current.value, current.writer,
                                      observed, f));
  }

  void CheckExternalList(TxnId reader, const Op& op, std::span<const Value> own) {
    const std::vector<Value>& committed = lists_[op.key().value()];
    auto observed = h_.list_elements(op);
    size_t expected_size = committed.size() + own.size();
    auto expected_at = [&](size_t i) {
      return i < committed.size() ? committed[i] : own[i - committed.size()];
    };
    size_t i = 0;
    while (i < expected_size && i < observed.size() && expected_at(i) == observed[i]) ++i;
    if (i == expected_size && i == observed.size()) return;
    std::vector<Value> expected(committed.begin(), committed.end());
    expected.insert(expected.end(), own.begin(), own.end());
    // Judge what the read says of the committed list: when it ends with the transaction's own
    // appends, as it should, only the part before them.
    std::span<const Value> judged = observed;
    if (!own.empty() && observed.size() >= own.size() &&
        std::equal(own.begin(), own.end(), observed.end() - static_cast<ptrdiff_t>(own.size()))) {
      judged = observed.first(observed.size() - own.size());
    }
    size_t j = 0;
    while (j < committed.size() && j < judged.size() && committed[j] == judged[j]) ++j;
    internal::ExtFinding f;
    if (j == judged.size()) {
      f.kind = ExtKind::kBefore;  // a proper prefix of the snapshot: a stale version
    } else {
      f = write_index_.Classify(reader, op.key(), judged[j], level_);
    }
    Emit(internal::ExplainExtList(h_, level_, reader, op.key(), expected, observed,
                                  j == judged.size() ? observed.size() : j, f));
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
  internal::WriteIndex write_index_;
  std::vector<RegisterVersion> registers_;
  std::vector<std::vector<Value>> lists_;
  std::vector<std::vector<uint32_t>> ongoing_;
  std::vector<TxnId> committed_pred_;
  size_t open_ = 0;

  // Per-transaction scratch, reused: key -> LocalKey through a stamp, so nothing is cleared.
  uint32_t stamp_ = 0;
  std::vector<uint32_t> slot_stamp_;
  std::vector<uint32_t> slot_index_;
  std::vector<LocalKey> locals_;
  std::vector<std::vector<Value>> list_scratch_;
  size_t lists_used_ = 0;

  ChronosResult result_;
};

}  // namespace

ChronosResult RunChronos(const History& h, const ChronosOptions& options) {
  return Replayer(h, options.level).Run();
}

}  // namespace isowatch::checkers
