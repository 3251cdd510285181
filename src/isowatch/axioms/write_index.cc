// SPDX-License-Identifier: Apache-2.0
#include "isowatch/axioms/write_index.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace isowatch::axioms {

using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;
using verdict::ExtKind;
using verdict::IsolationLevel;

void WriteIndex::Build() {
  last_write_stamp_.resize(h_.key_count(), 0);
  // Transactions a live history released before the index was built are not indexed.
  for (uint64_t i = std::max(indexed_, h_.first_txn()); i < h_.size(); ++i) {
    const Transaction& t = h_.txn(TxnId(i));
    auto ops = h_.ops(t);
    const uint32_t stamp = ++stamp_;
    // Walk backwards: the first write of a key met is the transaction's final write to it.
    for (size_t j = ops.size(); j-- > 0;) {
      const auto& op = ops[j];
      if (!op.is_write()) continue;
      bool final = true;
      if (op.kind() == OpKind::kWrite) {
        uint32_t k = op.key().value();
        final = last_write_stamp_[k] != stamp;
        last_write_stamp_[k] = stamp;
      }
      uint8_t rank = (t.status == TxnStatus::kCommitted ? 4
                      : t.status == TxnStatus::kUnknown ? 2
                                                        : 0) +
                     (final ? 1 : 0);
      auto [it, inserted] = index_.try_emplace({op.key(), op.value()}, Entry{i, rank, final});
      if (!inserted && it->second.rank < rank) it->second = Entry{i, rank, final};
    }
  }
  indexed_ = h_.size();
}

void WriteIndex::Forget(TxnId txn) {
  if (txn.value() >= indexed_) return;
  for (const auto& op : h_.ops(txn)) {
    if (!op.is_write()) continue;
    auto it = index_.find({op.key(), op.value()});
    if (it != index_.end() && it->second.txn == txn.value()) index_.erase(it);
  }
}

bool WriteIndex::Precedes(TxnId w, TxnId reader, IsolationLevel level) const {
  const Transaction& wt = h_.txn(w);
  const Transaction& rt = h_.txn(reader);
  if (level == IsolationLevel::kSerializable) {
    // Replay order: commit timestamp, then transactions that start at their commit, then id.
    auto at_one_point = [](const Transaction& t) { return t.has_start && t.start == t.commit; };
    return std::tuple(wt.commit, at_one_point(wt), w) <
           std::tuple(rt.commit, at_one_point(rt), reader);
  }
  if (h_.has_snapshot(rt)) return h_.Visible(w, reader) == history::Visibility::kVisible;
  return w != reader && wt.commit <= rt.start;
}

ExtFinding WriteIndex::Classify(TxnId reader, KeyId key, Value value, IsolationLevel level) {
  if (indexed_ != h_.size()) Build();
  auto it = index_.find({key, value});
  if (it == index_.end()) {
    bool initial = false;
    if (h_.key(key).is_list) {
      auto init = h_.InitialList(key);
      initial = std::find(init.begin(), init.end(), value) != init.end();
    } else {
      initial = value.absent() || value == h_.InitialValue(key);
    }
    // A history that has forgotten transactions cannot tell a value never written from one
    // written by a forgotten transaction.
    const ExtKind unknown = h_.first_txn() > 0 ? ExtKind::kUnknown : ExtKind::kNever;
    return ExtFinding{initial ? ExtKind::kBefore : unknown, TxnId::Invalid()};
  }
  TxnId w(it->second.txn);
  const Transaction& wt = h_.txn(w);
  if (wt.status == TxnStatus::kAborted) return {ExtKind::kAborted, w};
  if (!it->second.final) return {ExtKind::kIntermediate, w};
  if (wt.has_commit && wt.status == TxnStatus::kCommitted && Precedes(w, reader, level)) {
    return {ExtKind::kBefore, w};
  }
  const Transaction& rt = h_.txn(reader);
  if (level != IsolationLevel::kSerializable && h_.has_snapshot(rt)) {
    // Not in the snapshot: committed before the reader (so in progress when its snapshot was
    // taken, as far as the snapshot says), or after it.
    return {wt.commit < rt.commit ? ExtKind::kUncommitted : ExtKind::kAfter, w};
  }
  const auto& point = level == IsolationLevel::kSerializable ? rt.commit : rt.start;
  // Not visible at the snapshot point: started by then (uncommitted) or later (after).
  if (wt.has_start && wt.start <= point) return {ExtKind::kUncommitted, w};
  return {ExtKind::kAfter, w};
}

}  // namespace isowatch::axioms
