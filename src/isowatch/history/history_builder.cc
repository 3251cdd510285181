// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/history_builder.h"

#include <algorithm>
#include <limits>
#include <new>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/check.h"
#include "isowatch/common/status_macros.h"

namespace isowatch::history {

HistoryBuilder::HistoryBuilder() = default;

void HistoryBuilder::Reserve(size_t txns, size_t ops) {
  // An estimate from a file's size may be generous: what is reserved and never filled is address
  // space only, since the kernel backs a page when it is first touched. But the estimate is held
  // to a quarter of the machine's memory, and a reservation the system refuses is dropped (the
  // arrays then grow as they fill).
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    const double budget = static_cast<double>(pages) * static_cast<double>(page_size) / 4;
    const double want = static_cast<double>(txns) * (sizeof(Transaction) + sizeof(int64_t)) +
                        static_cast<double>(ops) * sizeof(Op);
    if (want > budget) {
      txns = static_cast<size_t>(static_cast<double>(txns) * budget / want);
      ops = static_cast<size_t>(static_cast<double>(ops) * budget / want);
    }
  }
  try {
    history_.txns_.reserve(txns);
    given_seq_.reserve(txns);
    history_.ext_ids_.Reserve(txns);
    history_.ops_.reserve(ops);
  } catch (const std::bad_alloc&) {
    // Only an optimisation: the arrays grow as they fill instead.
  }
}

KeyId HistoryBuilder::IntKey(int64_t k) {
  const bool dense = static_cast<uint64_t>(k) < kDenseIntKeys;
  if (dense && static_cast<uint64_t>(k) < dense_int_keys_.size()) {
    if (const uint32_t slot = dense_int_keys_[static_cast<size_t>(k)]; slot != 0) [[likely]] {
      return KeyId(slot - 1);
    }
  }
  auto [it, inserted] = history_.int_keys_.try_emplace(k, KeyId());
  if (inserted) it->second = AddKey(KeyInfo{.is_int = true, .is_list = false, .payload = k});
  if (dense) {
    if (static_cast<uint64_t>(k) >= dense_int_keys_.size()) {
      dense_int_keys_.resize(static_cast<size_t>(k) + 1, 0);
    }
    dense_int_keys_[static_cast<size_t>(k)] = it->second.value() + 1;
  }
  return it->second;
}

void HistoryBuilder::SetIntKeys(absl::flat_hash_map<int64_t, KeyId> keys) {
  ISOWATCH_DCHECK(static_cast<size_t>(std::count_if(history_.keys_.begin(), history_.keys_.end(),
                                                    [](const KeyInfo& k) { return k.is_int; })) ==
                          keys.size() &&
                      std::all_of(keys.begin(), keys.end(),
                                  [&](const auto& e) {
                                    const KeyInfo& k = history_.keys_[e.second.value()];
                                    return k.is_int && k.payload == e.first;
                                  }),
                  "a table of keys that is not the history's");
  history_.int_keys_ = std::move(keys);
}

KeyId HistoryBuilder::BytesKey(std::string_view k) {
  uint32_t index = history_.bytes_.Intern(k).first;
  auto [it, inserted] = history_.bytes_keys_.try_emplace(index, KeyId());
  if (inserted) it->second = AddKey(KeyInfo{.is_int = false, .is_list = false, .payload = index});
  return it->second;
}

KeyId HistoryBuilder::AddKey(const KeyInfo& info) {
  std::vector<uint32_t>& free = history_.free_keys_;
  if (free.empty()) [[likely]] {
    history_.keys_.push_back(info);
    return KeyId(static_cast<uint32_t>(history_.keys_.size() - 1));
  }
  const uint32_t id = free.back();
  free.pop_back();
  history_.keys_[id] = info;
  if (id < live_register_.size()) live_register_[id] = 0;
  return KeyId(id);
}

Value HistoryBuilder::BytesValue(std::string_view v) {
  return Value::BytesRef(history_.bytes_.Intern(v).first);
}

