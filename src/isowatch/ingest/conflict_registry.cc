// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/conflict_registry.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include <fmt/format.h>

#include "isowatch/ingest/txn_fingerprint.h"

namespace isowatch::ingest {
namespace {

using history::DataModel;

// A name as the tables look it up, without a copy (their hash and equality take
// absl::string_view).
absl::string_view Lookup(std::string_view name) { return {name.data(), name.size()}; }

// Key marks.
constexpr uint8_t kRegister = 1;
constexpr uint8_t kList = 2;
// Session numbering.
constexpr uint8_t kNumbered = 1;    // its transactions give seq
constexpr uint8_t kUnnumbered = 2;  // they do not

// How much of a bytes key or session name a refusal's detail shows.
constexpr size_t kMaxNameBytes = 64;

bool HasValue(const v1::Datum& d) { return d.kind_case() != v1::Datum::KIND_NOT_SET; }

// A name for a refusal's detail, in ASCII: quoted and escaped as the history prints it, cut.
std::string Quote(std::string_view bytes) {
  const bool cut = bytes.size() > kMaxNameBytes;
  if (cut) bytes = bytes.substr(0, kMaxNameBytes);
  return fmt::format("\"{}{}\"", absl::CHexEscape(absl::string_view(bytes.data(), bytes.size())),
                     cut ? "..." : "");
}

std::string KeyText(const v1::Datum& key) {
  if (key.kind_case() == v1::Datum::kInt) return fmt::format("{}", key.int_());
  return Quote(key.bytes());
}

// What `op` marks its key with, given the key's marks so far (rule 3).
uint8_t OpMark(const v1::Operation& op, uint8_t marks, DataModel model) {
  switch (op.kind()) {
    case v1::Operation::WRITE:
      return kRegister;
    case v1::Operation::APPEND:
      return kList;
    case v1::Operation::LIST_READ:
      // An unknown LIST_READ is an unknown read: a read of nothing known.
      if (!op.unknown()) return kList;
      break;
    case v1::Operation::READ:
      if (!op.unknown() && HasValue(op.value())) return kRegister;
      break;
    default:
      return 0;
  }
  return model == DataModel::kList || (marks & kList) != 0 ? kList : 0;
}

bool Conflicting(uint8_t marks, DataModel model) {
  return (marks & kList) != 0 && ((marks & kRegister) != 0 || model == DataModel::kKeyValue);
}

}  // namespace

std::optional<DataModel> DataModelOf(const v1::Header& header) {
  auto it = header.metadata().find("data_model");
  if (it == header.metadata().end()) return std::nullopt;
  if (it->second == "kv") return DataModel::kKeyValue;
  if (it->second == "list") return DataModel::kList;
  if (it->second == "mixed") return DataModel::kMixed;
  return std::nullopt;
}

ConflictRegistry::ConflictRegistry(DataModel default_model)
    : default_model_(default_model), model_(default_model), model_before_(default_model) {}

ConflictRegistry::KeyRef ConflictRegistry::MakeKeyRef(const v1::Datum& key) {
  if (key.kind_case() == v1::Datum::kInt) return KeyRef{.is_int = true, .number = key.int_()};
  return KeyRef{.bytes = key.bytes()};
}

uint8_t ConflictRegistry::KeyBits(const KeyRef& key) const {
  if (key.is_int) {
    auto it = int_keys_.find(key.number);
    return it == int_keys_.end() ? 0 : it->second;
  }
  auto it = bytes_keys_.find(Lookup(key.bytes));
  return it == bytes_keys_.end() ? 0 : it->second;
}

uint8_t ConflictRegistry::Kept(uint8_t bits) const {
  return model_ == DataModel::kKeyValue ? bits & kList : bits;
}

void ConflictRegistry::SetKeyBits(const KeyRef& key, uint8_t before, uint8_t after) {
  key_undo_.push_back(KeyUndo{.is_int = key.is_int,
                              .number = key.number,
                              .bytes = key.is_int ? std::string() : std::string(key.bytes),
                              .bits = before});
  if (key.is_int) {
    int_keys_[key.number] = after;
  } else {
    bytes_keys_[std::string(key.bytes)] = after;
  }
}

void ConflictRegistry::RestoreKeys(size_t mark) {
  while (key_undo_.size() > mark) {
    const KeyUndo& u = key_undo_.back();
    if (u.is_int) {
      if (u.bits == 0) {
        int_keys_.erase(u.number);
      } else {
        int_keys_[u.number] = u.bits;
      }
    } else if (u.bits == 0) {
      bytes_keys_.erase(u.bytes);
    } else {
      bytes_keys_[u.bytes] = u.bits;
    }
    key_undo_.pop_back();
  }
}

void ConflictRegistry::StartFrom(const history::HistoryBuilder& live) {
  const history::History& h = live.live_history();
  started_ = true;
  model_ = h.data_model();
  kept_any_ = h.size() > 0;
  undoable_ = false;
  key_undo_.clear();
  session_undo_.clear();
  for (uint32_t k = 0; k < h.key_count(); ++k) {
    const KeyId key(k);
    const history::KeyInfo& info = h.key(key);
    if (info.forgotten) continue;
    const uint8_t bits =
        Kept((info.is_list ? kList : 0) |
             (live.LiveRegister(key) || h.initial().registers.contains(key) ? kRegister : 0));
    if (bits == 0) continue;
    if (info.is_int) {
      int_keys_[info.payload] = bits;
    } else {
      bytes_keys_[std::string(h.bytes(static_cast<uint32_t>(info.payload)))] = bits;
    }
  }
  for (uint32_t s = 0; s < h.session_count(); ++s) {
    const uint8_t mode = live.LiveSessionNumbering(SessionId(s));
    if (mode == 0) continue;
    sessions_[std::string(h.session_name(SessionId(s)))] = mode == 1 ? kNumbered : kUnnumbered;
  }
}

void ConflictRegistry::MarkInitial(const v1::InitialState& initial) {
  auto mark = [this](const v1::Datum& key, uint8_t bits) {
    if (!HasValue(key)) return;
    const KeyRef ref = MakeKeyRef(key);
    const uint8_t before = KeyBits(ref);
    const uint8_t after = Kept(before | bits);
    if (after != before) SetKeyBits(ref, before, after);
  };
  for (const v1::InitialState::Register& r : initial.registers()) mark(r.key(), kRegister);
  for (const v1::InitialState::List& l : initial.lists()) mark(l.key(), kList);
}

std::optional<Problem> ConflictRegistry::Admit(const v1::Transaction& txn) {
  const size_t mark = key_undo_.size();
  for (int i = 0; i < txn.ops_size(); ++i) {
    const v1::Operation& op = txn.ops(i);
    if (!HasValue(op.key())) continue;
    const KeyRef key = MakeKeyRef(op.key());
    const uint8_t before = KeyBits(key);
    const uint8_t op_mark = OpMark(op, before, model_);
    const uint8_t after = before | op_mark;
    if (Conflicting(after, model_)) {
      RestoreKeys(mark);
      std::string detail;
      if (model_ == DataModel::kKeyValue) {
        detail = fmt::format("ops[{}]: key {} is used as a list, and the data model is \"kv\"", i,
                             KeyText(op.key()));
      } else if (op_mark == kList) {
        detail = fmt::format(
            "ops[{}]: key {} is a register (written or read with a value before, or an initial "
            "register) and the operation uses it as a list",
            i, KeyText(op.key()));
      } else if (op_mark == kRegister) {
        detail = fmt::format(
            "ops[{}]: key {} is a list (appended to or read as a list before, or an initial "
            "list) and the operation uses it as a register",
            i, KeyText(op.key()));
      } else {
        detail = fmt::format("ops[{}]: key {} is both an initial register and an initial list", i,
                             KeyText(op.key()));
      }
      return Problem{v1::KEY_KIND_CONFLICT, std::move(detail)};
    }
    if (Kept(after) != before) SetKeyBits(key, before, Kept(after));
  }

  // The session, named as the live history interns it: session_int as its decimal text.
  char digits[24];
  std::string_view name;
  if (txn.session_case() == v1::Transaction::kSessionInt) {
    name = std::string_view(digits,
                            fmt::format_to_n(digits, sizeof(digits), "{}", txn.session_int()).size);
  } else if (txn.session_case() == v1::Transaction::kSessionStr) {
    name = txn.session_str();
  }
  auto it = sessions_.find(Lookup(name));
  const uint8_t numbering = it == sessions_.end() ? 0 : it->second;
  const uint8_t wanted = txn.has_seq() ? kNumbered : kUnnumbered;
  if (txn.seq() < 0 || txn.seq() > kMaxSessionSeq) {
    // CheckTransaction refuses these first; here for the logs of older versions.
    RestoreKeys(mark);
    return Problem{v1::MALFORMED_TRANSACTION,
                   fmt::format("session position {} out of range (expected 0 to {})", txn.seq(),
                               kMaxSessionSeq)};
  }
  if (numbering != 0 && numbering != wanted) {
    RestoreKeys(mark);
    return Problem{
        v1::SESSION_SEQ_CONFLICT,
        wanted == kNumbered
            ? fmt::format(
                  "session {} gave no seq for its earlier transactions, and this one has seq {}",
                  Quote(name), txn.seq())
            : fmt::format(
                  "session {} gave a seq for its earlier transactions, and this one has none",
                  Quote(name))};
  }
  if (numbering == 0) {
    session_undo_.emplace_back(name);
    sessions_.emplace(std::string(name), wanted);
  }
  return std::nullopt;
}

ConflictRegistry::Decision ConflictRegistry::Decide(const v1::IngestBatch& batch,
                                                    std::span<const uint32_t> accepted) {
  key_undo_.clear();
  session_undo_.clear();
  undoable_ = true;
  started_before_ = started_;
  kept_any_before_ = kept_any_;
  model_before_ = model_;

  if (!started_) {
    started_ = true;
    if (batch.has_header()) model_ = DataModelOf(batch.header()).value_or(default_model_);
  }
  if (batch.has_header() && !kept_any_) MarkInitial(batch.header().initial());

  Decision out;
  out.kept.reserve(accepted.size());
  for (const uint32_t index : accepted) {
    if (index >= static_cast<uint32_t>(batch.txns_size())) continue;
    const v1::Transaction& txn = batch.txns(static_cast<int>(index));
    if (std::optional<Problem> p = Admit(txn)) {
      out.refusals.push_back(
          MakeRefusal(batch.seq(), index, TxnIdString(txn), p->reason, p->detail));
      continue;
    }
    kept_any_ = true;
    out.kept.push_back(index);
  }
  return out;
}

void ConflictRegistry::Undo() {
  if (!undoable_) return;
  undoable_ = false;
  RestoreKeys(0);
  for (const std::string& session : session_undo_) sessions_.erase(session);
  session_undo_.clear();
  started_ = started_before_;
  kept_any_ = kept_any_before_;
  model_ = model_before_;
}

}  // namespace isowatch::ingest
