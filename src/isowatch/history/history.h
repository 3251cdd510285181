// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/history/operation.h"
#include "isowatch/history/range_read.h"
#include "isowatch/history/snapshot.h"
#include "isowatch/history/string_pool.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/history/transaction.h"
#include "isowatch/history/value.h"

namespace isowatch::history {

// What kind of data a history's keys hold.
enum class DataModel : uint8_t {
  kKeyValue = 0,  // every key is a register
  kList = 1,      // every key is an append-only list
  kMixed = 2,     // some of each
};

const char* DataModelName(DataModel model);

// A key as the source named it: an integer or opaque bytes.
struct KeyInfo {
  bool is_int = true;
  bool is_list = false;  // the key holds a list (it is appended to or read as a list)
  // A live history forgot the key (HistoryBuilder::CollectKeys): its id names no key until it
  // is handed out again.
  bool forgotten = false;
  int64_t payload = 0;  // the integer, or the index of the bytes in the byte pool
};

// The value of every key before the first recorded transaction.
struct InitialState {
  // Value of a register not listed in `registers`.
  Value default_value;
  absl::flat_hash_map<KeyId, Value> registers;
  // Initial contents of lists, as ranges of the History's pool of initial list elements. An
  // unlisted list starts empty.
  struct ListRange {
    uint64_t offset = 0;
    uint32_t size = 0;
  };
  absl::flat_hash_map<KeyId, ListRange> lists;
  // Registers whose initial value is a version some transaction installed (a window's state at
  // its base), not the usual convention for "before the history": an absent read of one is a
  // read of nothing, not of its initial value.
  absl::flat_hash_set<KeyId> versions;
};

// Something the reader of a history's source met and did not turn into transactions and
// operations (skipped, refused or reinterpreted), counted by kind, so that a report can say what
// was left out and why: "nemesis operations skipped", "ineffective writes dropped", ...
struct SourceNote {
  std::string kind;     // a short phrase, the same for every note of its kind
  uint64_t count = 0;   // how many times the reader met it
  std::string example;  // the first occurrence, with its position in the source
};

// What is known of where a history came from, beyond its transactions: the format and dialect it
// was read in, the unit of its real-time intervals and the reader's notes.
struct HistoryInfo {
  std::string format;             // e.g. "edn"; empty when not read from a file
  std::string dialect;            // e.g. "list-append", "plume"; empty when the format has none
  std::string time_unit;          // of Transaction::invoke_time and complete_time, e.g. "ns"
  std::vector<SourceNote> notes;  // in order of first occurrence
};

// Whether one transaction's writes are in another's snapshot (History::Visible).
enum class Visibility : uint8_t {
  kVisible = 0,
  kInvisible = 1,
  kUnknown = 2,  // the history cannot say: a snapshot reader and a writer without an xid, or a
                 // reader with neither a start nor a snapshot
};

// A transaction's database xid and snapshot, in the History's table (Transaction::xid_slot).
struct XidEntry {
  uint64_t xid = 0;  // 0: none
  uint64_t xmin = 0;
  uint64_t xmax = 0;
  uint64_t xip_begin = 0;  // in the history's pool of in-progress xids (sorted, distinct)
  uint32_t xip_count = 0;
  bool has_snapshot = false;
};

// An immutable, fully interned transaction history: transactions in input order with their
// operations in program order, interned keys and values, sessions and the initial state.
// Built by HistoryBuilder; movable, not copyable. Thread-compatible (read-only after Finish, so
// any number of threads may read it concurrently).
//
// A live history (HistoryBuilder::StartLive) may forget transactions that are final
// (HistoryBuilder::ReleaseLive): their ids stay taken, has_txn() turns false, and txn() returns
// a record with no operations, no timestamps and status kUnknown. Transactions kept past their
// release ("retired") stay readable through every accessor.
class History {
 public:
  History() = default;
  History(History&&) = default;
  History& operator=(History&&) = default;
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // Transactions.
  // Transactions ever added: ids are [0, size()).
  size_t size() const { return first_txn_ + txns_.size(); }
  // The transactions held in order, from first_txn() on (all of them unless released).
  std::span<const Transaction> txns() const { return txns_; }
  uint64_t first_txn() const { return first_txn_; }
  // Whether the history holds `id`: false once a live history released it.
  bool has_txn(TxnId id) const {
    return id.value() - first_txn_ < txns_.size() || retired_.contains(id.value());
  }
  const Transaction& txn(TxnId id) const {
    const uint64_t i = id.value() - first_txn_;
    if (i < txns_.size()) [[likely]] {
      return txns_[i];
    }
    return RetiredTxn(id);
  }
  // The id as written in the source; empty for a transaction released (has_txn() false).
  std::string_view txn_name(TxnId id) const;
  // The id as written in the source, or "#<index>" for a released transaction.
  std::string TxnLabel(TxnId id) const;
  // Finds a transaction held by its source id; invalid if there is none.
  TxnId FindTxn(std::string_view name) const;
  // Every transaction held (the retired ones, then those from first_txn() on), ascending.
  std::vector<TxnId> HeldTxns() const;

