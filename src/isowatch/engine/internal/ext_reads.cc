// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/ext_reads.h"

#include <utility>

#include "absl/container/flat_hash_map.h"

#include "isowatch/common/check.h"
#include "isowatch/engine/version_spill.h"

namespace isowatch::engine::internal {

using history::Op;
using history::OpKind;
using history::Timestamp;
using history::Value;
using verdict::Violation;

void ExtReads::CheckCollectedRead(KeyId key, const KeyState& ks, const Op& op,
                                  const OrderKey& point, uint32_t op_index) {
  Violation v;
  const std::optional<bool> wrong =
      spill_.present() ? Judge(key, ks, point, op, op_index, &v) : std::nullopt;
  if (!wrong) {
    ++ctx_.stats().horizon_misses;
  } else if (*wrong) {
    ctx_.Emit(std::move(v));
  }
}

std::optional<bool> ExtReads::Judge(KeyId key, const KeyState& ks, const OrderKey& point,
                                    const Op& op, uint32_t op_index, Violation* violation) {
  const history::History& h = ctx_.h();
  const TxnId reader(point.txn());
  if (op.kind() == OpKind::kListRead) {
    if (!VisibleList(key, ks, point, &committed_scratch_)) return std::nullopt;
    own_scratch_.clear();
    ctx_.AppendsOf(reader, key, &own_scratch_, op_index);
    if (axioms::ListReadMatches(committed_scratch_, own_scratch_, h.list_elements(op))) {
      return false;
    }
    if (violation != nullptr) {
      *violation = axioms::ListViolation(h, ctx_.write_index(), ctx_.level(), reader, key,
                                         committed_scratch_, own_scratch_, h.list_elements(op));
    }
    return true;
  }
  RegisterView v;
  if (!VisibleRegister(key, ks, point, &v)) return std::nullopt;
  if (axioms::RegisterReadMatches(op.value(), v.value,
                                  !v.writer.valid() && h.AbsentReadsInitial(key))) {
    return false;
  }
  if (violation != nullptr) {
    *violation = axioms::RegisterViolation(h, ctx_.write_index(), ctx_.level(), reader, key,
                                           v.value, v.writer, op.value());
  }
  return true;
}

Violation ExtReads::Explain(KeyId key, const KeyState& ks, const OrderKey& point,
                            const ReadInfo& r) {
  Violation v;
  Judge(key, ks, point, ReadOp(point, r), r.op_index, &v);
  return v;
}

bool ExtReads::VisibleList(KeyId key, const KeyState& ks, const OrderKey& point,
                           std::vector<Value>* out) {
  out->clear();
  if (ks.trimmed && point.ts <= ks.trim_point && spill_.present()) {
    // base_list holds the appends of every version up to trim_point, in order; those of the
    // versions at or after the point are in the spill (all of them, if nothing at or after the
    // point was dropped): the list at the point is base_list without them.
    if (spill_.broken() || !(ks.dropped_upto < point) || point.ts <= spill_.pruned_point()) {
      return false;
    }
    const SpillAccess::ReloadTimer timer(spill_);
    size_t after = 0;
    absl::Status s = spill_.ScanAfter(key, Before(point), [&](const SpilledVersion& v) {
      after += v.appends.size();
      return true;
    });
    if (!s.ok()) return spill_.Failed(s);
    if (!ISOWATCH_BUG(after <= ks.base_list.size(),
                      "the spill holds more appends after a point than the list base")) {
      return false;
    }
    out->assign(ks.base_list.begin(), ks.base_list.end() - static_cast<ptrdiff_t>(after));
  } else if (ks.trimmed) {
    out->assign(ks.base_list.begin(), ks.base_list.end());
  } else {
    auto init = ctx_.h().InitialList(key);
    out->assign(init.begin(), init.end());
  }
  for (auto it = ks.versions.begin(); it != ks.versions.end() && it.key() < point; ++it) {
    ctx_.AppendsOf(TxnId(it.key().txn()), key, out);
  }
  return true;
}

bool ExtReads::VisibleRegister(KeyId key, const KeyState& ks, const OrderKey& point,
                               RegisterView* out) {
  if (const auto v = VisibleVersion(ks, point)) {
    *out = RegisterView{v->info->value, TxnId(v->key.txn())};
    return true;
  }
  if (ks.trimmed && spill_.present()) {
    // At or below the prune point the spill may have dropped the version the point sees.
    if (spill_.broken() || point.ts <= spill_.pruned_point()) return false;
    if (ks.base_in_spill && ks.spilled_base < point) {
      // Memory holds nothing newer before the point (VisibleVersion), and the spill nothing newer
      // than the base: the point sees the base, whose value came back with the key's state
      // (KeyStore). Not a reload: the spill was read, and counted, when the state came back.
      const Value* base = keys_.BaseValue(key);
      if (!ISOWATCH_BUG(base != nullptr, "a spilled base without its value")) return false;
      *out = RegisterView{*base, TxnId(ks.spilled_base.txn())};
      return true;
    }
    const SpillAccess::ReloadTimer timer(spill_);
    auto r = spill_.NewestBefore(key, point);
    if (!r.ok()) return spill_.Failed(r.status());
    // Exact unless a dropped version may be newer than what the spill has before the point.
    if (r->has_value() && ks.dropped_upto < (*r)->at) {
      *out = RegisterView{(*r)->value, TxnId((*r)->at.txn())};
      return true;
    }
    if (r->has_value() || ks.dropped_upto != kBeforeAll) return false;
  }
  *out = RegisterView{ctx_.h().InitialValue(key), TxnId::Invalid()};
  return true;
}

void ExtReads::FinalizeDue() {
  // A key's entry is current while it sits at the key's finality_at; older ones are stale.
  due_keys_.clear();
  finality_queue_.TakeUpTo(finality_.final_point(), [this](uint64_t key) {
    due_keys_.push_back(KeyId(static_cast<uint32_t>(key)));
  });
  for (size_t i = 0; i < due_keys_.size(); ++i) {
    if (i + 2 < due_keys_.size()) {
      if (const KeyState* ks = keys_.Find(due_keys_[i + 2])) ks->PrefetchState();
    }
    if (i + 1 < due_keys_.size()) {
      if (const KeyState* ks = keys_.Find(due_keys_[i + 1])) ks->readers.PrefetchEnds();
    }
    FinalizeKey(due_keys_[i]);
  }
}

void ExtReads::FinalizeKey(KeyId key) {
  const Timestamp f = finality_.final_point();
  KeyState* state = keys_.Find(key);
  // A stale entry (already done), perhaps of a key released or evicted since.
  if (state == nullptr || state->finality_at > f) return;
  KeyState& ks = *state;
  EngineStats& stats = ctx_.stats();
  auto it = ks.readers.begin();
  const auto end = ks.readers.end();
  for (; it != end && it.key().ts <= f; ++it) {
    if (it.value().wrong) {
      ctx_.Emit(Explain(key, ks, it.key(), it.value()));
      --stats.provisional_violations;
    }
    --stats.provisional_reads;
    pending_.Remove(it.key().txn());
  }
  ks.readers.erase_prefix(it);
  if (ks.readers.empty()) {
    ks.finality_at = Timestamp::Max();
    keys_.QueueIdle(key, ks);
  } else {
    ks.finality_at = ks.readers.front_key().ts;
    finality_queue_.Push(ks.finality_at, key.value());
  }
}

uint64_t ExtReads::MemoryBytes() const {
  // A pending read twice over: a leaf off the tree's edges is at least half full.
  constexpr uint64_t kReadEntry = sizeof(OrderKey) + sizeof(ReadInfo);
  return ctx_.stats().provisional_reads * 2 * kReadEntry + pending_.window() * sizeof(uint32_t);
}

void ExtReads::CheckInvariants() const {
  pending_.CheckInvariants();
  const history::History& h = ctx_.h();
  const Timestamp f = finality_.final_point();
  absl::flat_hash_map<uint64_t, uint32_t> per_txn;
  uint64_t reads = 0;
  uint64_t wrong = 0;
  uint64_t keys_with_reads = 0;
  for (uint32_t k = 0; k < keys_.size(); ++k) {
    const KeyState* ks = keys_.table().Find(k);
    if (ks == nullptr) continue;
    if (ks->readers.empty()) {
      ISOWATCH_CHECK(ks->finality_at == Timestamp::Max(), "finality_at without a pending read");
      continue;
    }
    ++keys_with_reads;
    ISOWATCH_CHECK(ks->finality_at == ks->readers.front_key().ts,
                   "finality_at is not the first pending read's");
    const KeyId key(k);
    for (auto it = ks->readers.begin(); it != ks->readers.end(); ++it) {
      ++reads;
      wrong += it.value().wrong ? 1 : 0;
      ++per_txn[it.key().txn()];
      ISOWATCH_CHECK(f < it.key().ts, "a pending read at or below the final point");
      if (h.key(key).is_list) continue;
      // A register's verdict is current: against the version memory shows at its point, or the
      // initial value when nothing was collected.
      if (const auto v = VisibleVersion(*ks, it.key())) {
        ISOWATCH_CHECK(it.value().wrong ==
                           !axioms::RegisterReadMatches(it.value().observed, v->info->value, false),
                       "a pending read's verdict is stale");
      } else if (!ks->trimmed) {
        ISOWATCH_CHECK(it.value().wrong == !axioms::RegisterReadMatches(it.value().observed,
                                                                        h.InitialValue(key),
                                                                        h.AbsentReadsInitial(key)),
                       "a pending read's verdict against the initial value is stale");
      }
    }
  }
  const EngineStats& stats = ctx_.stats();
  ISOWATCH_CHECK(reads == stats.provisional_reads, "provisional_reads out of step");
  ISOWATCH_CHECK(wrong == stats.provisional_violations, "provisional_violations out of step");
  ISOWATCH_CHECK(per_txn.size() == pending_.transactions(), "pending transactions out of step");
  for (const auto& [txn, count] : per_txn) {
    ISOWATCH_CHECK(pending_.Count(txn) == count, "a transaction's pending count is off");
  }
  ISOWATCH_CHECK(finality_queue_.size() >= keys_with_reads,
                 "a key with pending reads is not in the finality queue");
}

}  // namespace isowatch::engine::internal
