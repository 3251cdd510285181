// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/snapshot_judge.h"

#include <algorithm>

#include "isowatch/axioms/explain.h"
#include "isowatch/axioms/ext_rules.h"
#include "isowatch/axioms/snapshot_rules.h"
#include "isowatch/common/check.h"
#include "isowatch/engine/internal/chain_map.h"

namespace isowatch::engine::internal {
namespace {

using axioms::SnapshotStop;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::Value;

// Walks a key's versions from `it` towards older ones (axioms/snapshot_rules.h); it() is the
// version a walk stopped at.
class ChainCursor {
 public:
  using Iterator = ChainMap<VersionInfo>::iterator;
  ChainCursor(const ChainMap<VersionInfo>& chain, const OrderKey& below)
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

}  // namespace

void SnapshotJudge::OnArrival(TxnId id, const Transaction& t) {
  if (t.commit <= finality_.final_point()) {
    Judge(id);  // a late arrival
  } else {
    due_queue_.Push(t.commit, id.value());
    ++pending_;
  }
}

void SnapshotJudge::JudgeDueNow() {
  const history::History& h = ctx_.h();
  due_.clear();
  due_queue_.TakeUpTo(finality_.final_point(), [this](uint64_t t) { due_.push_back(t); });
  // In commit order, so that what they report comes in a stable order.
  std::sort(due_.begin(), due_.end(), [&h](uint64_t a, uint64_t b) {
    return h.txn(TxnId(a)).commit < h.txn(TxnId(b)).commit;
  });
  for (uint64_t t : due_) Judge(TxnId(t));
  pending_ -= due_.size();
}

void SnapshotJudge::WriterOverlaps(TxnId id, const Transaction& t, KeyId key, const KeyState& ks,
                                   const OrderKey& vkey) {
  if (ks.max_duration == 0 || ks.versions.empty() || !(vkey < ks.versions.back_key())) return;
  const int64_t horizon = t.commit.physical + ks.max_duration;
  for (auto it = ks.versions.upper_bound(vkey);
       it != ks.versions.end() && it.key().ts.physical <= horizon; ++it) {
    const Transaction& u = ctx_.h().txn(TxnId(it.key().txn()));
    if (u.has_start && u.start < t.commit) {
      ctx_.Emit(axioms::ExplainNoConflict(ctx_.h(), id, TxnId(it.key().txn()), key));
    }
  }
}

void SnapshotJudge::Judge(TxnId id) {
  const history::History& h = ctx_.h();
  const Transaction& t = h.txn(id);
  const OrderKey vkey = EngineContext::VersionKey(id, t);
  ctx_.walker().Walk(
      id, ctx_.level(),
      [&](uint32_t, const Op& op, std::span<const Value> own) { JudgeRead(id, t, vkey, op, own); },
      [](const verdict::Violation&) {});  // INT was reported at arrival
  keys_.ForEachWrittenKey(t, [&](const Op& op) {
    const KeyState& ks = keys_.State(op.key());
    ChainCursor c(ks.versions, vkey);
    const auto stop = axioms::ConcurrentWriters(
        h, t, c, [&](TxnId u) { ctx_.Emit(axioms::ExplainNoConflict(h, u, id, op.key())); },
        &ctx_.stats().snapshot_unjudged);
    if (stop == SnapshotStop::kEnd && ks.trimmed) ++ctx_.stats().horizon_misses;
  });
}

void SnapshotJudge::JudgeRead(TxnId reader, const Transaction& t, const OrderKey& vkey,
                              const Op& op, std::span<const Value> own) {
  const history::History& h = ctx_.h();
  EngineStats& stats = ctx_.stats();
  const KeyId key = op.key();
  const KeyState& ks = keys_.State(key);
  ChainCursor c(ks.versions, vkey);
  TxnId w;
  if (op.kind() != OpKind::kListRead) {
    const SnapshotStop stop = axioms::NewestVisible(h, t, c, &w);
    if (stop == SnapshotStop::kUnknown) {
      ++stats.snapshot_unjudged;
      return;
    }
    if (stop == SnapshotStop::kEnd && ks.trimmed) {
      ++stats.horizon_misses;
      return;
    }
    const bool initial = stop == SnapshotStop::kEnd;
    const Value expected = initial ? h.InitialValue(key) : c.it().value().value;
    if (!axioms::RegisterReadMatches(op.value(), expected, initial && h.AbsentReadsInitial(key))) {
      ctx_.Emit(axioms::RegisterViolation(h, ctx_.write_index(), ctx_.level(), reader, key,
                                          expected, initial ? TxnId::Invalid() : w, op.value()));
    }
    return;
  }
  const SnapshotStop stop = axioms::VisibleWriters(h, t, c, &visible_scratch_, &w);
  if (stop == SnapshotStop::kUnknown) {
    ++stats.snapshot_unjudged;
    return;
  }
  if (stop == SnapshotStop::kBoundary) {
    // The list up to and including the boundary's version, as any read just after it sees it.
    if (!reads_.VisibleList(key, ks, After(c.it().key()), &committed_scratch_)) {
      ++stats.horizon_misses;
      return;
    }
  } else if (ks.trimmed) {
    ++stats.horizon_misses;
    return;
  } else {
    auto init = h.InitialList(key);
    committed_scratch_.assign(init.begin(), init.end());
  }
  for (size_t i = visible_scratch_.size(); i-- > 0;) {
    ctx_.AppendsOf(visible_scratch_[i], key, &committed_scratch_);
  }
  const auto observed = h.list_elements(op);
  if (axioms::ListReadMatches(committed_scratch_, own, observed)) return;
  ctx_.Emit(axioms::ListViolation(h, ctx_.write_index(), ctx_.level(), reader, key,
                                  committed_scratch_, own, observed));
}

void SnapshotJudge::CheckInvariants() const {
  ISOWATCH_CHECK(pending_ == due_queue_.size(), "pending snapshots and their queue disagree");
  ISOWATCH_CHECK(pending_ == 0 || seen_, "a snapshot pending, none seen");
}

}  // namespace isowatch::engine::internal
