// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/history.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include <fmt/format.h>

namespace isowatch::history {

const char* DataModelName(DataModel model) {
  switch (model) {
    case DataModel::kKeyValue:
      return "key-value";
    case DataModel::kList:
      return "list";
    case DataModel::kMixed:
      return "mixed";
  }
  return "?";
}

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kRead:
      return "r";
    case OpKind::kWrite:
      return "w";
    case OpKind::kAppend:
      return "append";
    case OpKind::kListRead:
      return "r";
  }
  return "?";
}

const char* TxnStatusName(TxnStatus status) {
  switch (status) {
    case TxnStatus::kCommitted:
      return "committed";
    case TxnStatus::kAborted:
      return "aborted";
    case TxnStatus::kUnknown:
      return "unknown";
  }
  return "?";
}

std::string Timestamp::ToString() const {
  if (logical == 0) return fmt::format("{}", physical);
  return fmt::format("({},{})", physical, logical);
}

const Transaction& History::RetiredTxn(TxnId id) const {
  static const Transaction kReleased{.status = TxnStatus::kUnknown};
  auto it = retired_.find(id.value());
  return it == retired_.end() ? kReleased : it->second.txn;
}

std::vector<TxnId> History::HeldTxns() const {
  std::vector<TxnId> out;
  out.reserve(retired_.size() + txns_.size());
  for (const auto& [id, retired] : retired_) out.push_back(TxnId(id));
  std::sort(out.begin(), out.end());
  for (size_t i = 0; i < txns_.size(); ++i) {
    out.push_back(TxnId(first_txn_ + i));
  }
  return out;
}

Visibility History::Visible(TxnId writer, TxnId reader) const {
  if (writer == reader) return Visibility::kInvisible;
  const Transaction& w = txn(writer);
  const Transaction& r = txn(reader);
  if (!w.committed()) return Visibility::kInvisible;
  if (has_snapshot(r)) return SnapshotSees(r, w);
  if (!r.has_start || !w.has_commit) return Visibility::kUnknown;
  return w.commit <= r.start ? Visibility::kVisible : Visibility::kInvisible;
}

std::string_view History::txn_name(TxnId id) const {
  const uint64_t i = id.value() - first_txn_;
  if (i < txns_.size()) return ext_ids_.Get(txns_[i].ext_id);
  auto it = retired_.find(id.value());
  return it == retired_.end() ? std::string_view() : std::string_view(it->second.name);
}

std::string History::TxnLabel(TxnId id) const {
  if (!has_txn(id)) return fmt::format("#{}", id.value());
  return std::string(txn_name(id));
}

TxnId History::FindTxn(std::string_view name) const {
  int64_t ext = ext_ids_.Find(name);
  if (ext < 0) return TxnId::Invalid();
  auto found = [&](size_t i) { return TxnId(first_txn_ + i); };
  // External ids are interned in transaction order, one per transaction, except in a live
  // history, where a refused transaction leaves its id interned: then search.
  if (static_cast<size_t>(ext) < txns_.size() && txns_[ext].ext_id == ext) {
    return found(static_cast<size_t>(ext));
  }
  auto it = std::lower_bound(txns_.begin(), txns_.end(), ext, [](const Transaction& t, int64_t e) {
    return static_cast<int64_t>(t.ext_id) < e;
  });
  if (it == txns_.end() || static_cast<int64_t>(it->ext_id) != ext) return TxnId::Invalid();
  return found(static_cast<size_t>(it - txns_.begin()));
}

KeyId History::FindIntKey(int64_t k) const {
  auto it = int_keys_.find(k);
  return it == int_keys_.end() ? KeyId::Invalid() : it->second;
}

KeyId History::FindBytesKey(std::string_view k) const {
  int64_t index = bytes_.Find(k);
  if (index < 0) return KeyId::Invalid();
  auto it = bytes_keys_.find(static_cast<uint32_t>(index));
  return it == bytes_keys_.end() ? KeyId::Invalid() : it->second;
}

Value History::InitialValue(KeyId key) const {
  auto it = initial_.registers.find(key);
  return it == initial_.registers.end() ? initial_.default_value : it->second;
}

std::span<const Value> History::InitialList(KeyId key) const {
  auto it = initial_.lists.find(key);
  if (it == initial_.lists.end()) return {};
  return std::span<const Value>(initial_list_pool_).subspan(it->second.offset, it->second.size);
}

namespace {
std::string QuoteBytes(std::string_view b) {
  return fmt::format("\"{}\"", absl::CHexEscape(absl::string_view(b.data(), b.size())));
}
}  // namespace

std::string History::KeyToString(KeyId key) const {
  if (!key.valid() || keys_[key.value()].forgotten) return "?";
  const KeyInfo& info = keys_[key.value()];
  if (info.is_int) return fmt::format("{}", info.payload);
  return QuoteBytes(bytes_.Get(static_cast<uint32_t>(info.payload)));
}

std::string History::ValueToString(Value v) const {
  switch (v.kind()) {
    case ValueKind::kAbsent:
      return "null";
    case ValueKind::kInt:
      return fmt::format("{}", v.as_int());
    case ValueKind::kBytes:
      return QuoteBytes(bytes_.Get(v.bytes_index()));
  }
  return "?";
}

std::string History::ListToString(std::span<const Value> elements) const {
  std::string out = "[";
  for (size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) out += ", ";
    out += ValueToString(elements[i]);
  }
  out += "]";
  return out;
}

size_t History::MemoryUsage() const {
  size_t retired = retired_.capacity() * (sizeof(uint64_t) + sizeof(Retired) + 1) +
                   retired_ops_.capacity() * sizeof(Op) + retired_list_.capacity() * sizeof(Value) +
                   retired_name_bytes_ +
                   (xids_.capacity() + retired_xids_.capacity()) * sizeof(XidEntry) +
                   (xip_pool_.capacity() + retired_xip_.capacity()) * sizeof(uint64_t);
  size_t key_lists = key_lists_.capacity() * sizeof(std::vector<Value>);
  for (const std::vector<Value>& list : key_lists_) key_lists += list.capacity() * sizeof(Value);
  return retired + key_lists + txns_.capacity() * sizeof(Transaction) +
         ops_.capacity() * sizeof(Op) +
         (list_pool_.capacity() + initial_list_pool_.capacity()) * sizeof(Value) +
         ext_ids_.MemoryUsage() + sessions_.MemoryUsage() + bytes_.MemoryUsage() +
         keys_.capacity() * sizeof(KeyInfo) + free_keys_.capacity() * sizeof(uint32_t) +
         int_keys_.capacity() * (sizeof(int64_t) + sizeof(KeyId) + 1) +
         bytes_keys_.capacity() * (sizeof(uint32_t) + sizeof(KeyId) + 1) +
         range_reads_.capacity() * sizeof(RangeRead) + range_pairs_.capacity() * sizeof(KeyValue) +
         range_index_.capacity() * (sizeof(uint64_t) + 2 * sizeof(uint32_t) + 1) +
         tombstones_.capacity() * (sizeof(KeyValue) + 1);
}

}  // namespace isowatch::history
