// SPDX-License-Identifier: Apache-2.0
// HistoryBuilder::SaveLive and RestoreLive: a live history to and from a v1::HistoryCheckpoint,
// whose layout proto/isowatch/v1/history_checkpoint.proto documents. Saving copies the pools and
// records as they are; restoring checks every index against the pool History's accessors would
// take it from, so that a malformed checkpoint is refused rather than read out of bounds.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/history/checkpoint_codec.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history_checkpoint.pb.h"

namespace isowatch::history {
namespace {

// Written; RestoreLive also reads kVersionNoKeyLists (the same layout without key lists).
constexpr uint32_t kVersion = 2;
constexpr uint32_t kVersionNoKeyLists = 1;

// Flag bits (history_checkpoint.proto).
using checkpoint_codec::kTxnFlags;
using checkpoint_codec::kTxnHasCommit;
using checkpoint_codec::kTxnHasStart;
using checkpoint_codec::kTxnIdNumeric;
constexpr uint8_t kKeyInt = 0x01;
constexpr uint8_t kKeyList = 0x02;
constexpr uint8_t kKeyForgotten = 0x04;

template <typename... Args>
absl::Status Malformed(fmt::format_string<Args...> format, Args&&... args) {
  return absl::DataLossError(
      fmt::format("history checkpoint: {}", fmt::format(format, std::forward<Args>(args)...)));
}

using checkpoint_codec::InRange;

// Whether every array of a table has `n` entries.
template <typename... Sizes>
bool AllSized(size_t n, Sizes... sizes) {
  return ((static_cast<size_t>(sizes) == n) && ...);
}

uint8_t Byte(const std::string& bytes, size_t i) { return static_cast<uint8_t>(bytes[i]); }

void SaveValues(std::span<const Value> values, v1::CheckpointValues& out) {
  checkpoint_codec::SaveValues(values, out);
}

absl::StatusOr<std::vector<Value>> LoadValues(const v1::CheckpointValues& in, size_t byte_count,
                                              std::string_view what) {
  return checkpoint_codec::LoadValues(in, byte_count, fmt::format("history checkpoint: {}", what));
}

void SavePool(const StringPool& pool, google::protobuf::RepeatedPtrField<std::string>& out) {
  out.Reserve(static_cast<int>(pool.size()));
  for (uint32_t i = 0; i < pool.size(); ++i) {
    const std::string_view s = pool.Get(i);
    out.Add()->assign(s.data(), s.size());
  }
}

// Interns `strings` in order, so that string i gets index i.
absl::Status LoadPool(const google::protobuf::RepeatedPtrField<std::string>& strings,
                      StringPool& pool, std::string_view what) {
  pool.Reserve(static_cast<size_t>(strings.size()));
  for (int i = 0; i < strings.size(); ++i) {
    if (!pool.Intern(strings[i]).second) return Malformed("{} {} repeats an earlier one", what, i);
  }
  return absl::OkStatus();
}

// Keys listed in increasing order, each below `key_count`.
absl::Status CheckKeys(const google::protobuf::RepeatedField<uint32_t>& keys, size_t key_count,
                       std::string_view what) {
  for (int i = 0; i < keys.size(); ++i) {
    if (keys[i] >= key_count) return Malformed("{} {}: key {} of {}", what, i, keys[i], key_count);
    if (i > 0 && keys[i] <= keys[i - 1]) return Malformed("{} {}: keys out of order", what, i);
  }
  return absl::OkStatus();
}

template <typename Map>
auto Sorted(const Map& map) {
  std::vector<std::pair<typename Map::key_type, typename Map::mapped_type>> out(map.begin(),
                                                                                map.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace

struct HistoryBuilder::Checkpoint {
  // Sizes of the pools that records and operations index; History's accessors choose between a
  // pool and its retired counterpart by the kRetired* marks.
  struct Pools {
    size_t ops = 0;
    size_t retired_ops = 0;
    size_t list = 0;
    size_t retired_list = 0;
    size_t xids = 0;
    size_t retired_xids = 0;
    size_t keys = 0;
    size_t bytes = 0;
    size_t sessions = 0;
  };
  // A table as loaded.
  struct Table {
    std::vector<Transaction> txns;
    std::vector<Op> ops;
    std::vector<Value> list;
    std::vector<XidEntry> xids;
    std::vector<uint64_t> xip;
  };

  static void Save(const HistoryBuilder& b, v1::HistoryCheckpoint& out);
  static void SaveTable(std::span<const Transaction> txns, std::span<const Op> ops,
                        std::span<const Value> list, std::span<const XidEntry> xids,
                        std::span<const uint64_t> xip, v1::CheckpointTxnTable& out);
  static absl::Status Restore(const v1::HistoryCheckpoint& in, HistoryBuilder& b);
  // The pools of `in`, checked by themselves; LoadRecords checks what indexes them.
  static absl::Status LoadPools(const v1::CheckpointTxnTable& in, size_t byte_count,
                                std::string_view what, Table& out);
  static absl::Status LoadRecords(const v1::CheckpointTxnTable& in, const Pools& pools,
                                  std::string_view what, Table& out);
  static absl::Status LoadOps(const v1::CheckpointOps& in, const Pools& pools,
                              std::string_view what, std::vector<Op>& out);
  static absl::Status LoadTxns(const v1::CheckpointTxns& in, const Pools& pools,
                               std::string_view what, std::vector<Transaction>& out);
  static absl::Status LoadInitial(const v1::HistoryCheckpoint& in, History& h);
  static absl::Status LoadKeyLists(const v1::HistoryCheckpoint& in, History& h);
  static absl::Status LoadLiveState(const v1::HistoryCheckpoint& in, HistoryBuilder& b);
};

void HistoryBuilder::Checkpoint::SaveTable(std::span<const Transaction> txns,
                                           std::span<const Op> ops, std::span<const Value> list,
                                           std::span<const XidEntry> xids,
                                           std::span<const uint64_t> xip,
                                           v1::CheckpointTxnTable& out) {
  v1::CheckpointTxns& t = *out.mutable_txns();
  for (const Transaction& r : txns) {
    t.add_ext_ids(r.ext_id);
    t.mutable_flags()->push_back(static_cast<char>(
        static_cast<uint8_t>(r.status) | (r.has_start ? kTxnHasStart : 0) |
        (r.has_commit ? kTxnHasCommit : 0) | (r.ext_id_numeric ? kTxnIdNumeric : 0)));
    t.add_sessions(r.session.value());
    t.add_seqs(r.seq);
    t.add_session_prevs(r.session_prev.value() + 1);  // the invalid id wraps to 0
    t.add_origins(r.origin);
    t.add_start_physical(r.start.physical);
    t.add_start_logical(r.start.logical);
    t.add_commit_physical(r.commit.physical);
    t.add_commit_logical(r.commit.logical);
    t.add_ops_begin(r.ops_begin);
    t.add_ops_count(r.ops_count);
    t.add_xid_slots(r.xid_slot);
    t.add_source_offsets(r.source_offset);
  }
  checkpoint_codec::SaveOps(ops, *out.mutable_ops());
  SaveValues(list, *out.mutable_list_elements());
  v1::CheckpointXids& x = *out.mutable_xids();
  for (const XidEntry& e : xids) {
    x.add_xids(e.xid);
    x.add_xmins(e.xmin);
    x.add_xmaxs(e.xmax);
    x.add_xip_begins(e.xip_begin);
    x.add_xip_counts(e.xip_count);
    x.mutable_has_snapshot()->push_back(e.has_snapshot ? 1 : 0);
  }
  out.mutable_xip()->Add(xip.begin(), xip.end());
}

void HistoryBuilder::Checkpoint::Save(const HistoryBuilder& b, v1::HistoryCheckpoint& out) {
  const History& h = b.history_;
  out.Clear();
  out.set_version(kVersion);
  out.set_source(h.source_);
  out.set_data_model(static_cast<uint32_t>(h.data_model_));

  SavePool(h.bytes_, *out.mutable_byte_strings());
  const std::span<const uint32_t> forgotten = h.bytes_.forgotten_indices();
  out.mutable_forgotten_byte_strings()->Add(forgotten.begin(), forgotten.end());
  out.mutable_key_flags()->reserve(h.keys_.size());
  for (const KeyInfo& k : h.keys_) {
    out.mutable_key_flags()->push_back(static_cast<char>(
        k.forgotten ? kKeyForgotten : (k.is_int ? kKeyInt : 0) | (k.is_list ? kKeyList : 0)));
    out.add_key_payloads(k.payload);
  }
  out.mutable_forgotten_keys()->Add(h.free_keys_.begin(), h.free_keys_.end());
  SavePool(h.sessions_, *out.mutable_session_names());
  for (const uint8_t numeric : h.session_numeric_) {
    out.mutable_session_numeric()->push_back(static_cast<char>(numeric));
  }

  SavePool(h.ext_ids_, *out.mutable_txn_names());
  out.set_first_txn(h.first_txn_);
  SaveTable(h.txns_, h.ops_, h.list_pool_, h.xids_, h.xip_pool_, *out.mutable_held());
  std::vector<Transaction> retired;
  retired.reserve(h.retired_.size());
  for (const auto& [id, r] : Sorted(h.retired_)) {
    out.add_retired_ids(id);
    out.add_retired_names(r.name);
    retired.push_back(r.txn);
  }
  SaveTable(retired, h.retired_ops_, h.retired_list_, h.retired_xids_, h.retired_xip_,
            *out.mutable_retired());
  out.set_snapshot_txns(h.snapshot_txns_);

  const InitialState& initial = h.initial_;
  SaveValues(std::span<const Value>(&initial.default_value, 1), *out.mutable_initial_default());
  std::vector<Value> values;
  for (const auto& [key, value] : Sorted(initial.registers)) {
    out.add_initial_register_keys(key.value());
    values.push_back(value);
  }
  SaveValues(values, *out.mutable_initial_register_values());
  for (const auto& [key, range] : Sorted(initial.lists)) {
    out.add_initial_list_keys(key.value());
    out.add_initial_list_offsets(range.offset);
    out.add_initial_list_sizes(range.size);
  }
  SaveValues(h.initial_list_pool_, *out.mutable_initial_list_elements());
  std::vector<KeyId> versions(initial.versions.begin(), initial.versions.end());
  std::sort(versions.begin(), versions.end());
  for (const KeyId key : versions) out.add_initial_version_keys(key.value());

  std::vector<Value> key_list_elements;
  for (size_t k = 0; k < h.key_lists_.size(); ++k) {
    const std::vector<Value>& list = h.key_lists_[k];
    if (list.empty()) continue;
    out.add_key_list_keys(static_cast<uint32_t>(k));
    out.add_key_list_sizes(static_cast<uint32_t>(list.size()));
    key_list_elements.insert(key_list_elements.end(), list.begin(), list.end());
  }
  SaveValues(key_list_elements, *out.mutable_key_list_elements());

  out.mutable_live_register()->assign(b.live_register_.begin(), b.live_register_.end());
  out.mutable_live_session_mode()->assign(b.live_session_mode_.begin(), b.live_session_mode_.end());
  out.mutable_live_next_seq()->Add(b.live_next_seq_.begin(), b.live_next_seq_.end());
}

absl::Status HistoryBuilder::Checkpoint::LoadPools(const v1::CheckpointTxnTable& in,
                                                   size_t byte_count, std::string_view what,
                                                   Table& out) {
  ASSIGN_OR_RETURN(const std::vector<Value> list, LoadValues(in.list_elements(), byte_count,
                                                             fmt::format("{} list element", what)));
  out.list.assign(list.begin(), list.end());
  out.xip.assign(in.xip().begin(), in.xip().end());
  const v1::CheckpointXids& x = in.xids();
  const size_t n = static_cast<size_t>(x.xids_size());
  if (!AllSized(n, x.xmins_size(), x.xmaxs_size(), x.xip_begins_size(), x.xip_counts_size(),
                x.has_snapshot().size())) {
    return Malformed("{} xids: arrays of different lengths", what);
  }
  out.xids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i);
    const XidEntry e{.xid = x.xids(j),
                     .xmin = x.xmins(j),
                     .xmax = x.xmaxs(j),
                     .xip_begin = x.xip_begins(j),
                     .xip_count = x.xip_counts(j),
                     .has_snapshot = Byte(x.has_snapshot(), i) == 1};
    if (Byte(x.has_snapshot(), i) > 1 || !InRange(e.xip_begin, e.xip_count, out.xip.size())) {
      return Malformed("{} xid {}: in-progress xids [{}, +{}) of {}", what, i, e.xip_begin,
                       e.xip_count, out.xip.size());
    }
    if (e.has_snapshot) {
      const std::span<const uint64_t> xip =
          std::span<const uint64_t>(out.xip).subspan(e.xip_begin, e.xip_count);
      if (auto defect = SnapshotDefect(e.xmin, e.xmax, xip)) {
        return Malformed("{} xid {}: {}", what, i, *defect);
      }
      if (std::adjacent_find(xip.begin(), xip.end(), std::greater_equal<>()) != xip.end()) {
        return Malformed("{} xid {}: in-progress xids not sorted and distinct", what, i);
      }
    }
    out.xids.push_back(e);
  }
  return absl::OkStatus();
}

absl::Status HistoryBuilder::Checkpoint::LoadOps(const v1::CheckpointOps& in, const Pools& pools,
                                                 std::string_view what, std::vector<Op>& out) {
  // As History::list_elements takes them; reads of key lists are checked by LoadKeyLists.
  return checkpoint_codec::LoadOps(
      in, pools.keys, pools.bytes,
      [&pools](uint64_t offset, uint32_t size) {
        if (offset == History::kKeyList) return size > 0;
        return offset >= History::kRetiredList
                   ? InRange(offset - History::kRetiredList, size, pools.retired_list)
                   : InRange(offset, size, pools.list);
      },
      fmt::format("history checkpoint: {}", what), out);
}

absl::Status HistoryBuilder::Checkpoint::LoadTxns(const v1::CheckpointTxns& in, const Pools& pools,
                                                  std::string_view what,
                                                  std::vector<Transaction>& out) {
  const size_t n = static_cast<size_t>(in.ext_ids_size());
  if (!AllSized(n, in.flags().size(), in.sessions_size(), in.seqs_size(), in.session_prevs_size(),
                in.origins_size(), in.start_physical_size(), in.start_logical_size(),
                in.commit_physical_size(), in.commit_logical_size(), in.ops_begin_size(),
                in.ops_count_size(), in.xid_slots_size(), in.source_offsets_size())) {
    return Malformed("{} transactions: arrays of different lengths", what);
  }
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i);
    const uint8_t f = Byte(in.flags(), i);
    Transaction t;
    t.ext_id = in.ext_ids(j);
    t.ext_id_numeric = (f & kTxnIdNumeric) != 0;
    t.session = SessionId(in.sessions(j));
    t.seq = in.seqs(j);
    t.session_prev = TxnId(in.session_prevs(j) - 1);  // 0 wraps to the invalid id
    t.status = static_cast<TxnStatus>(f & 3);
    t.has_start = (f & kTxnHasStart) != 0;
    t.has_commit = (f & kTxnHasCommit) != 0;
    t.origin = static_cast<uint16_t>(in.origins(j));
    t.start = Timestamp{in.start_physical(j), in.start_logical(j)};
    t.commit = Timestamp{in.commit_physical(j), in.commit_logical(j)};
    t.ops_begin = in.ops_begin(j);
    t.ops_count = in.ops_count(j);
    t.xid_slot = in.xid_slots(j);
    t.source_offset = in.source_offsets(j);
    if ((f & ~kTxnFlags) != 0 || (f & 3) > static_cast<uint8_t>(TxnStatus::kUnknown) ||
        in.origins(j) > UINT16_MAX) {
      return Malformed("{} transaction {}: flags {:#x}, origin {}", what, i, f, in.origins(j));
    }
    if (t.session.value() >= pools.sessions) {
      return Malformed("{} transaction {}: session {} of {}", what, i, t.session.value(),
                       pools.sessions);
    }
    // As History::ops and History::XidAt take them.
    const bool ops_ok =
        t.ops_begin >= History::kRetiredOps
            ? InRange(t.ops_begin - History::kRetiredOps, t.ops_count, pools.retired_ops)
            : InRange(t.ops_begin, t.ops_count, pools.ops);
    if (!ops_ok) {
      return Malformed("{} transaction {}: operations [{}, +{}) of {} and {} retired", what, i,
                       t.ops_begin, t.ops_count, pools.ops, pools.retired_ops);
    }
    const uint32_t x = t.xid_slot - 1;
    if (t.xid_slot != 0 &&
        (x >= History::kRetiredXid ? x - History::kRetiredXid >= pools.retired_xids
                                   : x >= pools.xids)) {
      return Malformed("{} transaction {}: xid slot {} of {} and {} retired", what, i, t.xid_slot,
                       pools.xids, pools.retired_xids);
    }
    out.push_back(t);
  }
  return absl::OkStatus();
}

