// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "isowatch/axioms/ext_rules.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/chain_map.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/finality.h"
#include "isowatch/engine/internal/key_state.h"
#include "isowatch/engine/internal/key_store.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/engine/internal/pending_counts.h"
#include "isowatch/engine/internal/spill_access.h"
#include "isowatch/engine/internal/time_queue.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. Every external read whose verdict is not final is an entry of its key's `readers`, under
//     its read point, with its verdict against the versions visible there now. Between calls
//     its point lies above the final point: a read at or below it is judged once and leaves.
//  2. A key's finality_at is the timestamp of its first pending read (Max if none), and the
//     finality queue holds the key under it (entries at another timestamp are stale, skipped).
//  3. The pending counts give each transaction's number of pending reads; stats' provisional_reads
//     is their total, provisional_violations the number whose current verdict is wrong.

// The Ext axiom online (docs/engine.md, "What an arrival re-checks"): judges each first external
// read at arrival against the newest version visible at its read point (from memory, or
// reloaded from the spill), keeps it as pending in its key's `readers` until the final point
// passes it, re-judges the pending reads a new version can change (a flip-flop when the verdict
// changes), and reports the wrong ones when final.
//
// Engine-thread only. Owns the finality queue and the pending counts; the pending reads
// themselves live in the key states (KeyStore).
class ExtReads {
 public:
  ExtReads(EngineContext& ctx, const Finality& finality, SpillAccess& spill, KeyStore& keys)
      : ctx_(ctx), finality_(finality), spill_(spill), keys_(keys) {}
  ExtReads(const ExtReads&) = delete;
  ExtReads& operator=(const ExtReads&) = delete;

  // Judges external read `op` at `point` (read.op_index its index in the reader), and keeps it
  // pending unless the final point has passed it.
  void AddRead(const history::Op& op, const OrderKey& point, ReadInfo read) {
    const KeyId key = op.key();
    KeyState& ks = keys_.State(key);
    keys_.Touch(ks);
    if (Collected(key, ks, point)) {
      CheckCollectedRead(key, ks, op, point, read.op_index);
      return;
    }
    read.wrong = Wrong(key, ks, point, op, read.op_index);
    if (point.ts <= finality_.final_point()) {
      if (read.wrong) ctx_.Emit(Explain(key, ks, point, read));
      return;
    }
    if (ks.readers.empty() || point.ts < ks.finality_at) {
      // The key's earliest pending read: its entry in the finality queue moves here.
      ks.finality_at = point.ts;
      finality_queue_.Push(point.ts, key.value());
    }
    ks.readers.insert(point, read);
    ++ctx_.stats().provisional_reads;
    if (read.wrong) ++ctx_.stats().provisional_violations;
    pending_.Add(point.txn());
  }

  // Version `vkey` of `key` (at `pos` in its chain, with `value` for a register) has just been
  // inserted: re-judges the pending reads whose snapshot now ends at it (registers: points in
  // (vkey, next version]) or includes it (lists: every point after vkey).
  void Recheck(KeyId key, KeyState& ks, const OrderKey& vkey,
               const ChainMap<VersionInfo>::iterator& pos, history::Value value) {
    if (ks.readers.empty() || !(vkey < ks.readers.back_key())) return;
    const bool is_list = ctx_.h().key(key).is_list;
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
    EngineStats& stats = ctx_.stats();
    const auto end = ks.readers.end();
    for (auto it = ks.readers.upper_bound(vkey); it != end; ++it) {
      if (bounded && limit < it.key()) break;
      // A register read between the new version and the next one now sees exactly the new
      // version; a list read sees one more append somewhere in its list.
      bool wrong = is_list ? Wrong(key, ks, it.key(), it.value())
                           : !axioms::RegisterReadMatches(it.value().observed, value, false);
      if (wrong == it.value().wrong) continue;
      ++stats.flip_flops;
      if (wrong) {
        ++stats.provisional_violations;
      } else {
        --stats.provisional_violations;
      }
      it.value().wrong = wrong;
    }
  }

  // At an advance of the final point: makes final every pending read at or below it, reporting
  // the wrong ones.
  void FinalizeDue();

  // The committed list of `key` visible at `point`, into `out`: the initial list, then the
  // appends of every version before the point, in order; from the spill when the point lies at
  // or below what memory folded into base_list. False if the spill could not be read.
  bool VisibleList(KeyId key, const KeyState& ks, const OrderKey& point,
                   std::vector<history::Value>* out);

