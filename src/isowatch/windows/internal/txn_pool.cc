// SPDX-License-Identifier: Apache-2.0
#include "isowatch/windows/internal/txn_pool.h"

#include <algorithm>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/history/checkpoint_codec.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::windows::internal {

namespace codec = history::checkpoint_codec;
using history::History;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;

template <typename ElementsFn>
void TxnPool::AppendBody(Rec* r, std::string_view name, std::span<const Op> ops,
                         ElementsFn elements) {
  r->name_begin = names_.size();
  r->name_size = static_cast<uint32_t>(name.size());
  names_.append(name);
  r->ops_begin = ops_.size();
  r->ops_count = static_cast<uint32_t>(ops.size());
  for (Op op : ops) {
    if (op.kind() == OpKind::kListRead) {
      std::span<const Value> from = elements(op);
      op = op.WithListOffset(elements_.size());
      elements_.insert(elements_.end(), from.begin(), from.end());
    }
    ops_.push_back(op);
  }
  recs_.push_back(*r);
}

void TxnPool::AddFromHistory(const History& src, TxnId id, Timestamp key, uint64_t arrival) {
  const history::Transaction& t = src.txn(id);
  Rec r;
  r.key = key;
  r.start = t.start;
  r.commit = t.commit;
  r.arrival = arrival;
  r.source_offset = t.source_offset;
  r.session = t.session;
  r.seq = t.seq;
  r.origin = t.origin;
  r.status = t.status;
  r.has_start = t.has_start;
  r.has_commit = t.has_commit;
  r.id_numeric = t.ext_id_numeric;
  if (t.xid_slot != 0) {
    const bool has_snapshot = src.has_snapshot(t);
    AppendXids(&r, src.xid(t),
               has_snapshot ? std::optional<history::SnapshotView>(src.snapshot(t)) : std::nullopt);
  }
  AppendBody(&r, src.txn_name(id), src.ops(t), [&](const Op& op) { return src.list_elements(op); });
}

void TxnPool::AddFromPool(const TxnPool& from, size_t i) {
  Rec r = from.recs_[i];
  r.dead = false;
  if (r.xid_begin != kNoXid) AppendXids(&r, from.xid(r), from.snapshot(r));
  AppendBody(&r, from.name(from.recs_[i]), from.ops(from.recs_[i]),
             [&](const Op& op) { return from.elements(op); });
}

void TxnPool::MaybeCompact() {
  if (dead_ == 0 || dead_ * 2 < recs_.size()) return;
  TxnPool kept;
  kept.recs_.reserve(live());
  for (size_t i = 0; i < recs_.size(); ++i) {
    if (!recs_[i].dead) kept.AddFromPool(*this, i);
  }
  *this = std::move(kept);
}

void TxnPool::MarkBytes(std::vector<uint64_t>& marks) const {
  for (const Op& op : ops_) {
    if (op.kind() != OpKind::kListRead) history::MarkBytes(op.value(), marks);
  }
  for (const Value v : elements_) history::MarkBytes(v, marks);
}

void TxnPool::Save(v1::CutterTxns& out) const {
  TxnPool packed;
  packed.recs_.reserve(live());
  for (size_t i = 0; i < recs_.size(); ++i) {
    if (!recs_[i].dead) packed.AddFromPool(*this, i);
  }
  for (const Rec& r : packed.recs_) {
    out.add_key_physical(r.key.physical);
    out.add_key_logical(r.key.logical);
    out.add_start_physical(r.start.physical);
    out.add_start_logical(r.start.logical);
    out.add_commit_physical(r.commit.physical);
    out.add_commit_logical(r.commit.logical);
    out.add_arrivals(r.arrival);
    out.add_source_offsets(r.source_offset);
    const std::string_view name = packed.name(r);
    out.add_names(name.data(), name.size());
    out.mutable_flags()->push_back(static_cast<char>(
        static_cast<uint8_t>(r.status) | (r.has_start ? codec::kTxnHasStart : 0) |
        (r.has_commit ? codec::kTxnHasCommit : 0) | (r.id_numeric ? codec::kTxnIdNumeric : 0)));
    out.add_sessions(r.session.value());
    out.add_seqs(r.seq);
    out.add_origins(r.origin);
    out.add_ops_counts(r.ops_count);
    if (r.xid_begin == kNoXid) {
      out.add_xid_sizes(0);
    } else {
      const uint64_t* p = packed.xids_.data() + r.xid_begin;
      out.add_xid_sizes(static_cast<uint32_t>(5 + p[4]));
      out.mutable_xids()->Add(p, p + 5 + p[4]);
    }
  }
  codec::SaveOps(packed.ops_, *out.mutable_ops());
  codec::SaveValues(packed.elements_, *out.mutable_list_elements());
}