  // Operations.
  size_t op_count() const { return ops_.size(); }
  std::span<const Op> ops(const Transaction& t) const {
    if (t.ops_begin >= kRetiredOps) [[unlikely]] {
      return std::span<const Op>(retired_ops_).subspan(t.ops_begin - kRetiredOps, t.ops_count);
    }
    return std::span<const Op>(ops_).subspan(t.ops_begin, t.ops_count);
  }
  std::span<const Op> ops(TxnId id) const { return ops(txn(id)); }
  // The elements a list read observed. In a live history the span lasts until the builder's
  // next call. REQUIRES: op.kind() == OpKind::kListRead.
  std::span<const Value> list_elements(const Op& op) const {
    const uint64_t offset = op.list_offset();
    if (offset == kKeyList) [[likely]] {
      return std::span<const Value>(key_lists_[op.key().value()]).first(op.list_size());
    }
    if (offset >= kRetiredList) [[unlikely]] {
      return std::span<const Value>(retired_list_).subspan(offset - kRetiredList, op.list_size());
    }
    return std::span<const Value>(list_pool_).subspan(offset, op.list_size());
  }
  // Whether list read `op` is a prefix of its key's longest list (list_elements(op) is
  // key_list(op.key()).first(op.list_size())), rather than stored apart.
  // REQUIRES: op.kind() == OpKind::kListRead.
  static bool SharesKeyList(const Op& op) { return op.list_offset() == kKeyList; }
  // The longest list read of `key` so far that the reads sharing it are prefixes of (empty if
  // none): what the history holds once for all those reads. Same lifetime as list_elements.
  std::span<const Value> key_list(KeyId key) const {
    return key.value() < key_lists_.size() ? std::span<const Value>(key_lists_[key.value()])
                                           : std::span<const Value>();
  }

  // Range reads (range_read.h), kept beside the operations; a live history has none.
  // The range reads of transaction `id` in program order; empty for most transactions (and for
  // every one of a history without range reads, at the cost of one test).
  std::span<const RangeRead> range_reads(TxnId id) const {
    if (range_index_.empty()) [[likely]] {
      return {};
    }
    return RangeReadsOf(id);
  }
  // Range reads in all.
  size_t range_read_count() const { return range_reads_.size(); }
  // The records `r` returned live, and tombstoned.
  std::span<const KeyValue> range_live(const RangeRead& r) const {
    return std::span<const KeyValue>(range_pairs_).subspan(r.pairs_begin, r.live_count);
  }
  std::span<const KeyValue> range_dead(const RangeRead& r) const {
    return std::span<const KeyValue>(range_pairs_)
        .subspan(r.pairs_begin + r.live_count, r.dead_count);
  }
  // Whether `v` is a tombstone of `key`: a value a delete wrote to mark the key deleted
  // (HistoryBuilder::MarkTombstone), so that a read of it reads a deleted key, not a live value.
  bool IsTombstone(KeyId key, Value v) const {
    return !tombstones_.empty() && tombstones_.contains(KeyValue{key, v});
  }
  // Every tombstone, in no particular order.
  const absl::flat_hash_set<KeyValue>& tombstones() const { return tombstones_; }

