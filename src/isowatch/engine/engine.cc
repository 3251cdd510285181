// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/engine.h"

#include <utility>

#include "isowatch/common/check.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/engine/internal/engine_impl.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::engine {

using history::History;
using history::Op;
using history::Timestamp;
using history::Transaction;
using history::Value;
using internal::KeyState;
using internal::OrderKey;
using internal::ReadInfo;
using verdict::Violation;

EngineImpl::EngineImpl(const History& h, EngineOptions options)
    : ctx_(h, std::move(options)),
      finality_(ctx_),
      spill_(ctx_),
      keys_(ctx_, finality_, spill_),
      sessions_(ctx_),
      reads_(ctx_, finality_, spill_, keys_),
      snapshots_(ctx_, finality_, keys_, reads_),
      collector_(ctx_, finality_, spill_, keys_),
      versions_(ctx_, spill_, keys_, reads_, snapshots_, collector_),
      // Flags only from the history's first held transaction: one restored from a checkpoint
      // has numbered billions (RestoreCheckpoint sets what lies below).
      delivered_(h.first_txn(), h.size()),
      checkpointer_(ctx_, finality_, spill_, keys_, sessions_, snapshots_, collector_, delivered_) {
}

StreamId EngineImpl::AddStream(std::string name) {
  const StreamId id = finality_.AddStream(std::move(name));
  AdvanceFinality();
  return id;
}

inline void EngineImpl::Prefetch(std::span<const TxnId> batch, size_t i) const {
  const History& h = ctx_.h();
  const size_t n = batch.size();
  if (i + kPrefetchRecord < n && batch[i + kPrefetchRecord].value() < h.size()) {
    const char* t = reinterpret_cast<const char*>(&h.txn(batch[i + kPrefetchRecord]));
    __builtin_prefetch(t);
    __builtin_prefetch(t + 64);
  }
  // Only transactions that take part read their operations and keys (not aborted ones).
  if (const Transaction* t = PrefetchTarget(batch, i + kPrefetchOps)) {
    auto ops = h.ops(*t);
    const char* p = reinterpret_cast<const char*>(ops.data());
    for (size_t off = 0; off < ops.size_bytes(); off += 64) __builtin_prefetch(p + off);
  }
  if (const Transaction* t = PrefetchTarget(batch, i + kPrefetchState)) {
    for (const Op& op : h.ops(*t)) {
      if (const KeyState* ks = keys_.Find(op.key())) ks->PrefetchState();
    }
  }
  if (const Transaction* t = PrefetchTarget(batch, i + kPrefetchChains)) {
    for (const Op& op : h.ops(*t)) {
      if (const KeyState* ks = keys_.Find(op.key())) ks->PrefetchChains();
    }
  }
}

inline const Transaction* EngineImpl::PrefetchTarget(std::span<const TxnId> batch, size_t j) const {
  if (j >= batch.size() || batch[j].value() >= ctx_.h().size()) return nullptr;
  const Transaction& t = ctx_.h().txn(batch[j]);
  return ctx_.Participates(t) ? &t : nullptr;
}

void EngineImpl::Deliver(StreamId stream, std::span<const TxnId> batch,
                         std::optional<Timestamp> watermark) {
  const History& h = ctx_.h();
  if (h.size() != delivered_.end() || h.key_count() != keys_.size() ||
      h.session_count() != sessions_.size()) {
    Grow();
  }
  internal::Finality::Stream& s = finality_.stream(stream);
  for (size_t i = 0; i < batch.size(); ++i) {
    Prefetch(batch, i);
    DeliverOne(s, batch[i]);
  }
  if (watermark) finality_.ApplyWatermark(s, *watermark);
  AdvanceFinality();
}

void EngineImpl::CloseStream(StreamId stream) {
  finality_.Close(stream);
  AdvanceFinality();
}

void EngineImpl::Tick() {
  finality_.Tick();
  AdvanceFinality();
}

void EngineImpl::Finish() {
  finality_.CloseAll();
  AdvanceFinality();
}

void EngineImpl::Grow() {
  const History& h = ctx_.h();
  // Transactions the history released were all delivered.
  delivered_.Grow(h.first_txn(), h.size());
  keys_.Grow();
  sessions_.Grow();
  ctx_.walker().Grow();
}