absl::Status HistoryBuilder::BeginTxn(const TxnHeader& header) {
  if (header.start && header.commit && *header.start > *header.commit) {
    return absl::InvalidArgumentError(
        fmt::format("transaction {} starts at {} after it commits at {}", header.id,
                    header.start->ToString(), header.commit->ToString()));
  }
  if (header.real_time && header.real_time->invoke > header.real_time->complete) {
    return absl::InvalidArgumentError(
        fmt::format("transaction {} completes at {} before it is invoked at {}", header.id,
                    header.real_time->complete, header.real_time->invoke));
  }
  if (header.snapshot) {
    if (header.start) {
      return absl::InvalidArgumentError(fmt::format(
          "transaction {} has both a start timestamp and a snapshot (a snapshot replaces the "
          "start)",
          header.id));
    }
    if (auto defect =
            SnapshotDefect(header.snapshot->xmin, header.snapshot->xmax, header.snapshot->xip)) {
      return absl::InvalidArgumentError(fmt::format("transaction {}: {}", header.id, *defect));
    }
  }
  auto [ext, inserted] = header.id_new && !live_ ? std::pair(history_.ext_ids_.Add(header.id), true)
                                                 : history_.ext_ids_.Intern(header.id);
  if (!inserted) {
    return absl::InvalidArgumentError(fmt::format("duplicate transaction id {}", header.id));
  }
  auto [session_index, new_session] = history_.sessions_.Intern(header.session);
  if (new_session) {
    history_.session_names_.push_back(session_index);
    history_.session_numeric_.push_back(header.session_numeric ? 1 : 0);
  }
  Transaction t;
  t.ext_id = ext;
  t.ext_id_numeric = header.id_numeric;
  t.session = SessionId(session_index);
  t.status = header.status;
  t.has_start = header.start.has_value();
  t.has_commit = header.commit.has_value();
  if (header.start) t.start = *header.start;
  if (header.commit) t.commit = *header.commit;
  if (header.real_time) {
    t.has_real_time = true;
    t.invoke_time = header.real_time->invoke;
    t.complete_time = header.real_time->complete;
    ++history_.real_time_txns_;
  }
  history_.start_txns_ += t.has_start ? 1 : 0;
  history_.commit_txns_ += t.has_commit ? 1 : 0;
  t.ops_begin = history_.ops_.size();
  t.source_offset = header.source_offset;
  if (header.xid != 0 || header.snapshot) {
    std::vector<uint64_t>& pool = history_.xip_pool_;
    // xip_begin is set for every entry, so that the entries' offsets never decrease.
    XidEntry e{.xid = header.xid, .xip_begin = pool.size()};
    if (header.snapshot) {
      e.has_snapshot = true;
      e.xmin = header.snapshot->xmin;
      e.xmax = header.snapshot->xmax;
      pool.insert(pool.end(), header.snapshot->xip.begin(), header.snapshot->xip.end());
      const auto first = pool.begin() + static_cast<ptrdiff_t>(e.xip_begin);
      std::sort(first, pool.end());
      pool.erase(std::unique(first, pool.end()), pool.end());
      e.xip_count = static_cast<uint32_t>(pool.size() - e.xip_begin);
      ++history_.snapshot_txns_;
    }
    history_.xids_.push_back(e);
    t.xid_slot = static_cast<uint32_t>(history_.xids_.size());
  }
  history_.txns_.push_back(t);
  given_seq_.push_back(header.seq.value_or(-1));
  open_ = true;
  return absl::OkStatus();
}

void HistoryBuilder::Note(std::string_view kind, std::string_view example) {
  std::vector<SourceNote>& notes = history_.info_.notes;
  auto it = std::find_if(notes.begin(), notes.end(),
                         [kind](const SourceNote& n) { return n.kind == kind; });
  if (it == notes.end()) {
    notes.push_back({.kind = std::string(kind), .count = 0, .example = std::string(example)});
    it = notes.end() - 1;
  }
  ++it->count;
}

uint64_t HistoryBuilder::NoteCount(std::string_view kind) const {
  for (const SourceNote& n : history_.info_.notes) {
    if (n.kind == kind) return n.count;
  }
  return 0;
}

void HistoryBuilder::Read(KeyId key, Value observed) {
  history_.ops_.push_back(Op::Read(key, observed));
}
void HistoryBuilder::UnknownRead(KeyId key) {
  history_.ops_.push_back(Op::UnknownRead(key, OpKind::kRead));
}
void HistoryBuilder::Write(KeyId key, Value v) { history_.ops_.push_back(Op::Write(key, v)); }
void HistoryBuilder::Append(KeyId key, Value element) {
  history_.ops_.push_back(Op::Append(key, element));
}

void HistoryBuilder::ListRead(KeyId key, std::span<const Value> elements) {
  ListReadBegin(key);
  for (const Value v : elements) ListReadElement(v);
  ListReadEnd();
}

