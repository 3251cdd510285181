// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/elle_history.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::formats::internal {
namespace {

using history::TxnHeader;
using history::TxnStatus;
using history::Value;
using ::isowatch::KeyId;

constexpr size_t kExampleBytes = 120;

std::string IndexText(const std::optional<int64_t>& index) {
  return index ? fmt::format(":index {}", *index) : std::string("no :index");
}

}  // namespace

ElleAssembler::ElleAssembler(history::HistoryBuilder* builder, const ReadOptions& options,
                             std::string source_name)
    : builder_(builder), options_(options), source_name_(std::move(source_name)) {
  builder_->set_time_unit("ns");
  if (options_.initial_value) builder_->SetDefaultInitialValue(Value::Int(*options_.initial_value));
}

std::string ElleAssembler::Where(uint64_t line) const {
  return fmt::format("{}:{}", source_name_, line);
}

std::string ElleAssembler::Example(const ElleOp& op) const {
  std::string_view text = op.text;
  if (text.size() > kExampleBytes) {
    return fmt::format("{}: {} ...", Where(op.line), text.substr(0, kExampleBytes));
  }
  return fmt::format("{}: {}", Where(op.line), text);
}

absl::Status ElleAssembler::Fail(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

void ElleAssembler::Drop(std::string_view kind, const std::string& message) {
  builder_->Note(kind, message);
}

absl::Status ElleAssembler::Add(ElleOp& op) {
  if (op.time) {
    if (last_time_ && *op.time < *last_time_) {
      builder_->Note("operations whose :time goes back in file order (file order kept)",
                     Example(op));
    }
    last_time_ = op.time;
  }
  if (op.process_kind == ElleOp::Process::kOther) {
    builder_->Note("non-client operations (non-integer :process) skipped", Example(op));
    return absl::OkStatus();
  }
  if (op.f == ElleOp::F::kOther) {
    if (client_non_txn_++ == 0) first_non_txn_ = Example(op);
    builder_->Note("client operations whose :f is not :txn skipped", Example(op));
    return absl::OkStatus();
  }
  any_txn_ = true;
  return Pair(op, false);
}

absl::Status ElleAssembler::AddMalformed(ElleOp& op, const absl::Status& error) {
  if (!options_.lenient) return error;
  Drop("malformed operations dropped", std::string(error.message()));
  if (op.process_kind == ElleOp::Process::kOther || op.f == ElleOp::F::kOther) {
    return absl::OkStatus();
  }
  any_txn_ = true;
  return Pair(op, true);
}

absl::Status ElleAssembler::Pair(ElleOp& op, bool malformed) {
  Pending* slot = nullptr;
  if (op.process_kind == ElleOp::Process::kMissing) {
    if (any_process_) {
      return Fail(
          fmt::format("{}: {}: an operation without :process in a file whose other "
                      "operations have one",
                      Where(op.line), IndexText(op.index)));
    }
    if (!any_processless_) first_processless_ = Example(op);
    any_processless_ = true;
    slot = &processless_;
  } else {
    if (any_processless_) {
      return Fail(
          fmt::format("{}: {}: an operation with a :process in a file whose first "
                      "operations have none ({})",
                      Where(op.line), IndexText(op.index), first_processless_));
    }
    any_process_ = true;
    slot = &pending_[op.process];
  }
  const std::string process = op.process_kind == ElleOp::Process::kMissing
                                  ? "(no :process)"
                                  : fmt::format("{}", op.process);

  if (op.type == ElleType::kInvoke) {
    if (!seen_invoke_ && orphans_ > 0) {
      const std::string message = fmt::format(
          "{}: a completion without an invocation, in a file with invocations (the first at "
          "{})",
          first_orphan_, Where(op.line));
      if (!options_.lenient) return Fail(message);
      builder_->Note("completions without an invocation kept without a real-time interval",
                     message);
    }
    seen_invoke_ = true;
    if (slot->open) {
      const std::string message = fmt::format(
          "{}: {}: process {} invokes again while its invocation at {} ({}) has not completed",
          Where(op.line), IndexText(op.index), process, Where(slot->line), IndexText(slot->index));
      if (!options_.lenient) return Fail(message);
      if (!slot->malformed)
        Drop("invocations never completed before a double invoke dropped", message);
    }
    slot->open = true;
    slot->malformed = malformed;
    slot->index = op.index;
    slot->time = op.time;
    slot->offset = op.offset;
    slot->position = op.position;
    slot->order = invocations_++;
    slot->line = op.line;
    slot->session = process;
    std::swap(slot->ops, op.ops);
    return absl::OkStatus();
  }

  static constexpr TxnStatus kStatus[] = {TxnStatus::kUnknown, TxnStatus::kCommitted,
                                          TxnStatus::kAborted, TxnStatus::kUnknown};
  const TxnStatus status = kStatus[static_cast<int>(op.type)];
  if (!slot->open) {
    if (seen_invoke_) {
      const std::string message =
          fmt::format("{}: {}: a completion of process {} without an invocation", Where(op.line),
                      IndexText(op.index), process);
      if (!options_.lenient) return Fail(message);
      if (!malformed) Drop("completions without an invocation dropped", message);
      return absl::OkStatus();
    }
    // Completion-only input (so far).
    if (orphans_++ == 0) first_orphan_ = fmt::format("{}: {}", Where(op.line), IndexText(op.index));
    if (malformed) return absl::OkStatus();
    return Emit(&op, nullptr, op.ops, status, op.line, op.offset, op.index, op.position, process);
  }
  slot->open = false;
  if (malformed || slot->malformed) return absl::OkStatus();
  return Emit(&op, slot, op.ops, status, op.line, op.offset, op.index, op.position, process);
}

absl::Status ElleAssembler::Emit(const ElleOp* completion, const Pending* invocation,
                                 const ElleOps& ops, TxnStatus status, uint64_t line,
                                 uint64_t offset, std::optional<int64_t> id_index,
                                 uint64_t id_position, std::string_view session) {
  const std::string id = id_index ? fmt::format("{}", *id_index) : fmt::format("{}", id_position);
  if (!id_index) {
    builder_->Note("operations without :index (their ids are their 0-based positions in the file)",
                   fmt::format("{}: id {}", Where(line), id));
  }
  TxnHeader header;
  header.id = id;
  header.id_numeric = true;
  if (any_processless_) {
    header.session = id;
    header.session_numeric = true;
    builder_->Note("transactions without :process (each is a session of its own)",
                   fmt::format("{}: session {}", Where(line), id));
  } else {
    header.session = session;
    header.session_numeric = true;
  }
  header.status = status;
  header.source_offset = offset;
  if (invocation != nullptr && invocation->time && (completion == nullptr || completion->time)) {
    TxnHeader::RealTime rt{.invoke = *invocation->time};
    if (completion != nullptr) rt.complete = *completion->time;
    if (rt.complete < rt.invoke) {
      builder_->Note(
          "completions whose :time is before their invocation's (interval dropped)",
          fmt::format("{}: invoked at {}, completed at {}", Where(line), rt.invoke, rt.complete));
    } else {
      header.real_time = rt;
    }
  }
  if (completion != nullptr) {
    if (completion->has_ts) {
      if (status == TxnStatus::kCommitted) {
        ++ok_with_ts_;
        header.start = history::Timestamp{completion->rts, 0};
        header.commit = history::Timestamp{completion->cts.value_or(completion->rts), 0};
      } else {
        builder_->Note(":ts on a completion other than :ok ignored", Where(line));
      }
    } else if (status == TxnStatus::kCommitted) {
      if (ok_without_ts_++ == 0) first_ok_without_ts_ = Where(line);
    }
  }
  if (options_.init_txn && *options_.init_txn == id) {
    // The initial state: its writes are the keys' values before the history.
    for (const ElleMicroOp& m : ops.ops) {
      const KeyId key = Key(ops, m.key, line);
      if (m.kind == ElleMicroOp::Kind::kWrite) {
        builder_->SetInitialRegister(key, Val(ops, m.value));
        if (key.value() >= key_use_.size()) key_use_.resize(key.value() + 1, 0);
        key_use_[key.value()] |= 1;
      } else if (m.kind == ElleMicroOp::Kind::kAppend) {
        initial_lists_[key].push_back(Val(ops, m.value));
        if (key.value() >= key_use_.size()) key_use_.resize(key.value() + 1, 0);
        key_use_[key.value()] |= 2;
      }
    }
    init_found_ = true;
    return absl::OkStatus();
  }
  if (absl::Status s = builder_->BeginTxn(header); !s.ok()) {
    const std::string message = fmt::format("{}: {}", Where(line), std::string(s.message()));
    if (!options_.lenient) return Fail(message);
    Drop("transactions refused by the history (dropped)", message);
    return absl::OkStatus();
  }
  EmitOps(ops, status == TxnStatus::kCommitted, line);
  builder_->EndTxn();
  ++txns_;
  return absl::OkStatus();
}

KeyId ElleAssembler::Key(const ElleOps& ops, const ElleScalar& key, uint64_t line) {
  uint8_t type = 1;
  KeyId id;
  switch (key.type) {
    case ElleScalar::Type::kInt:
    case ElleScalar::Type::kNil:
      id = builder_->IntKey(key.i);
      break;
    case ElleScalar::Type::kKeyword:
      type = 2;
      id = builder_->BytesKey(ops.Bytes(key));
      break;
    case ElleScalar::Type::kString:
      type = 4;
      id = builder_->BytesKey(ops.Bytes(key));
      break;
  }
  if ((key_types_ | type) != key_types_) {
    if (key_types_ != 0) {
      builder_->Note("keys of more than one type (integer, keyword, string; kept apart)",
                     Where(line));
    }
    key_types_ |= type;
  }
  return id;
}

Value ElleAssembler::Val(const ElleOps& ops, const ElleScalar& v) {
  switch (v.type) {
    case ElleScalar::Type::kNil:
      return Value::Absent();
    case ElleScalar::Type::kInt:
      return Value::Int(v.i);
    case ElleScalar::Type::kString:
    case ElleScalar::Type::kKeyword:
      return builder_->BytesValue(ops.Bytes(v));
  }
  return Value::Absent();
}

void ElleAssembler::EmitOps(const ElleOps& ops, bool observed, uint64_t line) {
  for (const ElleMicroOp& m : ops.ops) {
    const KeyId key = Key(ops, m.key, line);
    if (key.value() >= key_use_.size()) key_use_.resize(key.value() + 1, 0);
    uint8_t& use = key_use_[key.value()];
    switch (m.kind) {
      case ElleMicroOp::Kind::kRead:
        if (m.list) {
          list_scratch_.clear();
          for (uint32_t i = 0; i < m.list_size; ++i) {
            list_scratch_.push_back(Val(ops, ops.elements[m.list_begin + i]));
          }
          if (HasDuplicate(list_scratch_)) {
            builder_->Note("list reads holding an element twice (kept for the checker)",
                           Where(line));
          }
          builder_->ListRead(key, list_scratch_);
          any_list_read_ = true;
          use |= 2;
        } else if (m.value.type == ElleScalar::Type::kNil) {
          if (observed) {
            builder_->Read(key, Value::Absent());
          } else {
            builder_->UnknownRead(key);
          }
        } else {
          builder_->Read(key, Val(ops, m.value));
          use |= 1;
        }
        break;
      case ElleMicroOp::Kind::kWrite:
        if (!any_write_) first_write_ = Where(line);
        any_write_ = true;
        builder_->Write(key, Val(ops, m.value));
        use |= 1;
        break;
      case ElleMicroOp::Kind::kAppend:
        if (!any_append_) first_append_ = Where(line);
        any_append_ = true;
        builder_->Append(key, Val(ops, m.value));
        use |= 2;
        break;
    }
  }
}

bool ElleAssembler::HasDuplicate(const std::vector<Value>& elements) {
  const size_t n = elements.size();
  if (n < 2) return false;
  if (n <= 16) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        if (elements[i] == elements[j]) return true;
      }
    }
    return false;
  }
  dup_scratch_.assign(elements.begin(), elements.end());
  std::sort(dup_scratch_.begin(), dup_scratch_.end(), [](const Value& a, const Value& b) {
    return a.kind() != b.kind() ? a.kind() < b.kind() : a.payload() < b.payload();
  });
  return std::adjacent_find(dup_scratch_.begin(), dup_scratch_.end()) != dup_scratch_.end();
}

