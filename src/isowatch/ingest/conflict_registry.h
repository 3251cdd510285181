// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest {

// The data model a header's metadata names ("data_model": "kv", "list" or "mixed"); nullopt when
// it names none or another.
std::optional<history::DataModel> DataModelOf(const v1::Header& header);

// What the daemon's live history holds against the transactions still to come, known at ingest:
// whether each key is a register or a list, and whether each session numbers its transactions
// (Transaction.seq) or not. Keys and sessions are shared by all streams. Fed every batch in the
// order of the log, Decide refuses exactly the transactions the live history would refuse for
// these reasons (HistoryBuilder::EndLiveTxn), so that they are refused in the batch's ack
// (docs/ingest-protocol.md, section 6) and never logged.
//
// Rules, for the batches in log order:
//  1. The first batch fixes the data model: its header's `data_model`, else the default.
//  2. A batch's header marks its initial registers as registers and its initial lists as lists,
//     as long as no transaction has been kept; after that, headers are ignored.
//  3. A transaction's operations are taken in order. Each marks its key a list (APPEND, LIST_READ,
//     and a READ of nothing, unknown reads included, when the key is a list already or the model
//     is "list") or a register (WRITE, a READ of a value); other reads mark nothing. The
//     transaction is refused with KEY_KIND_CONFLICT when an operation leaves its key marked both,
//     or a list under "kv"; then with SESSION_SEQ_CONFLICT when it gives a seq and its session's
//     kept transactions gave none, or the reverse (a seq over kMaxSessionSeq is refused too).
//  4. A refused transaction marks nothing; a kept one marks its keys and, if it is the first of
//     its session, the session's numbering.
// Keys are told apart as the live history tells them: an int key and a bytes key are different
// keys even when they print alike. A session is its name, session_int as its decimal text (so
// session_int 7 and session_str "7" are one session).
//
// Keys and sessions are compared by their bytes, never by a hash alone (as the history interns
// them), so no two are ever taken for one.
//
// Memory: one hash-table entry per key and per session ever kept, never dropped; under "kv" only
// the initial state's lists have a key entry (a register mark decides nothing there). An int key is
// held as its value (a 17-byte slot), a bytes key and a session as a copy of their bytes (a
// 33-byte slot, plus the bytes on the heap when they are longer than 15); the tables are 44% to
// 88% full.
//
// Thread-compatible: the daemon calls it under the lock that orders its log appends, and at
// recovery while it replays the log.
class ConflictRegistry {
 public:
  explicit ConflictRegistry(history::DataModel default_model = history::DataModel::kMixed);

  ConflictRegistry(const ConflictRegistry&) = delete;
  ConflictRegistry& operator=(const ConflictRegistry&) = delete;

  struct Decision {
    // The transactions of `accepted` kept, in order.
    std::vector<uint32_t> kept;
    // One per refused transaction, in batch order (MakeRefusal, with the batch's seq).
    std::vector<v1::Refusal> refusals;
  };

  // Decides the transactions at `accepted` (indices into batch.txns, increasing) of `batch`, the
  // next batch of the log, and applies the batch's header (rule 2) and the transactions it keeps.
  // Indices out of range are skipped. Never fails, whatever the input; the operations are
  // expected to have passed CheckTransaction (an operation without a key marks nothing).
  Decision Decide(const v1::IngestBatch& batch, std::span<const uint32_t> accepted);

  // Takes back everything the last Decide applied: its batch did not reach the log. Does
  // nothing when called again, or before any Decide.
  void Undo();

  // Starts from what live history `live` decided about its keys and sessions (after a restart
  // from a checkpoint, which saved the history but not this registry): its data model, each
  // key's kind and each session's numbering, as if its transactions had been decided here.
  // REQUIRES: nothing decided yet.
  void StartFrom(const history::HistoryBuilder& live);

  // Keys and sessions with an entry.
  size_t keys() const { return int_keys_.size() + bytes_keys_.size(); }
  size_t sessions() const { return sessions_.size(); }
  history::DataModel model() const { return model_; }

 private:
  // A key as looked up: the int, or the bytes (in the batch being decided).
  struct KeyRef {
    bool is_int = false;
    int64_t number = 0;
    std::string_view bytes;
  };
  // An entry as it was before a change; `bits` 0: there was none.
  struct KeyUndo {
    bool is_int = false;
    int64_t number = 0;
    std::string bytes;
    uint8_t bits = 0;
  };

  static KeyRef MakeKeyRef(const v1::Datum& key);
  uint8_t KeyBits(const KeyRef& key) const;
  // The marks kept for a key: under "kv" only a list mark, since a register mark decides nothing
  // there (rule 3), so the table holds no entry for a register key.
  uint8_t Kept(uint8_t bits) const;
  void SetKeyBits(const KeyRef& key, uint8_t before, uint8_t after);
  void MarkInitial(const v1::InitialState& initial);
  // Applies `txn` if it conflicts with nothing; otherwise changes nothing and says why.
  std::optional<Problem> Admit(const v1::Transaction& txn);
  // Restores the keys changed since the undo log held `mark` entries.
  void RestoreKeys(size_t mark);

  const history::DataModel default_model_;
  history::DataModel model_;
  bool started_ = false;   // rule 1 has fixed model_
  bool kept_any_ = false;  // some transaction was kept: rule 2 no longer applies
  absl::flat_hash_map<int64_t, uint8_t> int_keys_;
  absl::flat_hash_map<std::string, uint8_t> bytes_keys_;
  absl::flat_hash_map<std::string, uint8_t> sessions_;

  // What the last Decide changed, for Undo.
  bool undoable_ = false;
  bool started_before_ = false;
  bool kept_any_before_ = false;
  history::DataModel model_before_;
  std::vector<KeyUndo> key_undo_;
  std::vector<std::string> session_undo_;  // sessions the last Decide added
};

}  // namespace isowatch::ingest