  // Database xids and PostgreSQL snapshots (docs/engine.md, "Snapshots").
  // The transaction's xid; 0 if it has none.
  uint64_t xid(const Transaction& t) const { return t.xid_slot == 0 ? 0 : XidAt(t.xid_slot).xid; }
  bool has_snapshot(const Transaction& t) const {
    return t.xid_slot != 0 && XidAt(t.xid_slot).has_snapshot;
  }
  // REQUIRES: has_snapshot(t).
  SnapshotView snapshot(const Transaction& t) const {
    const XidEntry& e = XidAt(t.xid_slot);
    const std::vector<uint64_t>& pool = t.xid_slot - 1 >= kRetiredXid ? retired_xip_ : xip_pool_;
    return {e.xmin, e.xmax, std::span<const uint64_t>(pool).subspan(e.xip_begin, e.xip_count)};
  }
  // Whether any transaction with a snapshot was ever added.
  bool has_snapshots() const { return snapshot_txns_ > 0; }
  // Whether `writer`'s writes are in `reader`'s snapshot: never its own, never those of a
  // transaction not committed; for a reader with a snapshot, by the writer's xid (kUnknown if it
  // has none); for one with a start timestamp, writer.commit <= reader.start.
  Visibility Visible(TxnId writer, TxnId reader) const;
  // Visible, for a reader with a snapshot. REQUIRES: has_snapshot(reader), writer committed.
  Visibility SnapshotSees(const Transaction& reader, const Transaction& writer) const {
    const uint64_t x = xid(writer);
    if (x == 0) return Visibility::kUnknown;
    return snapshot(reader).Sees(x) ? Visibility::kVisible : Visibility::kInvisible;
  }

  // Sessions.
  size_t session_count() const { return session_names_.size(); }
  std::string_view session_name(SessionId id) const {
    return sessions_.Get(session_names_[id.value()]);
  }
  bool session_numeric(SessionId id) const { return session_numeric_[id.value()] != 0; }

  // Keys and values.
  // Key ids handed out: ids are [0, key_count()), of a live history's forgotten keys included
  // (HistoryBuilder::CollectKeys).
  size_t key_count() const { return keys_.size(); }
  // Keys held: key_count() less the forgotten ones.
  size_t keys_held() const { return keys_.size() - free_keys_.size(); }
  const KeyInfo& key(KeyId id) const { return keys_[id.value()]; }
  std::string_view bytes(uint32_t pool_index) const { return bytes_.Get(pool_index); }
  // Byte strings interned: pool indices are [0, byte_count()), of a live history's forgotten
  // ones included (HistoryBuilder::CollectBytes).
  size_t byte_count() const { return bytes_.size(); }
  // Byte strings held: byte_count() less the forgotten ones.
  size_t byte_strings_held() const { return bytes_.live(); }
  KeyId FindIntKey(int64_t k) const;
  KeyId FindBytesKey(std::string_view k) const;
  DataModel data_model() const { return data_model_; }

  // Initial state.
  const InitialState& initial() const { return initial_; }
  // The value of register `key` before any transaction.
  Value InitialValue(KeyId key) const;
  // Whether an absent read of register `key` matches its initial value: always, unless the
  // initial value is a version a transaction installed (InitialState::versions) other than
  // absent.
  bool AbsentReadsInitial(KeyId key) const {
    return initial_.versions.empty() || !initial_.versions.contains(key) ||
           InitialValue(key).absent();
  }
  // The contents of list `key` before any transaction.
  std::span<const Value> InitialList(KeyId key) const;

  // Rendering for reports: integers in decimal, bytes as a quoted, escaped string, absent as
  // "null", lists as "[1, 2, 3]".
  std::string KeyToString(KeyId key) const;
  std::string ValueToString(Value v) const;
  std::string ListToString(std::span<const Value> elements) const;

