// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/history/history.h"

namespace isowatch::v1 {
class HistoryCheckpoint;
}  // namespace isowatch::v1

namespace isowatch::history {

// Everything about a transaction except its operations.
struct TxnHeader {
  std::string_view id;      // as written in the source; unique within the history
  bool id_numeric = false;  // the source wrote the id as a number
  // The reader knows that no transaction before has this id (it numbers them itself), so
  // BeginTxn need not look it up (a lookup in a table of millions of ids misses the cache).
  // REQUIRES: true only for such an id.
  bool id_new = false;
  std::string_view session;  // session id as written in the source
  bool session_numeric = false;
  std::optional<int64_t> seq;  // position in the session; absent = order of BeginTxn calls
  TxnStatus status = TxnStatus::kCommitted;
  std::optional<Timestamp> start;
  std::optional<Timestamp> commit;
  // The client's real-time interval (Transaction::invoke_time, complete_time).
  struct RealTime {
    int64_t invoke = 0;
    int64_t complete = Transaction::kNeverCompleted;
  };
  std::optional<RealTime> real_time;
  uint64_t source_offset = 0;  // byte offset or record number in the source
  uint64_t xid = 0;            // the database's id of the transaction; 0 = none
  // A PostgreSQL snapshot, in place of `start`; its xip need only live until BeginTxn returns.
  std::optional<SnapshotView> snapshot;
};

// Builds a History one transaction at a time, interning keys and values as they come, so that a
// reader can stream a file into it without holding the file's contents twice.
//
// Usage: BeginTxn, then the operations, then EndTxn (or AbandonTxn to drop the transaction, e.g.
// in a lenient reader); repeat; then Finish. Thread-compatible.
class HistoryBuilder {
 public:
  HistoryBuilder();

  void set_source(std::string source) { history_.source_ = std::move(source); }
  // What HistoryInfo says of the source (its notes are added with Note).
  void set_format(std::string format, std::string dialect = {}) {
    history_.info_.format = std::move(format);
    history_.info_.dialect = std::move(dialect);
  }
  void set_time_unit(std::string unit) { history_.info_.time_unit = std::move(unit); }
  // Counts a note of `kind` (SourceNote); the first of its kind keeps `example`.
  void Note(std::string_view kind, std::string_view example);
  // Notes of `kind` so far.
  uint64_t NoteCount(std::string_view kind) const;

  // Makes room for `txns` transactions and `ops` operations in all, so that a reader that can
  // estimate the size of its input spares the copies of growing one step at a time. Estimate on
  // the high side: room never filled costs address space, not memory, while an array that
  // outgrows its room is copied, and memory first touched is slow to get (bench/README.md,
  // "Reading history formats"). Held to a quarter of the machine's memory.
  void Reserve(size_t txns, size_t ops);
  // Where the history's two large arrays are and how far they are filled, for a reader that has
  // the kernel back the room ahead of the filling on another thread (PopulateForWrite) while
  // this thread fills it. Valid until an array outgrows its room; even then, populating the old
  // range costs only time, since populating changes no contents.
  struct ArrayRoom {
    std::byte* data = nullptr;
    size_t element_size = 0;
    size_t size = 0;      // elements filled
    size_t capacity = 0;  // elements
  };
  ArrayRoom TxnRoom() { return RoomOf(history_.txns_); }
  ArrayRoom OpRoom() { return RoomOf(history_.ops_); }

  // Interning.
  KeyId IntKey(int64_t k);
  // IntKey of a key the caller knows is new, without looking it up: for a reader that keeps
  // the table of keys itself and gives it with SetIntKeys before IntKey is called again.
  // REQUIRES: no key `k` was added; !live().
  KeyId AddNewIntKey(int64_t k) {
    return AddKey(KeyInfo{.is_int = true, .is_list = false, .payload = k});
  }
  // Makes `keys` the table IntKey looks integer keys up in. REQUIRES: it maps each integer key
  // added so far, by IntKey or AddNewIntKey, to its id, and no other key.
  void SetIntKeys(absl::flat_hash_map<int64_t, KeyId> keys);
  KeyId BytesKey(std::string_view k);
  Value BytesValue(std::string_view v);