absl::StatusOr<TxnPool> TxnPool::Load(const v1::CutterTxns& in, const History& src,
                                      uint64_t arrival_end, std::string_view what) {
  auto malformed = [&](std::string_view detail) {
    return absl::DataLossError(fmt::format("window cutter checkpoint: {}: {}", what, detail));
  };
  const size_t n = static_cast<size_t>(in.key_physical_size());
  for (const size_t size :
       {in.key_logical_size(), in.start_physical_size(), in.start_logical_size(),
        in.commit_physical_size(), in.commit_logical_size(), in.arrivals_size(),
        in.source_offsets_size(), in.names_size(), static_cast<int>(in.flags().size()),
        in.sessions_size(), in.seqs_size(), in.origins_size(), in.ops_counts_size(),
        in.xid_sizes_size()}) {
    if (size != n) return malformed("arrays of different lengths");
  }
  TxnPool pool;
  ASSIGN_OR_RETURN(
      pool.elements_,
      codec::LoadValues(in.list_elements(), src.byte_count(),
                        fmt::format("window cutter checkpoint: {} list element", what)));
  const size_t elements = pool.elements_.size();
  RETURN_IF_ERROR(codec::LoadOps(
      in.ops(), src.key_count(), src.byte_count(),
      [elements](uint64_t offset, uint32_t size) { return codec::InRange(offset, size, elements); },
      fmt::format("window cutter checkpoint: {}", what), pool.ops_));
  uint64_t ops_end = 0;
  uint64_t xids_end = 0;
  pool.recs_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i);
    const uint8_t f = static_cast<uint8_t>(in.flags()[i]);
    Rec r;
    r.key = Timestamp{in.key_physical(j), in.key_logical(j)};
    r.start = Timestamp{in.start_physical(j), in.start_logical(j)};
    r.commit = Timestamp{in.commit_physical(j), in.commit_logical(j)};
    r.arrival = in.arrivals(j);
    r.source_offset = in.source_offsets(j);
    r.session = SessionId(in.sessions(j));
    r.seq = in.seqs(j);
    r.status = static_cast<TxnStatus>(f & 3);
    r.has_start = (f & codec::kTxnHasStart) != 0;
    r.has_commit = (f & codec::kTxnHasCommit) != 0;
    r.id_numeric = (f & codec::kTxnIdNumeric) != 0;
    if ((f & ~codec::kTxnFlags) != 0 || (f & 3) > static_cast<uint8_t>(TxnStatus::kUnknown) ||
        in.origins(j) > UINT16_MAX || r.session.value() >= src.session_count() ||
        r.arrival >= arrival_end) {
      return malformed(fmt::format(
          "transaction {}: flags {:#x}, origin {}, session {} of {}, "
          "arrival {} of {}",
          i, f, in.origins(j), r.session.value(), src.session_count(), r.arrival, arrival_end));
    }
    r.origin = static_cast<uint16_t>(in.origins(j));
    r.ops_begin = ops_end;
    r.ops_count = in.ops_counts(j);
    if (!codec::InRange(r.ops_begin, r.ops_count, pool.ops_.size())) {
      return malformed(fmt::format("transaction {}: operations [{}, +{}) of {}", i, r.ops_begin,
                                   r.ops_count, pool.ops_.size()));
    }
    ops_end += r.ops_count;
    const uint32_t xid_size = in.xid_sizes(j);
    if (xid_size != 0) {
      const uint64_t begin = xids_end;
      if (xid_size < 5 || !codec::InRange(begin, xid_size, in.xids_size())) {
        return malformed(fmt::format("transaction {}: xids [{}, +{}) of {}", i, begin, xid_size,
                                     in.xids_size()));
      }
      const uint64_t* p = in.xids().data() + begin;
      if (p[1] > 1 || p[4] != xid_size - 5) {
        return malformed(fmt::format("transaction {}: xid entry malformed", i));
      }
      const std::span<const uint64_t> xip(p + 5, p[4]);
      if (p[1] == 1) {
        if (auto defect = history::SnapshotDefect(p[2], p[3], xip)) {
          return malformed(fmt::format("transaction {}: {}", i, *defect));
        }
        if (std::adjacent_find(xip.begin(), xip.end(), std::greater_equal<>()) != xip.end()) {
          return malformed(fmt::format("transaction {}: in-progress xids not sorted", i));
        }
      }
      r.xid_begin = pool.xids_.size();
      pool.xids_.insert(pool.xids_.end(), p, p + xid_size);
      xids_end += xid_size;
    }
    r.name_begin = pool.names_.size();
    r.name_size = static_cast<uint32_t>(in.names(j).size());
    pool.names_.append(in.names(j));
    pool.recs_.push_back(r);
  }
  if (ops_end != pool.ops_.size() || xids_end != static_cast<uint64_t>(in.xids_size())) {
    return malformed(fmt::format("{} operations and {} xids, {} and {} used", pool.ops_.size(),
                                 in.xids_size(), ops_end, xids_end));
  }
  return pool;
}

bool TxnPool::InPlacementOrder() const {
  for (size_t i = 1; i < recs_.size(); ++i) {
    if (PlacedBefore(recs_[i], recs_[i - 1])) return false;
  }
  return true;
}

size_t TxnPool::MemoryBytes() const {
  return recs_.capacity() * sizeof(Rec) + ops_.capacity() * sizeof(Op) +
         elements_.capacity() * sizeof(Value) + names_.capacity() +
         xids_.capacity() * sizeof(uint64_t);
}

void TxnPool::AppendXids(Rec* r, uint64_t xid,
                         const std::optional<history::SnapshotView>& snapshot) {
  r->xid_begin = xids_.size();
  xids_.push_back(xid);
  xids_.push_back(snapshot ? 1 : 0);
  xids_.push_back(snapshot ? snapshot->xmin : 0);
  xids_.push_back(snapshot ? snapshot->xmax : 0);
  xids_.push_back(snapshot ? snapshot->xip.size() : 0);
  if (snapshot) xids_.insert(xids_.end(), snapshot->xip.begin(), snapshot->xip.end());
}

}  // namespace isowatch::windows::internal