void HistoryBuilder::ListReadInts(KeyId key, std::span<const int64_t> elements) {
  ListReadBegin(key);
  // What ListReadElement does for each element of a shared prefix, in one loop; the rest (an
  // extension, or a read that diverges) element by element.
  const std::vector<Value>& base = *list_read_base_;
  const size_t common = std::min(elements.size(), base.size());
  size_t i = 0;
  while (i < common && base[i] == Value::Int(elements[i])) ++i;
  list_read_size_ = i;
  for (; i < elements.size(); ++i) ListReadElement(Value::Int(elements[i]));
  ListReadEnd();
}

void HistoryBuilder::ListReadPrefix(KeyId key, uint32_t size) {
  // An empty read is held as ListReadEnd holds it: in the general pool, where it takes no room.
  history_.ops_.push_back(
      Op::ListRead(key, size == 0 ? history_.list_pool_.size() : History::kKeyList, size));
}

void HistoryBuilder::ListReadApart(KeyId key, std::span<const int64_t> elements) {
  // Where ListReadDiverge puts a read: whole, in the general pool.
  std::vector<Value>& pool = history_.list_pool_;
  const uint64_t begin = pool.size();
  for (const int64_t x : elements) pool.push_back(Value::Int(x));
  history_.ops_.push_back(Op::ListRead(key, begin, static_cast<uint32_t>(elements.size())));
}

void HistoryBuilder::SetKeyList(KeyId key, std::vector<Value> list) {
  std::vector<std::vector<Value>>& lists = history_.key_lists_;
  if (key.value() >= lists.size()) lists.resize(key.value() + 1);
  ISOWATCH_DCHECK(lists[key.value()].empty(), "a key's list is set after reads made it");
  lists[key.value()] = std::move(list);
}

void HistoryBuilder::ListReadBegin(KeyId key) {
  std::vector<std::vector<Value>>& lists = history_.key_lists_;
  if (key.value() >= lists.size()) lists.resize(key.value() + 1);
  list_read_key_ = key;
  list_read_base_ = &lists[key.value()];
  list_read_size_ = 0;
  list_read_shared_ = true;
  list_read_extends_ = false;
}

void HistoryBuilder::ListReadDiverge() {
  // Not a prefix of the key's list: the read goes whole to the general pool, with the prefix
  // it shared so far.
  std::vector<Value>& pool = history_.list_pool_;
  list_read_shared_ = false;
  list_read_begin_ = pool.size();
  pool.insert(pool.end(), list_read_base_->begin(),
              list_read_base_->begin() + static_cast<ptrdiff_t>(list_read_size_));
}

void HistoryBuilder::ListReadElement(Value element) {
  if (list_read_shared_) [[likely]] {
    std::vector<Value>& base = *list_read_base_;
    if (list_read_size_ < base.size()) {
      if (base[list_read_size_] == element) [[likely]] {
        ++list_read_size_;
        return;
      }
      ListReadDiverge();
    } else {
      // The read holds all of the key's list: it extends it.
      if (!list_read_extends_) {
        list_read_extends_ = true;
        if (open_) txn_extended_.emplace_back(list_read_key_.value(), base.size());
      }
      base.push_back(element);
      ++list_read_size_;
      return;
    }
  }
  history_.list_pool_.push_back(element);
  ++list_read_size_;
}

void HistoryBuilder::ListReadEnd() {
  if (list_read_shared_ && list_read_size_ > 0) {
    history_.ops_.push_back(Op::ListRead(list_read_key_, History::kKeyList, list_read_size_));
  } else {
    // An empty read is in the general pool, where it takes no room.
    const uint64_t begin = list_read_shared_ ? history_.list_pool_.size() : list_read_begin_;
    history_.ops_.push_back(Op::ListRead(list_read_key_, begin, list_read_size_));
  }
  list_read_base_ = nullptr;
}

void HistoryBuilder::EndTxn() {
  Transaction& t = history_.txns_.back();
  t.ops_count = static_cast<uint32_t>(history_.ops_.size() - t.ops_begin);
  txn_extended_.clear();
  open_ = false;
}