  // Where the history came from (file name), for messages.
  const std::string& source() const { return source_; }
  // The format it was read in and what its reader noted.
  const HistoryInfo& info() const { return info_; }
  // Whether any transaction has a commit timestamp, a start timestamp, a real-time interval.
  bool has_commit_timestamps() const { return commit_txns_ > 0; }
  bool has_start_timestamps() const { return start_txns_ > 0; }
  bool has_real_time() const { return real_time_txns_ > 0; }
  // Approximate bytes held, for accounting.
  size_t MemoryUsage() const;
  // Transactions released but kept (HistoryBuilder::ReleaseLive).
  size_t retired_count() const { return retired_.size(); }

 private:
  friend class HistoryBuilder;

  // A retired transaction's operations and list elements live in retired_ops_ and
  // retired_list_; its record's ops_begin, and its list reads' offsets, are marked by adding these.
  static constexpr uint64_t kRetiredOps = uint64_t{1} << 62;
  static constexpr uint64_t kRetiredList = uint64_t{1} << 61;
  // The offset of a list read held in its key's list (key_lists_): its elements are the first
  // list_size() of them. Retired list reads never have it (their elements are copied out).
  static constexpr uint64_t kKeyList = uint64_t{1} << 60;
  // A retired transaction's xid_slot - 1 is this plus its index in retired_xids_.
  static constexpr uint32_t kRetiredXid = uint32_t{1} << 31;
  // Op keeps a list read's offset in fewer bits: a position below 2^56, and these marks.
  static_assert(kKeyList >> 60 == 1 && kRetiredList >> 60 == 2);
  struct Retired {
    Transaction txn;
    std::string name;
  };

  const Transaction& RetiredTxn(TxnId id) const;
  std::span<const RangeRead> RangeReadsOf(TxnId id) const;
  const XidEntry& XidAt(uint32_t slot) const {
    const uint32_t i = slot - 1;
    return i >= kRetiredXid ? retired_xids_[i - kRetiredXid] : xids_[i];
  }

  // Transactions first_txn_ + i, for i < txns_.size(); their operations and list elements.
  uint64_t first_txn_ = 0;
  std::vector<Transaction> txns_;
  std::vector<Op> ops_;
  // List elements, in three stores (docs/engine.md, "List storage"): per key, the
  // longest list read so far that later reads were prefixes or extensions of (indexed by key id,
  // as long as the largest list key's id); the reads that are not prefixes of it, each whole, in
  // operation order; and the initial lists.
  std::vector<std::vector<Value>> key_lists_;
  std::vector<Value> list_pool_;
  std::vector<Value> initial_list_pool_;
  absl::flat_hash_map<uint64_t, Retired> retired_;
  std::vector<Op> retired_ops_;
  std::vector<Value> retired_list_;
  size_t retired_name_bytes_ = 0;  // heap bytes of the retired names
  // Xids and snapshots of the transactions held, in transaction order, and of the retired ones.
  std::vector<XidEntry> xids_;
  std::vector<uint64_t> xip_pool_;
  std::vector<XidEntry> retired_xids_;
  std::vector<uint64_t> retired_xip_;
  size_t snapshot_txns_ = 0;  // transactions with a snapshot ever added
  StringPool ext_ids_;
  StringPool sessions_;
  std::vector<uint32_t> session_names_;
  std::vector<uint8_t> session_numeric_;
  StringPool bytes_;
  std::vector<KeyInfo> keys_;
  // The ids of forgotten keys, handed out again from the back.
  std::vector<uint32_t> free_keys_;
  absl::flat_hash_map<int64_t, KeyId> int_keys_;
  absl::flat_hash_map<uint32_t, KeyId> bytes_keys_;
  InitialState initial_;
  // Range reads in transaction order, their pairs, and for each transaction with any, the
  // [begin, end) of its own in range_reads_ (empty, and no memory, without range reads).
  std::vector<RangeRead> range_reads_;
  std::vector<KeyValue> range_pairs_;
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, uint32_t>> range_index_;
  absl::flat_hash_set<KeyValue> tombstones_;
  DataModel data_model_ = DataModel::kKeyValue;
  std::string source_;
  HistoryInfo info_;
  // Transactions ever added with a commit timestamp, a start timestamp, a real-time interval.
  size_t commit_txns_ = 0;
  size_t start_txns_ = 0;
  size_t real_time_txns_ = 0;
};

}  // namespace isowatch::history
