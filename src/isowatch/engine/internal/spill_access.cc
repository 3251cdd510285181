// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/spill_access.h"

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

#include "isowatch/common/check.h"

namespace isowatch::engine::internal {

using history::Timestamp;
using history::Transaction;
using history::Value;

bool SpillAccess::Failed(const absl::Status& s) {
  ++ctx_.stats().spill_errors;
  if (!broken_) {
    spdlog::error("engine: the version spill failed, checks that need it go unjudged: {}",
                  static_cast<std::string>(s.message()));
  }
  broken_ = true;
  return false;
}

absl::StatusOr<std::optional<SpilledVersion>> SpillAccess::NewestBefore(KeyId key,
                                                                        const OrderKey& point) {
  return spill_->NewestBefore(Name(key), point);
}

bool SpillAccess::FindKey(KeyId key, std::optional<SpilledKey>* record) {
  if (broken_) return false;
  const ReloadTimer timer(*this);  // a read of the spill, counted and timed as a reload
  auto r = spill_->FindKey(Name(key));
  if (!r.ok()) return Failed(r.status());
  *record = *std::move(r);
  return true;
}

void SpillAccess::Put(KeyId key, bool is_list, const OrderKey& at, const VersionInfo& info,
                      const Timestamp& expires) {
  const history::History& h = ctx_.h();
  const TxnId writer(at.txn());
  const Transaction& w = h.txn(writer);
  SpilledVersion v;
  v.at = at;
  v.expires = expires;
  v.writer_start = w.has_start ? w.start : Timestamp::Min();
  v.writer_name = h.txn_name(writer);
  if (is_list) {
    ctx_.AppendsOf(writer, key, &v.appends);
  } else {
    v.value = info.value;
  }
  PinSpilled(v, +1);
  spill_->Put(Name(key), v);
  ++ctx_.stats().spilled_versions;
}

bool SpillAccess::Reexpire(KeyId key, const OrderKey& at, const Timestamp& expires) {
  // Without pruning (spill_retention 0) nothing expires: no need.
  if (ctx_.options().spill_retention == 0) return true;
  auto r = spill_->Find(Name(key), at);
  if (!r.ok()) return Failed(r.status());
  if (r->has_value()) {
    PinSpilled(**r, -1);
    (*r)->expires = expires;
    PinSpilled(**r, +1);
    spill_->Replace(Name(key), **r);
    ++rewrites_;
  }
  return true;
}

void SpillAccess::PinSpilled(const SpilledVersion& v, int delta) {
  // Only a live history under a memory budget forgets strings (Engine::MarkBytes).
  if (ctx_.options().memory_budget == 0) return;
  auto pin = [&](Value value) {
    if (!value.is_bytes()) return;
    Pin& p = pins_[value.bytes_index()];
    // Without pruning nothing leaves the spill: every pin is for good.
    if (v.expires == Timestamp::Max() || ctx_.options().spill_retention == 0) {
      p.unbounded += delta;
    } else if (delta > 0) {
      p.expires = std::max(p.expires, v.expires);
    }
  };
  pin(v.value);
  for (const Value a : v.appends) pin(a);
}

void SpillAccess::Prune(const Timestamp& p) {
  if (p == Timestamp::Max() || p <= pruned_point_) return;
  pruned_point_ = p;
  spill_->PruneUpTo(p);
}

void SpillAccess::RestorePrunedPoint(const Timestamp& p) {
  pruned_point_ = p;
  if (spill_ != nullptr && p > Timestamp::Min()) spill_->PruneUpTo(p);
}

void SpillAccess::FlushIfWritten(uint64_t writes_before) {
  if (!usable() || writes() == writes_before) return;
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status s = spill_->Flush(); !s.ok()) Failed(s);
  if (ctx_.options().on_spill_pause) {
    ctx_.options().on_spill_pause(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

absl::Status SpillAccess::FlushForCheckpoint() {
  if (broken_) {
    return absl::FailedPreconditionError(
        "engine checkpoint: the spill has failed, its contents are incomplete");
  }
  if (spill_ == nullptr) return absl::OkStatus();
  absl::Status s = spill_->Flush();
  if (!s.ok()) Failed(s);
  return s;
}

void SpillAccess::MarkBytes(std::vector<uint64_t>& marks) {
  for (auto it = pins_.begin(); it != pins_.end();) {
    if (it->second.unbounded == 0 && it->second.expires <= pruned_point_) {
      pins_.erase(it++);
    } else {
      history::MarkBytes(Value::BytesRef(it->first), marks);
      ++it;
    }
  }
}

void SpillAccess::CheckInvariants() const {
  ISOWATCH_CHECK(!broken_ || spill_ != nullptr, "a spill that is not there has failed");
  ISOWATCH_CHECK(spill_ != nullptr || (ctx_.stats().spilled_versions == 0 && pins_.empty() &&
                                       pruned_point_ == Timestamp::Min()),
                 "versions spilled without a spill");
  ISOWATCH_CHECK(ctx_.options().memory_budget > 0 || pins_.empty(),
                 "spilled strings pinned without a memory budget");
  for (const auto& [index, pin] : pins_) {
    ISOWATCH_CHECK(pin.unbounded >= 0, "a pin counts fewer than no version");
  }
}

}  // namespace isowatch::engine::internal