  // Starts a transaction. Errors (InvalidArgument): a duplicate id, start after commit, a
  // malformed snapshot (SnapshotDefect), a snapshot together with a start timestamp.
  // REQUIRES: no transaction is open.
  absl::Status BeginTxn(const TxnHeader& header);
  // Operations of the open transaction, in program order.
  void Read(KeyId key, Value observed);
  void UnknownRead(KeyId key);
  void Write(KeyId key, Value v);
  void Append(KeyId key, Value element);
  // A read of list `key` that observed `elements`. A read that is a prefix of the longest read
  // of the key so far is held as a length into it, and a read that extends it adds only its new
  // elements; any other read is held whole (docs/engine.md, "List storage").
  void ListRead(KeyId key, std::span<const Value> elements);
  // Streaming form of ListRead: ListReadBegin, ListReadElement*, ListReadEnd. The elements are
  // compared with the key's list as they come, so a read is never held twice.
  void ListReadBegin(KeyId key);
  void ListReadElement(Value element);
  void ListReadEnd();
  // ListRead of integer elements, with the usual case (a prefix of the key's list) compared in
  // one loop.
  void ListReadInts(KeyId key, std::span<const int64_t> elements);
  // ListRead of a read the caller has compared with the key's list itself (the TimeKiller
  // reader keeps a copy of the lists as text): a read of the list's first
  // `size` elements, held as a length into it without a comparison. The list may be given
  // later, by SetKeyList.
  // REQUIRES: the read observed the first `size` elements of the key's list as ListRead would
  // have made it; before ListRead is given a read of the key, and before Finish, the list has
  // been given by SetKeyList.
  void ListReadPrefix(KeyId key, uint32_t size);
  // ListRead of a read the caller has found to be neither a prefix of the key's list nor the
  // whole list and more (as ListReadPrefix): held whole apart from the list, which it leaves
  // as it is. REQUIRES: the read is such a read.
  void ListReadApart(KeyId key, std::span<const int64_t> elements);
  // Makes `list` the list of `key`: what ListRead compares the key's reads with, and what the
  // reads given by ListReadPrefix are prefixes of. Like MarkTombstone, it belongs to the history,
  // not to the open transaction. REQUIRES: no read given by ListRead made the key's list longer.
  void SetKeyList(KeyId key, std::vector<Value> list);
  // Software prefetch for a read of `n` elements of list `key` some operations ahead, in two
  // steps a few operations apart: the key's list record, then (once that is in cache) as many of
  // the list's first elements as the read will be compared with. Neither changes anything.
  void PrefetchKeyList(KeyId key) const {
    if (key.value() < history_.key_lists_.size()) {
      __builtin_prefetch(&history_.key_lists_[key.value()]);
    }
  }
  void PrefetchKeyListElements(KeyId key, size_t n) const {
    if (key.value() >= history_.key_lists_.size()) return;
    const std::vector<Value>& list = history_.key_lists_[key.value()];
    const auto* first = reinterpret_cast<const char*>(list.data());
    const size_t bytes = std::min(n, list.size()) * sizeof(Value);
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(first + b);
  }
  // A range read of the open transaction (range_read.h), after the operations added so far: the
  // keys in [low, high] and the records it returned, live and tombstoned. Its keys are register
  // keys (Finish refuses a key also used as a list).
  // REQUIRES: a transaction is open; !live() (the ingest protocol has no range reads, and the
  // online engine does not judge them).
  void RangeRead(KeyBound low, KeyBound high, std::span<const KeyValue> live,
                 std::span<const KeyValue> dead);
  // Marks `v` as a tombstone of `key` (History::IsTombstone): a value a delete wrote. A mark
  // belongs to the history, not to the open transaction: AbandonTxn keeps it.
  // REQUIRES: !live().
  void MarkTombstone(KeyId key, Value v);
  // Closes the open transaction.
  void EndTxn();
  // Drops the open transaction and its operations, as if BeginTxn had not been called.
  void AbandonTxn();
  bool txn_open() const { return open_; }
  // Transactions added so far (released ones included).
  size_t txn_count() const { return history_.size(); }
  // Key ids handed out so far, and the key each names (History::key_count, History::key).
  size_t key_count() const { return history_.key_count(); }
  const KeyInfo& key(KeyId id) const { return history_.key(id); }
  // The operations added so far, in the order added (an abandoned transaction's are gone).
  // Invalidated by the next operation added. REQUIRES: !live().
  std::span<const Op> ops() const { return history_.ops_; }

