// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the Jepsen/Elle readers (EDN and elle-cli JSON): the operations of a Jepsen history
// in a form independent of the syntax, and the assembler that pairs them into transactions of a
// HistoryBuilder (docs/history-format.md, "Jepsen / Elle EDN").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats::internal {

// A key, value or list element of a micro-op. Bytes (strings, keywords) live in ElleOps::bytes.
struct ElleScalar {
  enum class Type : uint8_t { kNil, kInt, kString, kKeyword };
  Type type = Type::kNil;
  int64_t i = 0;
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct ElleMicroOp {
  enum class Kind : uint8_t { kRead, kWrite, kAppend };
  Kind kind = Kind::kRead;
  bool list = false;  // a read whose value is a sequence: the elements are in ElleOps::elements
  ElleScalar key;
  ElleScalar value;
  uint32_t list_begin = 0;
  uint32_t list_size = 0;
};

// The micro-ops of one operation's :value. Reused from operation to operation.
struct ElleOps {
  std::vector<ElleMicroOp> ops;
  std::vector<ElleScalar> elements;
  std::string bytes;

  void clear() {
    ops.clear();
    elements.clear();
    bytes.clear();
  }
  // Adds a string or keyword (keywords with their ':').
  ElleScalar AddBytes(ElleScalar::Type type, std::string_view text) {
    ElleScalar s{.type = type,
                 .offset = static_cast<uint32_t>(bytes.size()),
                 .size = static_cast<uint32_t>(text.size())};
    bytes.append(text);
    return s;
  }
  std::string_view Bytes(const ElleScalar& s) const {
    return std::string_view(bytes).substr(s.offset, s.size);
  }
};

enum class ElleType : uint8_t { kInvoke, kOk, kFail, kInfo };

// The type named `name` ("invoke", "ok", "fail", "info"; without EDN's ':'), if it is one.
inline std::optional<ElleType> ElleTypeNamed(std::string_view name) {
  if (name == "invoke") return ElleType::kInvoke;
  if (name == "ok") return ElleType::kOk;
  if (name == "fail") return ElleType::kFail;
  if (name == "info") return ElleType::kInfo;
  return std::nullopt;
}

// One operation of the history (one line of EDN, one object of JSON), as the syntax reader
// extracted it. `ops` is read only for a client :txn operation.
struct ElleOp {
  ElleType type = ElleType::kInvoke;
  enum class Process : uint8_t { kMissing, kInt, kOther } process_kind = Process::kMissing;
  int64_t process = 0;
  enum class F : uint8_t { kNil, kTxn, kOther } f = F::kNil;
  std::string_view f_text;  // for notes
  std::optional<int64_t> index;
  std::optional<int64_t> time;
  bool has_ts = false;
  int64_t rts = 0;
  std::optional<int64_t> cts;
  ElleOps ops;

  // Forgets what an earlier operation's fields said, before a reader reads the next: every
  // optional field absent, no micro-ops.
  void ClearFields() {
    process_kind = Process::kMissing;
    f = F::kNil;
    f_text = {};
    index.reset();
    time.reset();
    has_ts = false;
    cts.reset();
    ops.clear();
  }

  uint64_t offset = 0;    // byte offset in the source
  uint64_t position = 0;  // 0-based position among the file's operations
  uint64_t line = 0;      // 1-based line where the operation starts
  std::string_view text;  // the operation as written, for notes
};

// Pairs operations into transactions and adds them to a HistoryBuilder. Feed every operation in
// file order with Add (or AddMalformed), then call Finish. Not thread-safe.
class ElleAssembler {
 public:
  ElleAssembler(history::HistoryBuilder* builder, const ReadOptions& options,
                std::string source_name);

  // Whether the operation's :value must be read into `op.ops`: a client (integer or missing
  // :process) transaction (:f :txn or nil).
  static bool IsClientTxn(const ElleOp& op) {
    return op.process_kind != ElleOp::Process::kOther && op.f != ElleOp::F::kOther;
  }

  // Takes the next operation. Errors (InvalidArgument, naming op.where and :index): pairing
  // errors, and what the builder refuses (a duplicate id, :rts after :cts); in lenient mode these
  // are notes and the transaction is dropped.
  absl::Status Add(ElleOp& op);
  // Takes an operation whose :value could not be read (`error`): fails in strict mode; in
  // lenient mode notes it and drops its transaction (the pairing still sees it if `op` has its
  // type and process).
  absl::Status AddMalformed(ElleOp& op, const absl::Status& error);
  // Adds what is still open (dangling invocations), decides the dialect, and adds the notes.
  // Call once, before the builder's Finish.
  absl::Status Finish();
  // The dialect Finish decided: "list-append", "rw-register" or "mixed".
  const std::string& dialect() const { return dialect_; }

 private:
  struct Pending {
    bool open = false;
    bool malformed = false;
    std::optional<int64_t> index;
    std::optional<int64_t> time;
    uint64_t offset = 0;
    uint64_t position = 0;
    uint64_t order = 0;  // when it was invoked, for the dangling ones
    std::string session;
    uint64_t line = 0;
    ElleOps ops;
  };

  absl::Status Pair(ElleOp& op, bool malformed);
  // Adds one transaction: `ops` from the completion (or the dangling invocation).
  absl::Status Emit(const ElleOp* completion, const Pending* invocation, const ElleOps& ops,
                    history::TxnStatus status, uint64_t line, uint64_t offset,
                    std::optional<int64_t> id_index, uint64_t id_position,
                    std::string_view session);
  void EmitOps(const ElleOps& ops, bool observed, uint64_t line);
  KeyId Key(const ElleOps& ops, const ElleScalar& key, uint64_t line);
  history::Value Val(const ElleOps& ops, const ElleScalar& v);
  absl::Status Fail(const std::string& message);
  void Drop(std::string_view kind, const std::string& message);
  // "source:line", for messages.
  std::string Where(uint64_t line) const;
  std::string Example(const ElleOp& op) const;
  bool HasDuplicate(const std::vector<history::Value>& elements);

  history::HistoryBuilder* builder_;
  const ReadOptions& options_;
  std::string source_name_;

  absl::flat_hash_map<int64_t, Pending> pending_;  // by process
  Pending processless_;                            // no :process: adjacent pairing
  uint64_t invocations_ = 0;
  bool any_process_ = false;
  bool any_processless_ = false;
  std::string first_processless_;

  // Completion-only input: completions before any invocation.
  bool seen_invoke_ = false;
  uint64_t orphans_ = 0;
  std::string first_orphan_;

  std::optional<int64_t> last_time_;
  uint64_t txns_ = 0;
  uint64_t client_non_txn_ = 0;
  std::string first_non_txn_;
  bool any_txn_ = false;

  // :ts bookkeeping.
  uint64_t ok_with_ts_ = 0;
  uint64_t ok_without_ts_ = 0;
  std::string first_ok_without_ts_;

  // Dialect bookkeeping.
  bool any_append_ = false;
  bool any_write_ = false;
  bool any_list_read_ = false;
  std::string first_append_;
  std::string first_write_;
  uint8_t key_types_ = 0;         // bits: 1 integer, 2 keyword, 4 string
  std::vector<uint8_t> key_use_;  // per KeyId: 1 register, 2 list
  std::vector<history::Value> list_scratch_;
  std::vector<history::Value> dup_scratch_;
  // ReadOptions::init_txn.
  bool init_found_ = false;
  absl::flat_hash_map<KeyId, std::vector<history::Value>> initial_lists_;
  std::string dialect_;
};

}  // namespace isowatch::formats::internal