absl::Status HistoryBuilder::Checkpoint::LoadRecords(const v1::CheckpointTxnTable& in,
                                                     const Pools& pools, std::string_view what,
                                                     Table& out) {
  RETURN_IF_ERROR(LoadOps(in.ops(), pools, what, out.ops));
  return LoadTxns(in.txns(), pools, what, out.txns);
}

absl::Status HistoryBuilder::Checkpoint::LoadInitial(const v1::HistoryCheckpoint& in, History& h) {
  const size_t keys = h.keys_.size();
  const size_t bytes = h.bytes_.size();
  InitialState& initial = h.initial_;
  ASSIGN_OR_RETURN(const std::vector<Value> default_value,
                   LoadValues(in.initial_default(), bytes, "initial default value"));
  if (default_value.size() != 1) {
    return Malformed("{} initial default values", default_value.size());
  }
  initial.default_value = default_value[0];

  RETURN_IF_ERROR(CheckKeys(in.initial_register_keys(), keys, "initial register"));
  ASSIGN_OR_RETURN(const std::vector<Value> values,
                   LoadValues(in.initial_register_values(), bytes, "initial register"));
  if (values.size() != static_cast<size_t>(in.initial_register_keys_size())) {
    return Malformed("{} initial registers for {} values", in.initial_register_keys_size(),
                     values.size());
  }
  for (size_t i = 0; i < values.size(); ++i) {
    initial.registers.emplace(KeyId(in.initial_register_keys(static_cast<int>(i))), values[i]);
  }

  RETURN_IF_ERROR(CheckKeys(in.initial_list_keys(), keys, "initial list"));
  ASSIGN_OR_RETURN(h.initial_list_pool_,
                   LoadValues(in.initial_list_elements(), bytes, "initial list element"));
  const size_t lists = static_cast<size_t>(in.initial_list_keys_size());
  if (!AllSized(lists, in.initial_list_offsets_size(), in.initial_list_sizes_size())) {
    return Malformed("initial lists: arrays of different lengths");
  }
  for (size_t i = 0; i < lists; ++i) {
    const int j = static_cast<int>(i);
    const InitialState::ListRange range{.offset = in.initial_list_offsets(j),
                                        .size = in.initial_list_sizes(j)};
    if (!InRange(range.offset, range.size, h.initial_list_pool_.size())) {
      return Malformed("initial list {}: elements [{}, +{}) of {}", i, range.offset, range.size,
                       h.initial_list_pool_.size());
    }
    initial.lists.emplace(KeyId(in.initial_list_keys(j)), range);
  }

  RETURN_IF_ERROR(CheckKeys(in.initial_version_keys(), keys, "initial version"));
  for (const uint32_t key : in.initial_version_keys()) initial.versions.insert(KeyId(key));
  return absl::OkStatus();
}