  // Live mode, for the daemon: the history is read (by the online engine) while it grows, so
  // each transaction is complete when it is closed, instead of in Finish. Call before any
  // transaction; `model` says how a read of an absent value is taken (kList: every key is a list;
  // kKeyValue: no key is; kMixed: keys are lists once appended to or read as a list, or listed in
  // the initial state). Session positions are the given sequence numbers, or the order in which
  // the session's transactions are added; session_prev is not linked.
  void StartLive(DataModel model);
  bool live() const { return live_; }
  // The history as built so far. REQUIRES: live().
  const History& live_history() const { return history_; }
  // Live mode: closes the open transaction and returns its id. Errors (InvalidArgument; the
  // transaction is then dropped as by AbandonTxn): a key used both as a register and as a list,
  // by this transaction and earlier ones or by this one alone (or as a list under kKeyValue); a
  // session that gives sequence numbers for some transactions but not others. The daemon decides
  // the same at ingest (ingest::ConflictRegistry), so these should not happen there.
  absl::StatusOr<TxnId> EndLiveTxn();
  // Live mode: whether `key` has been used as a register (written, or read with a value).
  bool LiveRegister(KeyId key) const {
    return key.value() < live_register_.size() && (live_register_[key.value()] & kLiveRegister);
  }
  // Live mode: how `session` numbers its transactions: 0 no transaction yet, 1 with the given
  // sequence numbers, 2 in the order they are added.
  uint8_t LiveSessionNumbering(SessionId session) const {
    return session.value() < live_session_mode_.size() ? live_session_mode_[session.value()] : 0;
  }
  // Live mode: records which source (e.g. stream) delivered transaction `id`.
  void SetOrigin(TxnId id, uint16_t origin);
  // Live mode: forgets the transactions before `upto` still held, except those `keep` returns
  // true for, which are kept as retired, as are the retired ones it still returns true for
  // (`keep` is asked once about each). A forgotten transaction's id stays taken and its source
  // id may be used again. A key list (ListRead) that no read held any more shares goes, or is
  // cut to what they share. Invalidates references into the history. Costs O(transactions held
  // from `upto` on + retired ones + list keys): call it when at least as many are released as
  // stay held.
  // REQUIRES: live(), no transaction open.
  void ReleaseLive(TxnId upto, absl::FunctionRef<bool(TxnId)> keep) {
    ReleaseLive(upto, keep, [](TxnId) {});
  }
  // The same, and `ahead` is told each id a few calls before `keep` is asked about it (a hint,
  // for a `keep` that can fetch what it will read ahead of time).
  void ReleaseLive(TxnId upto, absl::FunctionRef<bool(TxnId)> keep,
                   absl::FunctionRef<void(TxnId)> ahead);
  // Live mode: forgets the byte strings (values, and the bytes of keys) that neither the history
  // nor `marks` refers to, so that their memory is reclaimed and their pool indices are handed
  // out again (docs/engine.md, "Byte strings"). `marks` (MarkBytes) holds every index the caller
  // keeps outside the history (the engine's state, the windows being cut); this call adds the
  // history's own: the operations and list reads of the transactions held and retired, the
  // initial state and every key. Returns how many were forgotten. Invalidates the views of byte
  // strings (History::bytes). O(byte strings + operations held + keys).
  // REQUIRES: live(), no transaction open.
  size_t CollectBytes(std::vector<uint64_t>& marks);
  // Live mode: forgets the register keys that neither the history nor `marks` refers to, so that
  // their ids are handed out again to keys interned later and what the history held for them
  // goes (docs/engine.md, "Forgetting keys"). `marks` holds a bit per key id the caller keeps
  // (the engine's keys in memory); this call adds the history's own: the keys of the operations
  // of the transactions held and retired, and of the initial state. List keys are never
  // forgotten: whether a key is a list is decided once. A forgotten key interned again is a new
  // key to the history (IntKey and BytesKey give it the next free id); its bytes, for a bytes
  // key, go at the next CollectBytes. Returns the ids forgotten, in increasing order.
  // O(keys + operations held). REQUIRES: live(), no transaction open.
  std::vector<KeyId> CollectKeys(std::vector<uint64_t>& marks);
  // Live mode: writes everything the history holds, and the builder's live state, to `out`
  // (whose previous contents are replaced). REQUIRES: live(), no transaction open.
  void SaveLive(v1::HistoryCheckpoint* out) const;
  // Live mode: makes this builder (fresh: nothing added yet, StartLive called or not) the one
  // `checkpoint` was saved from: the same transactions, ids, keys, byte pool indices, sessions
  // and initial state, and the same ids and errors for what is added next. Errors: DataLoss
  // naming what is inconsistent when the checkpoint is malformed (the builder is then left as
  // it was); FailedPrecondition when the builder is not fresh or the checkpoint's version is not
  // one this code reads.
  absl::Status RestoreLive(const v1::HistoryCheckpoint& checkpoint);