absl::Status ElleAssembler::Finish() {
  // Invocations never completed, in the order they were invoked.
  std::vector<Pending*> dangling;
  if (processless_.open) dangling.push_back(&processless_);
  for (auto& [process, p] : pending_) {
    if (p.open) dangling.push_back(&p);
  }
  std::sort(dangling.begin(), dangling.end(),
            [](const Pending* a, const Pending* b) { return a->order < b->order; });
  for (Pending* p : dangling) {
    p->open = false;
    if (p->malformed) continue;
    RETURN_IF_ERROR(Emit(nullptr, p, p->ops, TxnStatus::kUnknown, p->line, p->offset, p->index,
                         p->position, p->session));
  }
  if (!any_txn_ && client_non_txn_ > 0) {
    return Fail(
        fmt::format("{}: a non-transactional workload (no operation has :f :txn or no :f), e.g. {}",
                    source_name_, first_non_txn_));
  }
  if (ok_with_ts_ > 0 && ok_without_ts_ > 0) {
    for (uint64_t i = 0; i < ok_without_ts_; ++i) {
      builder_->Note(":ok completions without :ts in a file with :ts (no timestamps)",
                     first_ok_without_ts_);
    }
  }
  if (options_.init_txn && !init_found_) {
    return Fail(fmt::format("{}: the initial transaction {} is not in the history", source_name_,
                            *options_.init_txn));
  }
  for (const auto& [key, elements] : initial_lists_) builder_->SetInitialList(key, elements);

  // The dialect.
  const std::string& option = options_.dialect;
  if (!option.empty() && option != "list-append" && option != "rw-register") {
    return Fail(
        fmt::format("unknown EDN dialect '{}' (expected list-append or rw-register)", option));
  }
  std::string dialect;
  if (any_append_ && any_write_) {
    dialect = "mixed";
    builder_->Note("a history of both :append and :w (list and register keys)",
                   fmt::format("first :append at {}, first :w at {}", first_append_, first_write_));
  } else if (any_append_) {
    dialect = "list-append";
  } else if (any_write_) {
    dialect = "rw-register";
  } else if (!option.empty()) {
    dialect = option;
  } else {
    dialect = any_list_read_ ? "list-append" : "rw-register";
  }
  if (!option.empty() && option != dialect && (any_append_ || any_write_)) {
    builder_->Note("dialect option overruled by the file's writes",
                   fmt::format("--dialect {}, the file is {}", option, dialect));
  }
  if (dialect == "list-append") {
    // Keys only ever read as nil (or unknown) are lists too.
    for (size_t k = 0; k < key_use_.size(); ++k) {
      if (key_use_[k] == 0) builder_->SetInitialList(KeyId(static_cast<uint32_t>(k)), {});
    }
  }
  dialect_ = dialect;
  return absl::OkStatus();
}

}  // namespace isowatch::formats::internal