absl::Status HistoryBuilder::Checkpoint::LoadKeyLists(const v1::HistoryCheckpoint& in, History& h) {
  RETURN_IF_ERROR(CheckKeys(in.key_list_keys(), h.keys_.size(), "key list"));
  ASSIGN_OR_RETURN(const std::vector<Value> elements,
                   LoadValues(in.key_list_elements(), h.bytes_.size(), "key list element"));
  const size_t lists = static_cast<size_t>(in.key_list_keys_size());
  if (!AllSized(lists, in.key_list_sizes_size())) {
    return Malformed("{} key lists for {} sizes", lists, in.key_list_sizes_size());
  }
  h.key_lists_.resize(lists == 0 ? 0 : in.key_list_keys(static_cast<int>(lists - 1)) + 1);
  uint64_t at = 0;
  for (size_t i = 0; i < lists; ++i) {
    const int j = static_cast<int>(i);
    const uint32_t size = in.key_list_sizes(j);
    const KeyId key(in.key_list_keys(j));
    if (size == 0 || !InRange(at, size, elements.size()) || h.keys_[key.value()].forgotten) {
      return Malformed("key list {} (key {}): {} elements from {} of {}, or a forgotten key", i,
                       key.value(), size, at, elements.size());
    }
    h.key_lists_[key.value()].assign(elements.begin() + static_cast<ptrdiff_t>(at),
                                     elements.begin() + static_cast<ptrdiff_t>(at + size));
    at += size;
  }
  if (at != elements.size()) {
    return Malformed("key lists: {} elements for {} in the lists", elements.size(), at);
  }
  // Every read of a key list within it (retired reads never share one).
  for (const std::vector<Op>* ops : {&h.ops_, &h.retired_ops_}) {
    for (const Op& op : *ops) {
      if (op.kind() != OpKind::kListRead || !History::SharesKeyList(op)) continue;
      if (ops == &h.retired_ops_ || op.list_size() > h.key_list(op.key()).size()) {
        return Malformed("a {} read of {} elements of key {}'s list of {}",
                         ops == &h.retired_ops_ ? "retired" : "held", op.list_size(),
                         op.key().value(), h.key_list(op.key()).size());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HistoryBuilder::Checkpoint::LoadLiveState(const v1::HistoryCheckpoint& in,
                                                       HistoryBuilder& b) {
  const std::string& registers = in.live_register();
  const std::string& modes = in.live_session_mode();
  if (registers.size() > b.history_.keys_.size() ||
      std::any_of(registers.begin(), registers.end(),
                  [](char c) { return static_cast<uint8_t>(c) > kLiveRegister; })) {
    return Malformed("live register marks: {} bytes for {} keys, or a mark other than 0 or 1",
                     registers.size(), b.history_.keys_.size());
  }
  if (modes.size() > b.history_.session_count() ||
      static_cast<size_t>(in.live_next_seq_size()) != modes.size() ||
      std::any_of(modes.begin(), modes.end(), [](char c) { return static_cast<uint8_t>(c) > 2; })) {
    return Malformed(
        "live session modes: {} modes and {} next positions for {} sessions, or a mode above 2",
        modes.size(), in.live_next_seq_size(), b.history_.session_count());
  }
  b.live_register_.assign(registers.begin(), registers.end());
  b.live_session_mode_.assign(modes.begin(), modes.end());
  b.live_next_seq_.assign(in.live_next_seq().begin(), in.live_next_seq().end());
  return absl::OkStatus();
}

absl::Status HistoryBuilder::Checkpoint::Restore(const v1::HistoryCheckpoint& in,
                                                 HistoryBuilder& b) {
  History& h = b.history_;
  b.live_ = true;
  h.source_ = in.source();
  if (in.data_model() > static_cast<uint32_t>(DataModel::kMixed)) {
    return Malformed("data model {}", in.data_model());
  }
  h.data_model_ = static_cast<DataModel>(in.data_model());

  // Pools, in index order.
  {
    std::vector<std::string_view> strings(in.byte_strings().begin(), in.byte_strings().end());
    const std::span<const uint32_t> forgotten(in.forgotten_byte_strings().data(),
                                              in.forgotten_byte_strings().size());
    if (!h.bytes_.Restore(strings, forgotten)) {
      return Malformed(
          "{} byte strings, {} of them forgotten: a string held repeats, or a "
          "forgotten index is out of range or repeats",
          strings.size(), forgotten.size());
    }
  }
  const std::string& key_flags = in.key_flags();
  if (!AllSized(key_flags.size(), in.key_payloads_size())) {
    return Malformed("{} key flags for {} key payloads", key_flags.size(), in.key_payloads_size());
  }
  h.keys_.reserve(key_flags.size());
  size_t forgotten_keys = 0;
  for (size_t i = 0; i < key_flags.size(); ++i) {
    const uint8_t f = Byte(key_flags, i);
    const KeyInfo info{.is_int = (f & kKeyInt) != 0,
                       .is_list = (f & kKeyList) != 0,
                       .payload = in.key_payloads(static_cast<int>(i))};
    const KeyId id(static_cast<uint32_t>(i));
    if (f == kKeyForgotten && info.payload == 0) {
      h.keys_.push_back(KeyInfo{.forgotten = true});
      ++forgotten_keys;
      continue;
    }
    const bool bytes_ok = info.is_int || (info.payload >= 0 &&
                                          static_cast<uint64_t>(info.payload) < h.bytes_.size() &&
                                          !h.bytes_.forgotten(static_cast<uint32_t>(info.payload)));
    if ((f & ~(kKeyInt | kKeyList)) != 0 || !bytes_ok) {
      return Malformed("key {}: flags {:#x}, payload {} ({} byte strings)", i, f, info.payload,
                       h.bytes_.size());
    }
    const bool added =
        info.is_int ? h.int_keys_.try_emplace(info.payload, id).second
                    : h.bytes_keys_.try_emplace(static_cast<uint32_t>(info.payload), id).second;
    if (!added) return Malformed("key {} repeats an earlier one", i);
    h.keys_.push_back(info);
  }
  // The free list: every forgotten key once.
  if (static_cast<size_t>(in.forgotten_keys_size()) != forgotten_keys) {
    return Malformed("{} forgotten keys listed, {} flagged", in.forgotten_keys_size(),
                     forgotten_keys);
  }
  {
    std::vector<uint8_t> listed(h.keys_.size(), 0);
    for (const uint32_t k : in.forgotten_keys()) {
      if (k >= h.keys_.size() || !h.keys_[k].forgotten || listed[k]++ != 0) {
        return Malformed("forgotten key {}: not a forgotten key, or listed twice", k);
      }
    }
    h.free_keys_.assign(in.forgotten_keys().begin(), in.forgotten_keys().end());
  }
  RETURN_IF_ERROR(LoadPool(in.session_names(), h.sessions_, "session"));
  if (static_cast<size_t>(in.session_numeric().size()) != h.sessions_.size()) {
    return Malformed("{} sessions for {} numeric flags", h.sessions_.size(),
                     in.session_numeric().size());
  }
  for (uint32_t i = 0; i < h.sessions_.size(); ++i) {
    h.session_names_.push_back(i);
    h.session_numeric_.push_back(Byte(in.session_numeric(), i) != 0 ? 1 : 0);
  }
  RETURN_IF_ERROR(LoadPool(in.txn_names(), h.ext_ids_, "transaction id"));

  // Both tables' pools first: a record or operation of either may index the other's.
  Table held;
  Table retired;
  RETURN_IF_ERROR(LoadPools(in.held(), h.bytes_.size(), "held", held));
  RETURN_IF_ERROR(LoadPools(in.retired(), h.bytes_.size(), "retired", retired));
  const Pools pools{.ops = static_cast<size_t>(in.held().ops().flags().size()),
                    .retired_ops = static_cast<size_t>(in.retired().ops().flags().size()),
                    .list = held.list.size(),
                    .retired_list = retired.list.size(),
                    .xids = held.xids.size(),
                    .retired_xids = retired.xids.size(),
                    .keys = h.keys_.size(),
                    .bytes = h.bytes_.size(),
                    .sessions = h.sessions_.size()};
  RETURN_IF_ERROR(LoadRecords(in.held(), pools, "held", held));
  RETURN_IF_ERROR(LoadRecords(in.retired(), pools, "retired", retired));

  // Held transactions: ids first_txn on, source ids interned in transaction order
  // (History::FindTxn).
  if (in.first_txn() > kTxnIdLimit - held.txns.size()) {
    return Malformed("transactions {} + {} overflow the ids", in.first_txn(), held.txns.size());
  }
  for (size_t i = 0; i < held.txns.size(); ++i) {
    const uint32_t ext = held.txns[i].ext_id;
    if (ext >= h.ext_ids_.size() || (i > 0 && ext <= held.txns[i - 1].ext_id)) {
      return Malformed("held transaction {}: id {} of {}, or out of order", i, ext,
                       h.ext_ids_.size());
    }
  }
  h.first_txn_ = in.first_txn();
  h.txns_ = std::move(held.txns);
  h.ops_ = std::move(held.ops);
  h.list_pool_ = std::move(held.list);
  h.xids_ = std::move(held.xids);
  h.xip_pool_ = std::move(held.xip);

  // Retired transactions: released, so below first_txn.
  const size_t n_retired = static_cast<size_t>(in.retired_ids_size());
  if (!AllSized(n_retired, in.retired_names_size(), retired.txns.size())) {
    return Malformed("{} retired ids, {} names and {} records", n_retired, in.retired_names_size(),
                     retired.txns.size());
  }
  for (size_t i = 0; i < n_retired; ++i) {
    const int j = static_cast<int>(i);
    const uint64_t id = in.retired_ids(j);
    if (id >= h.first_txn_ || (i > 0 && id <= in.retired_ids(j - 1))) {
      return Malformed("retired transaction {}: id {} out of order or not below {}", i, id,
                       h.first_txn_);
    }
    History::Retired r{.txn = retired.txns[i], .name = in.retired_names(j)};
    // Counted as ReleaseLive counts them.
    if (r.name.capacity() > std::string().capacity()) {
      h.retired_name_bytes_ += r.name.capacity() + 1;
    }
    h.retired_.emplace(id, std::move(r));
  }
  h.retired_ops_ = std::move(retired.ops);
  h.retired_list_ = std::move(retired.list);
  h.retired_xids_ = std::move(retired.xids);
  h.retired_xip_ = std::move(retired.xip);
  h.snapshot_txns_ = in.snapshot_txns();
  // Live transactions carry no real time; which have timestamps is told by those still held.
  for (const Transaction& t : h.txns_) {
    h.start_txns_ += t.has_start ? 1 : 0;
    h.commit_txns_ += t.has_commit ? 1 : 0;
  }
  for (const auto& [id, r] : h.retired_) {
    h.start_txns_ += r.txn.has_start ? 1 : 0;
    h.commit_txns_ += r.txn.has_commit ? 1 : 0;
  }

  RETURN_IF_ERROR(LoadInitial(in, h));
  RETURN_IF_ERROR(LoadKeyLists(in, h));
  if (!h.free_keys_.empty()) {
    // A key held by a transaction or the initial state was never forgotten.
    auto forgotten = [&h](KeyId k) { return h.keys_[k.value()].forgotten; };
    for (const std::vector<Op>* ops : {&h.ops_, &h.retired_ops_}) {
      for (const Op& op : *ops) {
        if (forgotten(op.key()))
          return Malformed("an operation on forgotten key {}", op.key().value());
      }
    }
    for (const auto& [key, v] : h.initial_.registers) {
      if (forgotten(key)) return Malformed("forgotten key {} has an initial value", key.value());
    }
    for (const auto& [key, range] : h.initial_.lists) {
      if (forgotten(key)) return Malformed("forgotten key {} has an initial list", key.value());
    }
  }
  return LoadLiveState(in, b);
}

void HistoryBuilder::SaveLive(v1::HistoryCheckpoint* out) const { Checkpoint::Save(*this, *out); }

absl::Status HistoryBuilder::RestoreLive(const v1::HistoryCheckpoint& checkpoint) {
  const History& h = history_;
  if (open_ || finished_ || h.size() != 0 || !h.keys_.empty() || h.bytes_.size() != 0 ||
      h.sessions_.size() != 0 || h.ext_ids_.size() != 0 || !h.initial_list_pool_.empty() ||
      !h.initial_.registers.empty() || !h.initial_.versions.empty() || !h.key_lists_.empty()) {
    return absl::FailedPreconditionError(
        "a history checkpoint is restored into a fresh builder only");
  }
  if (checkpoint.version() != kVersion && checkpoint.version() != kVersionNoKeyLists) {
    return absl::FailedPreconditionError(
        fmt::format("history checkpoint version {}; this build reads versions {} and {}",
                    checkpoint.version(), kVersionNoKeyLists, kVersion));
  }
  if (checkpoint.version() == kVersionNoKeyLists && checkpoint.key_list_keys_size() > 0) {
    return absl::DataLossError("history checkpoint: key lists in a version 1 checkpoint");
  }
  HistoryBuilder restored;
  RETURN_IF_ERROR(Checkpoint::Restore(checkpoint, restored));
  *this = std::move(restored);
  return absl::OkStatus();
}

}  // namespace isowatch::history