void HistoryBuilder::AbandonTxn() {
  if (!open_) return;
  // The id stays interned (so a later transaction cannot reuse it silently), but the record goes.
  Transaction& t = history_.txns_.back();
  // Its list reads' elements go: those in the general pool follow the earlier transactions'
  // elements; the key lists it extended get back their length before (in reverse order, so
  // that a key extended twice ends at the first).
  uint64_t pool_end = history_.list_pool_.size();
  for (const Op& op : std::span<const Op>(history_.ops_).subspan(t.ops_begin)) {
    if (op.kind() == OpKind::kListRead && !op.unknown() && !History::SharesKeyList(op)) {
      pool_end = std::min(pool_end, op.list_offset());
    }
  }
  if (list_read_base_ != nullptr && !list_read_shared_) {
    pool_end = std::min(pool_end, list_read_begin_);  // a read left unfinished
  }
  list_read_base_ = nullptr;
  history_.list_pool_.resize(pool_end);
  for (auto it = txn_extended_.rbegin(); it != txn_extended_.rend(); ++it) {
    history_.key_lists_[it->first].resize(it->second);
  }
  txn_extended_.clear();
  history_.ops_.resize(t.ops_begin);
  DropOpenRangeReads();
  if (t.xid_slot != 0) {
    const XidEntry& e = history_.xids_.back();
    if (e.has_snapshot) {
      history_.xip_pool_.resize(e.xip_begin);
      --history_.snapshot_txns_;
    }
    history_.xids_.pop_back();
  }
  history_.real_time_txns_ -= t.has_real_time ? 1 : 0;
  history_.start_txns_ -= t.has_start ? 1 : 0;
  history_.commit_txns_ -= t.has_commit ? 1 : 0;
  history_.txns_.pop_back();
  given_seq_.pop_back();
  open_ = false;
}

void HistoryBuilder::StartLive(DataModel model) {
  live_ = true;
  history_.data_model_ = model;
}

absl::StatusOr<TxnId> HistoryBuilder::EndLiveTxn() {
  History& h = history_;
  Transaction& t = h.txns_.back();
  t.ops_count = static_cast<uint32_t>(h.ops_.size() - t.ops_begin);
  live_register_.resize(h.keys_.size(), 0);
  const DataModel model = h.data_model_;
  // `is_list`: the key is a list so far.
  auto list_like = [&](const Op& op, bool is_list) {
    switch (op.kind()) {
      case OpKind::kAppend:
      case OpKind::kListRead:
        return true;
      case OpKind::kRead:
        return op.value().absent() && (model == DataModel::kList || is_list);
      case OpKind::kWrite:
        break;
    }
    return false;
  };
  auto register_like = [&](const Op& op) {
    return op.kind() == OpKind::kWrite || (op.kind() == OpKind::kRead && !op.value().absent());
  };
  std::span<Op> ops(h.ops_.data() + t.ops_begin, t.ops_count);
  // Check everything before changing anything, so that a refused transaction leaves no trace.
  // An operation counts with the transaction's earlier ones (marked in live_register_ for the
  // time of the check): a transaction that writes a key and appends to it is refused as two
  // transactions doing so would be.
  std::optional<uint32_t> conflict;
  for (const Op& op : ops) {
    const uint32_t k = op.key().value();
    uint8_t& marks = live_register_[k];
    const uint8_t before = marks;
    if (list_like(op, h.keys_[k].is_list || (marks & kLiveTxnList) != 0)) {
      marks |= kLiveTxnList;
    } else if (register_like(op)) {
      marks |= kLiveTxnRegister;
    }
    if ((before & kLiveTxnMarks) == 0 && (marks & kLiveTxnMarks) != 0) live_touched_.push_back(k);
    const bool as_register = (marks & (kLiveRegister | kLiveTxnRegister)) != 0 ||
                             h.initial_.registers.contains(op.key());
    const bool as_list = h.keys_[k].is_list || (marks & kLiveTxnList) != 0;
    if (as_list && (as_register || model == DataModel::kKeyValue)) {
      conflict = k;
      break;
    }
  }
  for (const uint32_t k : live_touched_) live_register_[k] &= kLiveRegister;
  live_touched_.clear();
  if (conflict) {
    std::string id(h.ext_ids_.Get(t.ext_id));
    AbandonTxn();
    return absl::InvalidArgumentError(
        fmt::format("transaction {}: key {} is used both as a register and as a list", id,
                    h.KeyToString(KeyId(*conflict))));
  }
  const uint32_t session = t.session.value();
  if (live_session_mode_.size() <= session) {
    live_session_mode_.resize(session + 1, 0);
    live_next_seq_.resize(session + 1, 0);
  }
  const int64_t given = given_seq_.back();
  const uint8_t mode = given >= 0 ? 1 : 2;
  if ((live_session_mode_[session] != 0 && live_session_mode_[session] != mode) ||
      given > int64_t{std::numeric_limits<uint32_t>::max() - 1}) {
    std::string id(h.ext_ids_.Get(t.ext_id));
    AbandonTxn();
    return absl::InvalidArgumentError(
        fmt::format("transaction {}: session {} {}", id, h.sessions_.Get(h.session_names_[session]),
                    given > int64_t{std::numeric_limits<uint32_t>::max() - 1}
                        ? fmt::format("sequence number {} is out of range", given)
                        : std::string("gives sequence numbers for some transactions but not all")));
  }
  live_session_mode_[session] = mode;
  t.seq = given >= 0 ? static_cast<uint32_t>(given) : live_next_seq_[session]++;
  for (Op& op : ops) {
    const uint32_t k = op.key().value();
    if (list_like(op, h.keys_[k].is_list)) {
      h.keys_[k].is_list = true;
      if (op.kind() == OpKind::kRead) op.ConvertAbsentReadToEmptyListRead();
    } else if (register_like(op)) {
      live_register_[k] |= kLiveRegister;
    }
  }
  given_seq_.pop_back();
  txn_extended_.clear();
  open_ = false;
  return TxnId(h.size() - 1);
}

