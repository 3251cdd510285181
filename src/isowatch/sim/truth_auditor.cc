// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/truth_auditor.h"

#include <algorithm>

namespace isowatch::sim {

using history::OpKind;
using history::TxnStatus;
using history::Value;
using verdict::Anomaly;
using verdict::ExtKind;
using verdict::IsolationLevel;

TruthAuditor::KeyView& TruthAuditor::View(uint64_t key) {
  for (size_t i = 0; i < views_used_; ++i) {
    if (views_[i].key == key) return views_[i];
  }
  if (views_used_ == views_.size()) views_.emplace_back();
  KeyView& v = views_[views_used_++];
  v.key = key;
  v.observed = false;
  v.int_reported = false;
  v.wrote = false;
  v.last = Value::Absent();
  v.has_list = false;
  v.list.clear();
  return v;
}

TruthAuditor::Finding TruthAuditor::Classify(uint32_t reader, Value v, bool list) const {
  // Registers start absent and lists empty: an absent value is the initial one.
  if (v.absent()) return Finding{ExtKind::kBefore, std::nullopt};
  const ValueOrigin* origin = log_.Origin(v);
  if (origin == nullptr) return Finding{ExtKind::kNever, std::nullopt};
  const uint32_t w = origin->txn;
  const TxnRecord& wr = log_.at(w);
  const TxnRecord& rr = log_.at(reader);
  if (wr.status == TxnStatus::kAborted) {
    // An aborted transaction left out of the history wrote a value nobody (recorded) wrote.
    if (!aborted_recorded_) return Finding{ExtKind::kNever, std::nullopt};
    return Finding{ExtKind::kAborted, w};
  }
  if (!list && !origin->final) return Finding{ExtKind::kIntermediate, w};
  bool precedes = false;
  if (w != reader && wr.status == TxnStatus::kCommitted) {
    precedes = level_ == IsolationLevel::kSerializable
                   ? wr.commit < rr.commit || (wr.commit == rr.commit && wr.id < rr.id)
                   : wr.commit <= rr.start;
  }
  if (precedes) return Finding{ExtKind::kBefore, w};
  const int64_t point = level_ == IsolationLevel::kSerializable ? rr.commit : rr.start;
  return Finding{wr.start <= point ? ExtKind::kUncommitted : ExtKind::kAfter, w};
}

void TruthAuditor::AddExt(uint32_t reader, uint64_t key, const Finding& f,
                          std::vector<ExpectedViolation>& out) const {
  ExpectedViolation e{.anomaly = Anomaly::kExt,
                      .ext_kind = f.kind,
                      .txns = {log_.Name(reader)},
                      .key = static_cast<int64_t>(key),
                      .cause = Fault::kLostUpdate};
  if (f.writer && *f.writer != reader) e.txns.push_back(log_.Name(*f.writer));
  out.push_back(std::move(e));
}

void TruthAuditor::Audit(uint32_t txn, std::optional<uint32_t> committed_pred,
                         std::span<const TxnOp> ops, std::span<const Value> list_pool,
                         std::vector<ExpectedViolation>& out) {
  const TxnRecord& rec = log_.at(txn);
  const bool ser = level_ == IsolationLevel::kSerializable;
  // SI reads at the start; SER at the commit, after every commit with a smaller timestamp or an
  // equal one earlier in the input (this transaction's own writes are not installed yet).
  const int64_t point = ser ? rec.commit : rec.start;

  if (committed_pred && log_.at(*committed_pred).commit > point) {
    out.push_back(ExpectedViolation{.anomaly = Anomaly::kSession,
                                    .txns = {log_.Name(txn), log_.Name(*committed_pred)},
                                    .cause = Fault::kLostUpdate});
  }

  views_used_ = 0;
  for (const TxnOp& op : ops) {
    KeyView& view = View(op.key);
    switch (op.kind) {
      case OpKind::kWrite:
        view.observed = true;
        view.wrote = true;
        view.last = op.value;
        break;
      case OpKind::kAppend:
        view.wrote = true;
        view.has_list = true;
        view.list.push_back(op.value);
        break;
      case OpKind::kRead:
        if (!view.observed) {
          view.observed = true;
          if (op.value != store_.ReadRegister(op.key, point)) {
            AddExt(txn, op.key, Classify(txn, op.value, /*list=*/false), out);
          }
        } else if (op.value != view.last && !view.int_reported) {
          view.int_reported = true;
          out.push_back(ExpectedViolation{.anomaly = Anomaly::kInt,
                                          .txns = {log_.Name(txn)},
                                          .key = static_cast<int64_t>(op.key),
                                          .cause = Fault::kLostUpdate});
        }
        view.last = op.value;
        break;
      case OpKind::kListRead: {
        auto observed = list_pool.subspan(op.list_offset, op.list_size);
        if (!view.observed) {
          view.observed = true;
          // Expected: the snapshot, then the transaction's own appends so far.
          auto committed = store_.ReadList(op.key, point);
          std::span<const Value> own;
          if (view.has_list) own = view.list;
          auto expected_at = [&](size_t i) {
            return i < committed.size() ? committed[i] : own[i - committed.size()];
          };
          const size_t expected_size = committed.size() + own.size();
          size_t i = 0;
          while (i < expected_size && i < observed.size() && expected_at(i) == observed[i]) ++i;
          const bool ends_with_own =
              observed.size() >= own.size() &&
              std::equal(own.begin(), own.end(), observed.end() - own.size());
          if (!ends_with_own) {
            // It misses the transaction's own earlier appends: INT (a not-own-write read).
            view.int_reported = true;
            out.push_back(ExpectedViolation{.anomaly = Anomaly::kInt,
                                            .txns = {log_.Name(txn)},
                                            .key = static_cast<int64_t>(op.key),
                                            .cause = Fault::kLostUpdate});
          } else if (i != expected_size || i != observed.size()) {
            // Judge what the read says of the committed list: the part before the transaction's
            // own appends. A proper prefix of the committed list is a stale version ("before",
            // no writer); otherwise the first differing element decides.
            std::span<const Value> judged = observed.first(observed.size() - own.size());
            size_t j = 0;
            while (j < committed.size() && j < judged.size() && committed[j] == judged[j]) ++j;
            Finding f = j == judged.size() ? Finding{ExtKind::kBefore, std::nullopt}
                                           : Classify(txn, judged[j], /*list=*/true);
            if (j == judged.size() && j > 0 && j < committed.size()) {
              // A prefix that ends between two appends of one transaction: intermediate.
              const ValueOrigin* last = log_.Origin(judged[j - 1]);
              const ValueOrigin* next = log_.Origin(committed[j]);
              if (last != nullptr && next != nullptr && last->txn == next->txn) {
                f = Finding{ExtKind::kIntermediate, last->txn};
              }
            }
            AddExt(txn, op.key, f, out);
          }
        } else if (!view.int_reported && !std::equal(view.list.begin(), view.list.end(),
                                                     observed.begin(), observed.end())) {
          view.int_reported = true;
          out.push_back(ExpectedViolation{.anomaly = Anomaly::kInt,
                                          .txns = {log_.Name(txn)},
                                          .key = static_cast<int64_t>(op.key),
                                          .cause = Fault::kLostUpdate});
        }
        view.has_list = true;
        view.list.assign(observed.begin(), observed.end());
        break;
      }
    }
  }

  // NoConflict (SI): every committed writer of a key this transaction writes whose commit falls
  // inside this transaction's interval. They all committed before it, so each pair is found
  // here, once.
  if (ser) return;
  for (size_t i = 0; i < views_used_; ++i) {
    if (!views_[i].wrote) continue;
    auto chain = store_.Chain(views_[i].key);
    for (auto it = chain.rbegin(); it != chain.rend() && it->cts > rec.start; ++it) {
      out.push_back(ExpectedViolation{.anomaly = Anomaly::kNoConflict,
                                      .txns = {log_.Name(it->writer), log_.Name(txn)},
                                      .key = static_cast<int64_t>(views_[i].key),
                                      .cause = Fault::kLostUpdate});
    }
  }
}

}  // namespace isowatch::sim
