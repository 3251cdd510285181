// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/checkpointer.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/check.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::engine::internal {
namespace {

using history::History;
using history::Timestamp;
using history::Value;

// Conversions to and from the checkpoint's messages.
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

absl::Status Checkpointer::Save(v1::EngineCheckpoint* out) {
  RETURN_IF_ERROR(spill_.FlushForCheckpoint());
  const History& h = ctx_.h();
  out->Clear();
  out->set_level(static_cast<uint32_t>(ctx_.level()));
  out->set_txn_count(h.size());
  out->set_key_count(keys_.size());
  out->set_max_duration(ctx_.longest());
  ToProto(spill_.pruned_point(), out->mutable_pruned_point());
  out->set_saw_snapshot(snapshots_.seen());
  ToProto(finality_.highest_commit(), out->mutable_highest_commit());
  for (const Finality::Stream& s : finality_.streams()) {
    v1::EngineStream* p = out->add_streams();
    p->set_name(s.name);
    p->set_closed(s.closed);
    p->set_explicit_watermark(s.has_watermark);
    ToProto(s.watermark, p->mutable_watermark());
  }
  for (size_t i = 0; i < sessions_.size(); ++i) out->add_session_bases(sessions_.base(i));
  delivered_.ForEachMissing([&](uint64_t t) { out->add_undelivered(t); });
  for (uint64_t i = delivered_.end(); i < h.size(); ++i) out->add_undelivered(i);
  out->set_new_keys_maybe_spilled(keys_.forgot_keys());
  const KeyTable& table = keys_.table();
  for (uint32_t k = 0; k < table.size(); ++k) {
    if (table.slot(k) == KeyTable::Slot::kEvicted) {
      out->add_evicted_keys(k);
      continue;
    }
    if (table.slot(k) == KeyTable::Slot::kMaybeSpilled) {
      out->add_maybe_spilled_keys(k);
      continue;
    }
    const KeyState* ks = table.Find(k);
    // What the held transactions bring back is left out; a key with nothing else is fresh.
    if (ks == nullptr ||
        (ks->versions.empty() && !ks->trimmed && ks->max_duration == 0 && ks->base_list.empty())) {
      continue;
    }
    v1::EngineKey* p = out->add_keys();
    p->set_key(k);
    p->set_trimmed(ks->trimmed);
    ToProto(ks->trim_point, p->mutable_trim_point());
    p->set_max_duration(ks->max_duration);
    ToProto(ks->dropped_upto, p->mutable_dropped_upto());
    if (ks->base_in_spill) {
      const Value* base = keys_.BaseValue(KeyId(k));
      if (!ISOWATCH_BUG(base != nullptr, "a spilled base without its value")) {
        return absl::InternalError("engine checkpoint: a spilled base has lost its value");
      }
      p->set_base_in_spill(true);
      ToProto(ks->spilled_base, p->mutable_spilled_base());
      ToProto(*base, p->mutable_base_value());
    }
    for (const Value& v : ks->base_list) ToProto(v, p->add_base_list());
    if (!ks->versions.empty()) ToProto(ks->versions.front_key(), p->mutable_front());
  }
  std::vector<std::pair<uint32_t, SpillAccess::Pin>> pins(spill_.pins().begin(),
                                                          spill_.pins().end());
  std::sort(pins.begin(), pins.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [index, pin] : pins) {
    v1::EngineSpillPin* p = out->add_spill_pins();
    p->set_index(index);
    p->set_unbounded(pin.unbounded);
    ToProto(pin.expires, p->mutable_expires());
  }
  return absl::OkStatus();
}

uint64_t Checkpointer::DeliveredBase(std::span<const HeldTxn> held) const {
  uint64_t base = ctx_.h().first_txn();
  for (const HeldTxn& t : held) base = std::min(base, t.id.value());
  return base;
}

absl::Status Checkpointer::Validate(const v1::EngineCheckpoint& c,
                                    std::span<const HeldTxn> held) const {
  const History& h = ctx_.h();
  if (!finality_.streams().empty() || ctx_.stats().delivered > 0) {
    return BadCheckpoint("the engine is not fresh");
  }
  if (c.level() != static_cast<uint32_t>(ctx_.level())) {
    return BadCheckpoint("saved by an engine checking another level");
  }
  if (c.txn_count() != h.size() || c.key_count() != h.key_count() ||
      static_cast<size_t>(c.session_bases_size()) != h.session_count()) {
    return BadCheckpoint(fmt::format(
        "saved over {} transactions, {} keys and {} sessions, the history has {}, {} and {}",
        c.txn_count(), c.key_count(), c.session_bases_size(), h.size(), h.key_count(),
        h.session_count()));
  }
  for (const HeldTxn& t : held) {
    if (!t.id.valid() || t.id.value() >= h.size() || !h.has_txn(t.id) ||
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
  uint32_t last = 0;
  for (int i = 0; i < c.keys_size(); ++i) {
    const v1::EngineKey& k = c.keys(i);
    if (k.key() >= h.key_count() || (i > 0 && k.key() <= last)) {
      return BadCheckpoint(fmt::format("key {} out of range or out of order", k.key()));
    }
    last = k.key();
    if (k.max_duration() < 0 || k.max_duration() >= kMaxDuration) {
      return BadCheckpoint(fmt::format("key {}: duration out of range", k.key()));
    }
    if ((k.base_in_spill() &&
         (FromProto(k.spilled_base()).txn() >= h.size() || !FromProto(k.base_value(), h))) ||
        (k.has_front() && FromProto(k.front()).txn() >= h.size())) {
      return BadCheckpoint(fmt::format("key {}: a version of a transaction out of range", k.key()));
    }
    for (const v1::EngineValue& v : k.base_list()) {
      if (!FromProto(v, h)) return BadCheckpoint(fmt::format("key {}: bad value kind", k.key()));
    }
  }
  for (uint32_t k : c.evicted_keys()) {
    if (k >= h.key_count()) return BadCheckpoint(fmt::format("evicted key {} out of range", k));
  }
  for (uint32_t k : c.maybe_spilled_keys()) {
    if (k >= h.key_count()) {
      return BadCheckpoint(fmt::format("key {} the spill may hold: out of range", k));
    }
  }
  for (const v1::EngineSpillPin& p : c.spill_pins()) {
    if (p.index() >= h.byte_count() || p.unbounded() < 0) {
      return BadCheckpoint(fmt::format("spill pin of byte string {}: out of range", p.index()));
    }
  }
  const uint64_t delivered_base = DeliveredBase(held);
  for (uint64_t t : c.undelivered()) {
    if (t >= h.size() || t < delivered_base) {
      return BadCheckpoint(fmt::format("transaction {} out of range", t));
    }
  }
  if (c.evicted_keys_size() > 0 && !spill_.present()) {
    return absl::FailedPreconditionError(
        "engine checkpoint: keys were evicted to the spill, and this engine has none "
        "(engine.memory_budget)");
  }
  if ((c.maybe_spilled_keys_size() > 0 || c.new_keys_maybe_spilled()) && !keys_.evicting()) {
    return absl::FailedPreconditionError(
        "engine checkpoint: keys were forgotten, their states left in the spill, and this "
        "engine has no memory budget (engine.memory_budget)");
  }
  return absl::OkStatus();
}

uint64_t Checkpointer::Apply(const v1::EngineCheckpoint& c, std::span<const HeldTxn> held,
                             absl::flat_hash_map<uint32_t, OrderKey>* fronts) {
  const History& h = ctx_.h();
  ctx_.set_longest(c.max_duration());
  spill_.RestorePrunedPoint(FromProto(c.pruned_point()));
  snapshots_.set_seen(c.saw_snapshot());
  for (size_t i = 0; i < sessions_.size(); ++i) sessions_.set_base(i, c.session_bases(i));
  // Every transaction is delivered but the held ones, taken again by the engine, and those still
  // to come.
  delivered_.Reset(DeliveredBase(held), h.size());
  for (const HeldTxn& t : held) delivered_.Remove(t.id.value());
  for (uint64_t t : c.undelivered()) delivered_.Remove(t);

  for (const v1::EngineSpillPin& p : c.spill_pins()) {
    spill_.RestorePin(
        p.index(), SpillAccess::Pin{.unbounded = p.unbounded(), .expires = FromProto(p.expires())});
  }
  fronts->clear();
  for (const v1::EngineKey& k : c.keys()) {
    const KeyId key(k.key());
    KeyState& ks = keys_.State(key);
    ks.trimmed = k.trimmed();
    ks.trim_point = FromProto(k.trim_point());
    ks.max_duration = k.max_duration();
    ks.dropped_upto = FromProto(k.dropped_upto());
    if (k.base_in_spill()) {
      keys_.RestoreBase(key, ks, FromProto(k.spilled_base()), *FromProto(k.base_value(), h));
    }
    for (const v1::EngineValue& v : k.base_list()) ks.base_list.push_back(*FromProto(v, h));
    collector_.RestoredBase(ks.base_list.size());
    if (k.has_front()) (*fronts)[key.value()] = FromProto(k.front());
    keys_.QueueIdle(key, ks);
  }
  uint64_t evicted = 0;
  for (uint32_t k : c.evicted_keys()) evicted += keys_.RestoreEvicted(k) ? 1 : 0;
  for (uint32_t k : c.maybe_spilled_keys()) keys_.RestoreMaybeSpilled(k);
  keys_.set_forgot_keys(c.new_keys_maybe_spilled());
  for (const v1::EngineStream& s : c.streams()) {
    finality_.RestoreStream(Finality::Stream{.name = s.name(),
                                             .closed = s.closed(),
                                             .has_watermark = s.explicit_watermark(),
                                             .watermark = FromProto(s.watermark())});
  }
  finality_.RestoreHighestCommit(c.has_highest_commit() ? FromProto(c.highest_commit())
                                                        : Timestamp::Max());
  return evicted;
}

}  // namespace isowatch::engine::internal