void HistoryBuilder::SetOrigin(TxnId id, uint16_t origin) {
  const uint64_t i = id.value() - history_.first_txn_;
  if (i < history_.txns_.size()) history_.txns_[i].origin = origin;
}

void HistoryBuilder::ReleaseLive(TxnId upto, absl::FunctionRef<bool(TxnId)> keep,
                                 absl::FunctionRef<void(TxnId)> ahead) {
  History& h = history_;
  const uint64_t end = std::min<uint64_t>(upto.value(), h.size());
  if (end <= h.first_txn_) return;

  // 1. The retired set: the old one's survivors and the released transactions kept, with their
  // operations and list elements copied out.
  absl::flat_hash_map<uint64_t, History::Retired> retired;
  std::vector<Op> ops;
  std::vector<Value> elements;
  std::vector<XidEntry> xids;
  std::vector<uint64_t> xip;
  size_t name_bytes = 0;
  auto retire = [&](uint64_t id, const Transaction& t, std::string_view name) {
    History::Retired r{.txn = t, .name = std::string(name)};
    if (t.xid_slot != 0) {
      XidEntry e = h.XidAt(t.xid_slot);
      e.xip_begin = xip.size();
      if (e.has_snapshot) {
        const SnapshotView s = h.snapshot(t);
        xip.insert(xip.end(), s.xip.begin(), s.xip.end());
      }
      xids.push_back(e);
      r.txn.xid_slot = History::kRetiredXid + static_cast<uint32_t>(xids.size());
    }
    r.txn.ops_begin = History::kRetiredOps + ops.size();
    for (Op op : h.ops(t)) {
      if (op.kind() == OpKind::kListRead && op.list_size() > 0) {
        auto from = h.list_elements(op);
        op = op.WithListOffset(History::kRetiredList + elements.size());
        elements.insert(elements.end(), from.begin(), from.end());
      } else if (op.kind() == OpKind::kListRead) {
        op = op.WithListOffset(0);  // empty: its offset must stay within the pool it names
      }
      ops.push_back(op);
    }
    if (r.name.capacity() > std::string().capacity()) name_bytes += r.name.capacity() + 1;
    retired.emplace(id, std::move(r));
  };
  // `keep` is asked about the retired ones, then the held ones up to `end`; `ahead` hears of
  // each kAhead questions earlier.
  constexpr size_t kAhead = 4;
  std::vector<std::pair<uint64_t, const History::Retired*>> old;
  old.reserve(h.retired_.size());
  for (const auto& [id, r] : h.retired_) old.emplace_back(id, &r);
  const size_t asks = old.size() + (end - h.first_txn_);
  auto ask = [&](size_t i) {
    return i < old.size() ? old[i].first : h.first_txn_ + (i - old.size());
  };
  for (size_t i = 0; i < std::min(kAhead, asks); ++i) ahead(TxnId(ask(i)));
  for (size_t i = 0; i < asks; ++i) {
    if (i + kAhead < asks) ahead(TxnId(ask(i + kAhead)));
    const uint64_t id = ask(i);
    if (!keep(TxnId(id))) continue;
    if (i < old.size()) {
      retire(id, old[i].second->txn, old[i].second->name);
    } else {
      const Transaction& t = h.txns_[id - h.first_txn_];
      retire(id, t, h.ext_ids_.Get(t.ext_id));
    }
  }
  h.retired_ = std::move(retired);
  h.retired_ops_ = std::move(ops);
  h.retired_list_ = std::move(elements);
  h.retired_name_bytes_ = name_bytes;
  h.retired_xids_ = std::move(xids);
  h.retired_xip_ = std::move(xip);

  // 2. What stays held moves to the front of the pools.
  h.txns_.erase(h.txns_.begin(), h.txns_.begin() + (end - h.first_txn_));
  h.first_txn_ = end;
  const uint64_t op_cut = h.txns_.empty() ? h.ops_.size() : h.txns_.front().ops_begin;
  h.ops_.erase(h.ops_.begin(), h.ops_.begin() + static_cast<ptrdiff_t>(op_cut));
  uint64_t list_cut = h.list_pool_.size();
  for (const Op& op : h.ops_) {
    if (op.kind() == OpKind::kListRead && op.list_size() > 0 && !History::SharesKeyList(op)) {
      list_cut = op.list_offset();  // elements are pooled in operation order: the first is least
      break;
    }
  }
  // Per key list: the longest prefix a held read still shares.
  std::vector<uint32_t> shared(h.key_lists_.size(), 0);
  for (Op& op : h.ops_) {
    if (op.kind() != OpKind::kListRead) continue;
    if (History::SharesKeyList(op)) {
      uint32_t& n = shared[op.key().value()];
      n = std::max(n, op.list_size());
    } else {
      // An empty read's offset may lie anywhere up to the old pool's end: it starts at 0.
      op = op.WithListOffset(op.list_size() > 0 ? op.list_offset() - list_cut : 0);
    }
  }
  h.list_pool_.erase(h.list_pool_.begin(), h.list_pool_.begin() + static_cast<ptrdiff_t>(list_cut));
  // A key list goes when no held read shares it, and gives back what no held read shares once
  // that is most of it; a later read of the key starts it again.
  for (size_t k = 0; k < h.key_lists_.size(); ++k) {
    std::vector<Value>& list = h.key_lists_[k];
    if (shared[k] == 0) {
      std::vector<Value>().swap(list);
    } else if (list.capacity() > 2 * static_cast<size_t>(shared[k])) {
      list.resize(shared[k]);
      list.shrink_to_fit();
    }
  }
  // Xids and snapshots are in transaction order: the first held one's is the cut.
  size_t xid_cut = h.xids_.size();
  for (const Transaction& t : h.txns_) {
    if (t.xid_slot != 0) {
      xid_cut = t.xid_slot - 1;
      break;
    }
  }
  const uint64_t xip_cut =
      xid_cut < h.xids_.size() ? h.xids_[xid_cut].xip_begin : h.xip_pool_.size();
  h.xids_.erase(h.xids_.begin(), h.xids_.begin() + static_cast<ptrdiff_t>(xid_cut));
  h.xip_pool_.erase(h.xip_pool_.begin(), h.xip_pool_.begin() + static_cast<ptrdiff_t>(xip_cut));
  for (XidEntry& e : h.xids_) e.xip_begin -= xip_cut;
  StringPool names;
  for (Transaction& t : h.txns_) {
    if (t.xid_slot != 0) t.xid_slot -= static_cast<uint32_t>(xid_cut);
    t.ops_begin -= op_cut;
    t.ext_id = names.Intern(h.ext_ids_.Get(t.ext_id)).first;
  }
  h.ext_ids_ = std::move(names);
}