inline void EngineImpl::DeliverOne(internal::Finality::Stream& s, TxnId id) {
  EngineStats& stats = ctx_.stats();
  if (!delivered_.Insert(id.value())) {
    ++stats.duplicates;
    return;
  }
  ++stats.delivered;
  const Transaction& t = ctx_.h().txn(id);
  finality_.OnArrival(s, t);
  sessions_.OnArrival(id, t);
  if (!ctx_.Participates(t)) return;
  ++stats.checked;
  if (t.has_start) ctx_.SeeDuration(t.commit.physical - t.start.physical);
  if (ctx_.restoring()) [[unlikely]] {
    // Its versions are back (VersionChains::Reinsert); a final one left nothing pending.
    if (t.commit <= finality_.final_point()) return;
  }
  const bool by_snapshot = ctx_.BySnapshot(t);
  if (by_snapshot) [[unlikely]] {
    snapshots_.MarkSeen();
    // INT now; the external reads once every version the snapshot may see has arrived.
    ctx_.walker().Walk(
        id, ctx_.level(), [](uint32_t, const Op&, std::span<const Value>) {},
        [&](Violation v) { ctx_.Emit(std::move(v)); });
  } else {
    const OrderKey point = ctx_.ReadPoint(id, t);
    ctx_.walker().Walk(
        id, ctx_.level(),
        [&](uint32_t op_index, const Op& op, std::span<const Value>) {
          reads_.AddRead(op, point, ReadInfo{op.value(), op_index, false});
        },
        [&](Violation v) { ctx_.Emit(std::move(v)); });
  }
  if (!ctx_.restoring()) [[likely]] {
    keys_.ForEachWrite(id, [&](KeyId key, Value value) { versions_.Insert(id, t, key, value); });
  }
  if (by_snapshot) [[unlikely]] {
    snapshots_.OnArrival(id, t);
  }
}

void EngineImpl::AdvanceFinality() {
  if (!finality_.Advance()) return;
  const uint64_t spill_writes_before = spill_.writes();
  reads_.FinalizeDue();
  keys_.ReleaseIdleKeys(
      [this] { return !snapshots_.seen() && MemoryBytes() > ctx_.options().memory_budget; });
  snapshots_.JudgeDue();
  collector_.Collect([this] { return MemoryBytes(); });
  spill_.FlushIfWritten(spill_writes_before);
}

bool EngineImpl::IsFinal(TxnId id) const {
  if (!delivered_.Contains(id.value())) return false;
  if (id.value() < delivered_.base()) return true;
  const Transaction& t = ctx_.h().txn(id);
  if (!ctx_.Participates(t)) return true;
  return t.commit <= finality_.final_point() && !reads_.Pending(id);
}

bool EngineImpl::Needs(TxnId id) const {
  if (reads_.Pending(id)) return true;
  const Transaction& t = ctx_.h().txn(id);
  if (sessions_.Holds(id, t)) return true;
  if (!ctx_.Participates(t)) return false;
  const OrderKey vkey = internal::EngineContext::VersionKey(id, t);
  for (const Op& op : ctx_.h().ops(t)) {
    if (!op.is_write()) continue;
    const KeyState* ks = keys_.Find(op.key());  // an evicted key holds no version
    if (ks == nullptr || ks->versions.empty() || ks->versions.back_key() < vkey) continue;
    auto it = ks->versions.lower_bound(vkey);
    if (it != ks->versions.end() && it.key() == vkey) return true;
  }
  return false;
}

void EngineImpl::PrefetchNeeds(TxnId id, bool chains) const {
  // One lookup of `id`: a released or unknown one reads as a transaction without operations.
  for (const Op& op : ctx_.h().ops(id)) {
    if (!op.is_write()) continue;
    const KeyState* ks = keys_.Find(op.key());
    if (ks == nullptr) continue;
    if (chains) {
      ks->versions.PrefetchEnds();
    } else {
      ks->PrefetchState();
    }
  }
}

// Needs waits on the lines of each write's key state and chain end: at each hint, ask for the
// states of the hinted transaction's writes, and for the chain ends of the one hinted two hints
// before (whose states have arrived by now).
void EngineImpl::WillRelease(TxnId id) {
  PrefetchNeeds(id, /*chains=*/false);
  const TxnId earlier = will_release_[will_release_next_];
  will_release_[will_release_next_] = id;
  will_release_next_ ^= 1;
  if (earlier.valid()) PrefetchNeeds(earlier, /*chains=*/true);
}

bool EngineImpl::Release(TxnId id) {
  if (Needs(id)) return true;
  ctx_.write_index().Forget(id);
  return false;
}

void EngineImpl::MarkBytes(std::vector<uint64_t>& marks) {
  keys_.MarkBytes(marks);
  // What the spill holds, unless it expired at or before the prune point (never read again).
  spill_.MarkBytes(marks);
}