  // Initial state.
  void SetDefaultInitialValue(Value v) { history_.initial_.default_value = v; }
  void SetInitialRegister(KeyId key, Value v) { history_.initial_.registers[key] = v; }
  // The initial value of register `key` is `v`, a version a transaction installed
  // (InitialState::versions).
  void SetInitialVersion(KeyId key, Value v) {
    SetInitialRegister(key, v);
    history_.initial_.versions.insert(key);
  }
  void SetInitialList(KeyId key, std::span<const Value> elements);

  // Validates and freezes the history: decides which keys are lists (an absent read of a list key
  // becomes a read of the empty list), orders each session and links session predecessors.
  // Errors (InvalidArgument): a key used both as a register and as a list; a session with some
  // but not all sequence numbers, or a repeated one.
  absl::StatusOr<History> Finish() &&;

 private:
  // SaveLive and RestoreLive's encoding (history_checkpoint.cc).
  struct Checkpoint;

  // A new key id for `info`: a forgotten key's (CollectKeys) if there is one.
  KeyId AddKey(const KeyInfo& info);
  // Range reads (range_read.cc): drops those of the open transaction; marks every key of a range
  // read in `used_as_register` (Finish).
  void DropOpenRangeReads();
  void MarkRangeReadKeys(std::vector<uint8_t>& used_as_register) const;

  // Numbers each session's transactions (seq, session_prev) in transaction order, and returns
  // true, if that is their order: every session gives no sequence numbers, or increasing ones.
  // Else returns false, having numbered some, for NumberSessionsBySeq to number them all.
  bool NumberSessionsInOrder();
  // Numbers each session's transactions in the order of their given sequence numbers, or in
  // transaction order where a session gives none. Errors: a session gives sequence numbers for
  // some transactions only, or repeats one (InvalidArgument).
  absl::Status NumberSessionsBySeq();

  // The list read being streamed turns out not to be a prefix of its key's list.
  void ListReadDiverge();
  template <typename Array>
  static ArrayRoom RoomOf(Array& array) {
    return {reinterpret_cast<std::byte*>(array.data()), sizeof(array[0]), array.size(),
            array.capacity()};
  }

  History history_;
  // IntKey's cache of History::int_keys_ for keys in [0, kDenseIntKeys), which most histories'
  // integer keys are: the key id + 1 at index k, 0 where not cached.
  static constexpr uint64_t kDenseIntKeys = uint64_t{1} << 20;
  std::vector<uint32_t> dense_int_keys_;
  bool open_ = false;
  bool finished_ = false;
  // The list read being streamed (ListReadBegin to ListReadEnd): its key and that key's list,
  // the elements so far, whether they are a prefix of that list (else they are in the general
  // pool from list_read_begin_ on), and whether they made it longer.
  KeyId list_read_key_;
  std::vector<Value>* list_read_base_ = nullptr;
  uint32_t list_read_size_ = 0;
  bool list_read_shared_ = true;
  bool list_read_extends_ = false;
  uint64_t list_read_begin_ = 0;
  // The key lists the open transaction's reads made longer, with their lengths before, in
  // order (AbandonTxn gives them back).
  std::vector<std::pair<uint32_t, uint64_t>> txn_extended_;
  // Per transaction: given sequence numbers (or -1), for Finish.
  std::vector<int64_t> given_seq_;
  // Live mode.
  bool live_ = false;
  // Per key: kLiveRegister once used as a register; the other bits only while EndLiveTxn checks
  // a transaction (the keys it marked are in live_touched_).
  static constexpr uint8_t kLiveRegister = 1;
  static constexpr uint8_t kLiveTxnRegister = 2;
  static constexpr uint8_t kLiveTxnList = 4;
  static constexpr uint8_t kLiveTxnMarks = kLiveTxnRegister | kLiveTxnList;
  std::vector<uint8_t> live_register_;
  std::vector<uint32_t> live_touched_;
  std::vector<uint8_t> live_session_mode_;  // per session: 0 unknown, 1 given seq, 2 implicit
  std::vector<uint32_t> live_next_seq_;     // per session: next implicit position
};

}  // namespace isowatch::history
