// SPDX-License-Identifier: Apache-2.0
// WindowCutter::Save and WindowCutter::Restore (v1::CutterCheckpoint).
#include <algorithm>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/history/checkpoint_codec.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/windows/internal/cutter_impl.h"
#include "isowatch/windows/window_cutter.h"

namespace isowatch::windows {

namespace codec = history::checkpoint_codec;
using history::Timestamp;
using history::Value;
using internal::TxnPool;

namespace {

void SaveTimestamp(Timestamp t, v1::Timestamp* out) {
  out->set_physical(t.physical);
  out->set_logical(t.logical);
}

Timestamp LoadTimestamp(const v1::Timestamp& t) { return Timestamp{t.physical(), t.logical()}; }

}  // namespace

void WindowCutter::Save(v1::CutterCheckpoint* out) const {
  const Impl& m = *impl_;
  out->Clear();
  out->set_span(m.options.span);
  out->set_transactions(m.options.transactions);
  out->set_overlap(m.options.overlap);
  out->set_arrival(m.arrival);
  if (m.max_key) SaveTimestamp(*m.max_key, out->mutable_max_key());
  if (m.sealed_through) {
    out->set_has_sealed_through(true);
    out->set_sealed_through(*m.sealed_through);
  }
  if (m.last_point) SaveTimestamp(*m.last_point, out->mutable_last_point());
  m.staged.Save(*out->mutable_staged());
  m.open.Save(*out->mutable_open());
  m.retained.Save(*out->mutable_retained());
  std::vector<std::pair<KeyId, Value>> registers(m.registers.begin(), m.registers.end());
  std::sort(registers.begin(), registers.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Value> values;
  values.reserve(registers.size());
  for (const auto& [key, v] : registers) {
    out->add_register_keys(key.value());
    values.push_back(v);
  }
  codec::SaveValues(values, *out->mutable_register_values());
  std::vector<KeyId> list_keys;
  list_keys.reserve(m.lists.size());
  for (const auto& [key, list] : m.lists) list_keys.push_back(key);
  std::sort(list_keys.begin(), list_keys.end());
  values.clear();
  for (const KeyId key : list_keys) {
    const std::vector<Value>& list = m.lists.at(key);
    out->add_list_keys(key.value());
    out->add_list_sizes(static_cast<uint32_t>(list.size()));
    values.insert(values.end(), list.begin(), list.end());
  }
  codec::SaveValues(values, *out->mutable_list_elements());
  out->set_state_xid_end(m.state_xid_end);
  out->set_state_without_xid(m.state_without_xid);
  out->set_added(stats_.added);
  out->set_sealed(stats_.sealed);
  out->set_late(stats_.late);
  out->set_renamed(stats_.renamed);
  out->set_defects(stats_.defects);
}

absl::Status WindowCutter::Restore(const history::History& src, const v1::CutterCheckpoint& in) {
  if (stats_.added != 0 || stats_.sealed != 0) {
    return absl::FailedPreconditionError("the window cutter has taken transactions already");
  }
  Impl& m = *impl_;
  if (in.span() != m.options.span || in.transactions() != m.options.transactions ||
      in.overlap() != m.options.overlap) {
    return absl::FailedPreconditionError(fmt::format(
        "the checkpoint's windows were cut by {} with overlap {}; these options cut by {} with "
        "overlap {}",
        in.span() > 0 ? fmt::format("commit time, {} per window", in.span())
                      : fmt::format("transactions, {} per window", in.transactions()),
        in.overlap(),
        m.options.span > 0 ? fmt::format("commit time, {} per window", m.options.span)
                           : fmt::format("transactions, {} per window", m.options.transactions),
        m.options.overlap));
  }
  auto malformed = [](std::string_view detail) {
    return absl::DataLossError(fmt::format("window cutter checkpoint: {}", detail));
  };
  auto fresh = std::make_unique<Impl>(options_, &stats_);
  Impl& c = *fresh;
  c.arrival = in.arrival();
  if (in.has_max_key()) c.max_key = LoadTimestamp(in.max_key());
  if (in.has_sealed_through()) c.sealed_through = in.sealed_through();
  if (in.has_last_point()) c.last_point = LoadTimestamp(in.last_point());
  if (c.span_mode() ? c.last_point.has_value() : c.sealed_through.has_value()) {
    return malformed("a seal point of the other way of cutting");
  }
  ASSIGN_OR_RETURN(c.staged, TxnPool::Load(in.staged(), src, c.arrival, "staged"));
  ASSIGN_OR_RETURN(c.open, TxnPool::Load(in.open(), src, c.arrival, "open"));
  ASSIGN_OR_RETURN(c.retained, TxnPool::Load(in.retained(), src, c.arrival, "retained"));
  if (!c.open.InPlacementOrder() || !c.retained.InPlacementOrder() ||
      (c.span_mode() && !c.open.empty())) {
    return malformed("open or retained transactions out of placement order");
  }
  auto check_keys = [&](const google::protobuf::RepeatedField<uint32_t>& keys,
                        std::string_view what) -> absl::Status {
    for (int i = 0; i < keys.size(); ++i) {
      if (keys[i] >= src.key_count() || (i > 0 && keys[i] <= keys[i - 1])) {
        return malformed(
            fmt::format("{} {}: key {} of {}, or out of order", what, i, keys[i], src.key_count()));
      }
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(check_keys(in.register_keys(), "register"));
  RETURN_IF_ERROR(check_keys(in.list_keys(), "list"));
  ASSIGN_OR_RETURN(const std::vector<Value> registers,
                   codec::LoadValues(in.register_values(), src.byte_count(),
                                     "window cutter checkpoint: register"));
  if (registers.size() != static_cast<size_t>(in.register_keys_size())) {
    return malformed(
        fmt::format("{} registers for {} values", in.register_keys_size(), registers.size()));
  }
  c.registers.reserve(registers.size());
  for (size_t i = 0; i < registers.size(); ++i) {
    c.registers.emplace(KeyId(in.register_keys(static_cast<int>(i))), registers[i]);
  }
  ASSIGN_OR_RETURN(const std::vector<Value> elements,
                   codec::LoadValues(in.list_elements(), src.byte_count(),
                                     "window cutter checkpoint: list element"));
  if (in.list_sizes_size() != in.list_keys_size()) {
    return malformed(
        fmt::format("{} lists for {} sizes", in.list_keys_size(), in.list_sizes_size()));
  }
  uint64_t used = 0;
  for (int i = 0; i < in.list_keys_size(); ++i) {
    const uint32_t size = in.list_sizes(i);
    if (!codec::InRange(used, size, elements.size())) {
      return malformed(
          fmt::format("list {}: elements [{}, +{}) of {}", i, used, size, elements.size()));
    }
    std::vector<Value>& list = c.lists[KeyId(in.list_keys(i))];
    list.assign(elements.begin() + static_cast<ptrdiff_t>(used),
                elements.begin() + static_cast<ptrdiff_t>(used + size));
    c.list_bytes += list.capacity() * sizeof(Value);
    used += size;
  }
  if (used != elements.size()) {
    return malformed(fmt::format("{} list elements, {} used", elements.size(), used));
  }
  c.state_xid_end = in.state_xid_end();
  c.state_without_xid = in.state_without_xid();
  const uint64_t staged = c.staged.live() + c.open.live();
  if (in.added() < staged + in.late()) {
    return malformed(
        fmt::format("{} taken, fewer than {} staged and {} late", in.added(), staged, in.late()));
  }
  impl_ = std::move(fresh);
  stats_.added = in.added();
  stats_.staged = staged;
  stats_.sealed = in.sealed();
  stats_.late = in.late();
  stats_.renamed = in.renamed();
  stats_.defects = in.defects();
  stats_.memory_bytes = MemoryBytes();
  return absl::OkStatus();
}
}  // namespace isowatch::windows