absl::Status EngineImpl::RestoreCheckpoint(const v1::EngineCheckpoint& c,
                                           std::span<const HeldTxn> held) {
  RETURN_IF_ERROR(checkpointer_.Validate(c, held));
  Grow();
  absl::flat_hash_map<uint32_t, OrderKey> fronts;
  const uint64_t evicted = checkpointer_.Apply(c, held, &fronts);
  AdvanceFinality();
  // The chains first, as they were: of the versions the held transactions wrote, those from each
  // key's oldest one in memory on (older ones had been collected). Then the transactions
  // themselves, as arrivals whose verdicts were all reported: what they leave behind (pending
  // reads, sessions' windows, snapshots to judge) is what the engine had.
  for (const HeldTxn& t : held) versions_.Reinsert(t.id, fronts);
  ctx_.set_restoring(true);
  for (const HeldTxn& t : held) DeliverOne(finality_.stream(t.stream), t.id);
  ctx_.set_restoring(false);
  // Event counters count from here (the gauges stay: they describe what is held).
  EngineStats& stats = ctx_.stats();
  stats.delivered = stats.checked = stats.duplicates = stats.late_arrivals = 0;
  stats.horizon_misses = stats.flip_flops = stats.final_violations = 0;
  stats.below_final_arrivals = 0;
  stats.snapshot_unjudged = 0;
  stats.evicted_keys = evicted;
  return absl::OkStatus();
}

uint64_t EngineImpl::MemoryBytes() const {
  return keys_.MemoryBytes() + versions_.MemoryBytes() + reads_.MemoryBytes() +
         collector_.MemoryBytes() + sessions_.MemoryBytes() + snapshots_.MemoryBytes() +
         delivered_.MemoryBytes() + spill_.MemoryBytes();
}

const EngineStats& EngineImpl::stats() {
  EngineStats& stats = ctx_.stats();
  stats.retained_txns = sessions_.entries() + reads_.pending_txns() + snapshots_.pending();
  stats.pending_snapshots = snapshots_.pending();
  stats.memory_bytes = MemoryBytes();
  stats.spill_bytes = spill_.bytes();
  stats.spill_pruned = spill_.pruned();
  stats.spill_pinned_strings = spill_.pins().size();
  stats.eviction_idle_advances = keys_.evicting() ? keys_.idle_advances() : 0;
  stats.resident_keys = keys_.table().resident();
  return stats;
}

void EngineImpl::CheckInvariants() const {
  const History& h = ctx_.h();
  ISOWATCH_CHECK(delivered_.end() <= h.size() && delivered_.base() <= h.first_txn(),
                 "the delivered set reaches past the history");
  ISOWATCH_CHECK(keys_.size() <= h.key_count() && sessions_.size() <= h.session_count(),
                 "the key table or the sessions reach past the history");
  finality_.CheckInvariants();
  spill_.CheckInvariants();
  keys_.CheckInvariants();
  sessions_.CheckInvariants();
  reads_.CheckInvariants();
  snapshots_.CheckInvariants();
  collector_.CheckInvariants();
  versions_.CheckInvariants();
  // What the engine still reads was delivered, and Needs says so.
  for (uint32_t k = 0; k < keys_.size(); ++k) {
    const KeyState* ks = keys_.table().Find(k);
    if (ks == nullptr) continue;
    for (auto it = ks->readers.begin(); it != ks->readers.end(); ++it) {
      ISOWATCH_CHECK(delivered_.Contains(it.key().txn()), "a pending read of an undelivered txn");
    }
    for (auto it = ks->versions.begin(); it != ks->versions.end(); ++it) {
      const TxnId writer(it.key().txn());
      ISOWATCH_CHECK(delivered_.Contains(writer.value()), "a version of an undelivered txn");
      ISOWATCH_CHECK(Needs(writer), "a version's writer could be released");
    }
  }
}

Engine::Engine(const History& history, EngineOptions options)
    : impl_(std::make_unique<EngineImpl>(history, std::move(options))) {}
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
bool Engine::Release(TxnId id) { return impl_->Release(id); }
void Engine::WillRelease(TxnId id) { impl_->WillRelease(id); }
void Engine::MarkBytes(std::vector<uint64_t>& marks) { impl_->MarkBytes(marks); }
void Engine::MarkKeys(std::vector<uint64_t>& marks) const { impl_->MarkKeys(marks); }
void Engine::ForgetKeys(std::span<const KeyId> keys) { impl_->ForgetKeys(keys); }
bool Engine::PinsKeys() const { return impl_->PinsKeys(); }
absl::Status Engine::SaveCheckpoint(v1::EngineCheckpoint* out) {
  return impl_->SaveCheckpoint(out);
}
absl::Status Engine::RestoreCheckpoint(const v1::EngineCheckpoint& checkpoint,
                                       std::span<const HeldTxn> held) {
  return impl_->RestoreCheckpoint(checkpoint, held);
}
void Engine::CheckInvariantsForTest() const {
  if constexpr (common::kDebugChecks) impl_->CheckInvariants();
}

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

}  // namespace isowatch::engine