size_t HistoryBuilder::CollectBytes(std::vector<uint64_t>& marks) {
  History& h = history_;
  marks.resize((h.bytes_.size() + 63) / 64, 0);
  auto mark_ops = [&](std::span<const Op> ops) {
    for (const Op& op : ops) {
      if (op.kind() != OpKind::kListRead) MarkBytes(op.value(), marks);
    }
  };
  auto mark_values = [&](std::span<const Value> values) {
    for (const Value v : values) MarkBytes(v, marks);
  };
  mark_ops(h.ops_);
  mark_ops(h.retired_ops_);
  for (const std::vector<Value>& list : h.key_lists_) mark_values(list);
  mark_values(h.list_pool_);
  mark_values(h.retired_list_);
  mark_values(h.initial_list_pool_);
  MarkBytes(h.initial_.default_value, marks);
  for (const auto& [key, v] : h.initial_.registers) MarkBytes(v, marks);
  for (const KeyInfo& k : h.keys_) {
    if (!k.is_int && !k.forgotten)
      MarkBytes(Value::BytesRef(static_cast<uint32_t>(k.payload)), marks);
  }
  return h.bytes_.Retain(marks);
}

std::vector<KeyId> HistoryBuilder::CollectKeys(std::vector<uint64_t>& marks) {
  History& h = history_;
  marks.resize((h.keys_.size() + 63) / 64, 0);
  auto mark = [&](KeyId key) { marks[key.value() / 64] |= uint64_t{1} << (key.value() % 64); };
  for (const Op& op : h.ops_) mark(op.key());
  for (const Op& op : h.retired_ops_) mark(op.key());
  for (const auto& [key, v] : h.initial_.registers) mark(key);
  for (const auto& [key, range] : h.initial_.lists) mark(key);
  for (const KeyId key : h.initial_.versions) mark(key);
  std::vector<KeyId> forgotten;
  for (uint32_t k = 0; k < h.keys_.size(); ++k) {
    KeyInfo& info = h.keys_[k];
    if (info.forgotten || info.is_list || (marks[k / 64] >> (k % 64) & 1) != 0) continue;
    if (info.is_int) {
      h.int_keys_.erase(info.payload);
      if (static_cast<uint64_t>(info.payload) < dense_int_keys_.size()) {
        dense_int_keys_[static_cast<size_t>(info.payload)] = 0;
      }
    } else {
      h.bytes_keys_.erase(static_cast<uint32_t>(info.payload));
    }
    info = KeyInfo{.forgotten = true};
    forgotten.push_back(KeyId(k));
  }
  // Handed out again lowest first, so that the ids in use stay dense.
  for (auto it = forgotten.rbegin(); it != forgotten.rend(); ++it) {
    h.free_keys_.push_back(it->value());
  }
  // The tables give back what the keys held at their peak took, once they hold far fewer.
  if (h.int_keys_.size() * 4 < h.int_keys_.capacity()) h.int_keys_.rehash(0);
  if (h.bytes_keys_.size() * 4 < h.bytes_keys_.capacity()) h.bytes_keys_.rehash(0);
  return forgotten;
}