  // Whether transaction `txn` has a pending read.
  bool Pending(TxnId txn) const { return pending_.Has(txn.value()); }
  size_t pending_txns() const { return pending_.transactions(); }
  uint64_t MemoryBytes() const;

  void CheckInvariants() const;

 private:
  // The newest version of a register visible at `point`.
  struct Visible {
    OrderKey key;
    const VersionInfo* info;
  };
  // The newest version of register `key` visible at `point` (writer invalid: the initial value).
  struct RegisterView {
    history::Value value;
    TxnId writer = TxnId::Invalid();
  };

  // Whether versions visible at `point` may have been collected: for a register, the point lies
  // before the oldest version kept; for a list, at or below the collection point. Always at or
  // below the final point: a read above it whose visible version memory does not hold (a
  // spilled base) stays pending, since a version still to come may be the one it sees.
  bool Collected(KeyId key, const KeyState& ks, const OrderKey& point) const {
    if (!ks.trimmed || point.ts > finality_.final_point()) return false;
    if (ctx_.h().key(key).is_list) return point.ts <= ks.trim_point;
    return ks.versions.empty() || point < ks.versions.front_key();
  }

  // The newest version in memory visible at `point`; nullopt for the initial value, and also
  // when the version visible at `point` is a key's spilled base (memory holds nothing newer
  // before the point).
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

  // Whether pending read `r` at `point` is wrong now (its previous verdict if the snapshot could
  // not be had).
  bool Wrong(KeyId key, const KeyState& ks, const OrderKey& point, const ReadInfo& r) {
    return Judge(key, ks, point, ReadOp(point, r), r.op_index, nullptr).value_or(r.wrong);
  }
  // Whether read `op` at `point` is wrong; a read whose snapshot could not be had is a horizon
  // miss, taken as right until a version arriving later gives it something to compare.
  bool Wrong(KeyId key, const KeyState& ks, const OrderKey& point, const history::Op& op,
             uint32_t op_index) {
    if (op.kind() != history::OpKind::kListRead) {
      // The common case inline: a register whose visible version memory holds.
      if (const auto v = VisibleVersion(ks, point)) {
        return !axioms::RegisterReadMatches(op.value(), v->info->value, false);
      }
      if (!ks.trimmed || !spill_.present()) {
        return !axioms::RegisterReadMatches(op.value(), ctx_.h().InitialValue(key),
                                            ctx_.h().AbsentReadsInitial(key));
      }
    }
    const std::optional<bool> wrong = Judge(key, ks, point, op, op_index, nullptr);
    if (!wrong) ++ctx_.stats().horizon_misses;
    return wrong.value_or(false);
  }

  const history::Op& ReadOp(const OrderKey& point, const ReadInfo& r) const {
    return ctx_.h().ops(TxnId(point.txn()))[r.op_index];
  }

  // A read whose snapshot has been collected. With a spill it is reloaded: everything collected
  // lies at or below the final point, so the verdict is final at once. Without one (or if the
  // spill fails), rather than risk a false alarm, the read goes unjudged and is counted.
  [[gnu::noinline, gnu::cold]] void CheckCollectedRead(KeyId key, const KeyState& ks,
                                                       const history::Op& op, const OrderKey& point,
                                                       uint32_t op_index);
  // Whether the read `op` (operation op_index of the reader point.txn) at `point` is wrong, and
  // if so and `violation` is given, the violation; nullopt if the snapshot could not be had.
  [[gnu::noinline]] std::optional<bool> Judge(KeyId key, const KeyState& ks, const OrderKey& point,
                                              const history::Op& op, uint32_t op_index,
                                              verdict::Violation* violation);
  verdict::Violation Explain(KeyId key, const KeyState& ks, const OrderKey& point,
                             const ReadInfo& r);
  // The newest version of register `key` visible at `point`; from the spill when memory holds
  // nothing before the point and versions were collected. False if the spill could not be read.
  bool VisibleRegister(KeyId key, const KeyState& ks, const OrderKey& point, RegisterView* out);
  // Makes final every pending read of `key` at or below the final point, and queues the key
  // again at its earliest read left.
  void FinalizeKey(KeyId key);

  EngineContext& ctx_;
  const Finality& finality_;
  SpillAccess& spill_;
  KeyStore& keys_;
  TimeQueue finality_queue_;     // keys with pending reads, by their earliest (invariant 2)
  std::vector<KeyId> due_keys_;  // keys taken from finality_queue_, to finalise
  PendingCounts pending_;
  std::vector<history::Value> committed_scratch_;
  std::vector<history::Value> own_scratch_;
};

}  // namespace isowatch::engine::internal