void HistoryBuilder::SetInitialList(KeyId key, std::span<const Value> elements) {
  InitialState::ListRange range{.offset = history_.initial_list_pool_.size(),
                                .size = static_cast<uint32_t>(elements.size())};
  history_.initial_list_pool_.insert(history_.initial_list_pool_.end(), elements.begin(),
                                     elements.end());
  history_.initial_.lists[key] = range;
  history_.keys_[key.value()].is_list = true;
}

bool HistoryBuilder::NumberSessionsInOrder() {
  History& h = history_;
  struct Walk {
    TxnId last = TxnId::Invalid();  // the session's latest transaction so far
    uint32_t next_seq = 0;
    int64_t last_given = -1;  // its given sequence number
    bool given = false;       // whether the session gives sequence numbers
  };
  std::vector<Walk> walks(h.session_names_.size());
  for (size_t i = 0; i < h.txns_.size(); ++i) {
    Transaction& t = h.txns_[i];
    Walk& w = walks[t.session.value()];
    const int64_t given = given_seq_[i];
    if (w.next_seq == 0) {
      w.given = given >= 0;
    } else if ((given >= 0) != w.given || (w.given && given <= w.last_given)) {
      return false;
    }
    w.last_given = given;
    t.seq = w.next_seq++;
    t.session_prev = w.last;
    w.last = TxnId(i);
  }
  return true;
}

absl::Status HistoryBuilder::NumberSessionsBySeq() {
  History& h = history_;
  const size_t n_sessions = h.session_names_.size();
  std::vector<uint32_t> count(n_sessions + 1, 0);
  for (const Transaction& t : h.txns_) ++count[t.session.value() + 1];
  std::partial_sum(count.begin(), count.end(), count.begin());
  std::vector<uint32_t> order(h.txns_.size());
  {
    std::vector<uint32_t> fill(count.begin(), count.end() - 1);
    for (uint32_t i = 0; i < h.txns_.size(); ++i) order[fill[h.txns_[i].session.value()]++] = i;
  }
  for (size_t s = 0; s < n_sessions; ++s) {
    auto first = order.begin() + count[s];
    auto last = order.begin() + count[s + 1];
    size_t with_seq = std::count_if(first, last, [&](uint32_t i) { return given_seq_[i] >= 0; });
    if (with_seq != 0 && with_seq != static_cast<size_t>(last - first)) {
      return absl::InvalidArgumentError(
          fmt::format("session {} gives sequence numbers for some transactions but not all",
                      h.sessions_.Get(h.session_names_[s])));
    }
    if (with_seq != 0) {
      // Writers mostly give a session's transactions in order: one pass checks that, where
      // sorting them takes several.
      auto by_seq = [&](uint32_t a, uint32_t b) { return given_seq_[a] < given_seq_[b]; };
      if (!std::is_sorted(first, last, by_seq)) std::stable_sort(first, last, by_seq);
      for (auto it = first; it + 1 < last; ++it) {
        if (given_seq_[*it] == given_seq_[*(it + 1)]) {
          return absl::InvalidArgumentError(fmt::format(
              "session {} repeats sequence number {} (transactions {} and {})",
              h.sessions_.Get(h.session_names_[s]), given_seq_[*it],
              h.ext_ids_.Get(h.txns_[*it].ext_id), h.ext_ids_.Get(h.txns_[*(it + 1)].ext_id)));
        }
      }
    }
    uint32_t seq = 0;
    TxnId prev = TxnId::Invalid();
    for (auto it = first; it != last; ++it) {
      Transaction& t = h.txns_[*it];
      t.seq = seq++;
      t.session_prev = prev;
      prev = TxnId(*it);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<History> HistoryBuilder::Finish() && {
  History& h = history_;
  // AbandonTxn leaves holes in the external-id table; FindTxn relies on ext_id == index, so
  // renumber if any transaction was abandoned.
  if (h.ext_ids_.size() != h.txns_.size()) {
    StringPool ids;
    for (Transaction& t : h.txns_) t.ext_id = ids.Intern(h.ext_ids_.Get(t.ext_id)).first;
    h.ext_ids_ = std::move(ids);
  }

  // 1. Key kinds: a key appended to or read as a list is a list key. One pass over the
  // operations (hundreds of megabytes in a large history) gathers each key's uses in two bytes per
  // key, which stay in cache where the keys' records would not.
  std::vector<uint8_t> used_as_list(h.keys_.size(), 0);
  std::vector<uint8_t> used_as_register(h.keys_.size(), 0);
  bool any_absent_read = false;
  for (const Op& op : h.ops_) {
    const uint32_t k = op.key().value();
    switch (op.kind()) {
      case OpKind::kAppend:
      case OpKind::kListRead:
        used_as_list[k] = 1;
        break;
      case OpKind::kWrite:
        used_as_register[k] = 1;
        break;
      case OpKind::kRead:
        if (op.value().absent()) {
          any_absent_read = true;
        } else {
          used_as_register[k] = 1;
        }
        break;
    }
  }
  for (const auto& [key, value] : h.initial_.registers) used_as_register[key.value()] = 1;
  MarkRangeReadKeys(used_as_register);
  bool any_list = false;
  bool any_register = false;
  for (size_t k = 0; k < h.keys_.size(); ++k) {
    if (used_as_list[k]) h.keys_[k].is_list = true;
    if (h.keys_[k].is_list && used_as_register[k]) {
      return absl::InvalidArgumentError(fmt::format(
          "key {} is used both as a register (read or written with a scalar) and as a list",
          h.KeyToString(KeyId(static_cast<uint32_t>(k)))));
    }
    (h.keys_[k].is_list ? any_list : any_register) = true;
  }
  // A second pass only where an absent read may be of a list key, to become an empty list read.
  if (any_list && any_absent_read) {
    for (Op& op : h.ops_) {
      if (op.kind() == OpKind::kRead && h.keys_[op.key().value()].is_list) {
        op.ConvertAbsentReadToEmptyListRead();
      }
    }
  }
  h.data_model_ =
      any_list ? (any_register ? DataModel::kMixed : DataModel::kList) : DataModel::kKeyValue;

  // 2. Session order. Sources mostly list each session's transactions in order, with no sequence
  // numbers or increasing ones: one pass in transaction order numbers them then. Otherwise the
  // transactions are sorted by session and sequence number.
  if (!NumberSessionsInOrder()) RETURN_IF_ERROR(NumberSessionsBySeq());
  given_seq_.clear();
  given_seq_.shrink_to_fit();
  finished_ = true;
  return std::move(history_);
}

}  // namespace isowatch::history
