// SPDX-License-Identifier: Apache-2.0
// Writer of Jepsen/Elle EDN histories (see edn.h).
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/edn.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;

bool KeywordChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '*':
    case '+':
    case '!':
    case '-':
    case '_':
    case '\'':
    case '?':
    case '<':
    case '>':
    case '=':
    case '.':
    case '/':
      return true;
    default:
      return false;
  }
}

// Whether `s` (with its ':') reads back as the same keyword.
bool IsKeyword(std::string_view s) {
  if (s.size() < 2 || s[0] != ':' || s[1] == '/' || s.back() == '/') return false;
  for (char c : s.substr(1)) {
    if (!KeywordChar(c)) return false;
  }
  return true;
}

void AppendString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          fmt::format_to(std::back_inserter(*out), "\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

class EdnWriter {
 public:
  EdnWriter(const History& h, std::ostream& out) : h_(h), out_(out) {}
  absl::Status Write();

 private:
  absl::Status Check();
  void AppendValue(Value v);
  void AppendKey(KeyId key);
  // `invoke`: the invocation's :value (reads as nil).
  void AppendOps(const Transaction& t, bool invoke);
  void Line(TxnId id, bool invoke);
  std::string Name(TxnId id) const { return h_.TxnLabel(id); }

  const History& h_;
  std::ostream& out_;
  std::string line_;
  int64_t next_index_ = 0;
  std::vector<int64_t> process_;  // per session
};

absl::Status EdnWriter::Check() {
  const auto& initial = h_.initial();
  if (!initial.default_value.absent() || !initial.registers.empty()) {
    return absl::InvalidArgumentError(
        "EDN histories start from nil registers: the history has an initial register value");
  }
  for (const auto& [key, range] : initial.lists) {
    if (range.size != 0) {
      return absl::InvalidArgumentError(
          fmt::format("EDN histories start from empty lists: list {} has initial elements",
                      h_.KeyToString(key)));
    }
  }
  for (TxnId id : h_.HeldTxns()) {
    const Transaction& t = h_.txn(id);
    const std::string name = Name(id);
    if (h_.xid(t) != 0 || h_.has_snapshot(t)) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: EDN cannot hold xids or snapshots", name));
    }
    if (t.has_start != t.has_commit) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: EDN's :ts needs both a start and a commit timestamp", name));
    }
    if (t.has_start && (t.start.logical != 0 || t.commit.logical != 0)) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: EDN's :ts holds no logical part ({} .. {})", name,
                      t.start.ToString(), t.commit.ToString()));
    }
    if (t.has_start && t.status != TxnStatus::kCommitted) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: EDN carries :ts on :ok completions only, and it is {}", name,
                      history::TxnStatusName(t.status)));
    }
    if (t.session_prev.valid() && t.session_prev.value() > id.value()) {
      return absl::InvalidArgumentError(fmt::format(
          "transaction {}: its session order is not the history's order, which EDN's process "
          "order follows",
          name));
    }
    const bool never = t.has_real_time && t.complete_time == Transaction::kNeverCompleted;
    if (never && t.status != TxnStatus::kUnknown) {
      return absl::InvalidArgumentError(fmt::format("transaction {}: never completed but {}", name,
                                                    history::TxnStatusName(t.status)));
    }
    for (const Op& op : h_.ops(id)) {
      if (!op.is_read()) continue;
      if (op.unknown() && t.status == TxnStatus::kCommitted) {
        return absl::InvalidArgumentError(fmt::format(
            "transaction {}: an unknown read of {} in a committed transaction (EDN's nil in an "
            ":ok is an observed absent value)",
            name, h_.KeyToString(op.key())));
      }
      if (!op.unknown() && op.kind() == OpKind::kRead && op.value().absent() &&
          t.status != TxnStatus::kCommitted) {
        return absl::InvalidArgumentError(fmt::format(
            "transaction {}: an observed absent read of {} in a transaction not committed (EDN's "
            "nil there means unknown)",
            name, h_.KeyToString(op.key())));
      }
    }
  }
  // A transaction never completed must be the last of its session.
  std::vector<int8_t> open(h_.session_count(), 0);
  for (TxnId id : h_.HeldTxns()) {
    const Transaction& t = h_.txn(id);
    if (open[t.session.value()]) {
      return absl::InvalidArgumentError(fmt::format(
          "transaction {}: its session has a transaction before it that never completed",
          Name(id)));
    }
    if (t.has_real_time && t.complete_time == Transaction::kNeverCompleted) {
      open[t.session.value()] = 1;
    }
  }
  // Processes: numeric session names as they are, others after the largest.
  process_.assign(h_.session_count(), 0);
  int64_t largest = -1;
  std::vector<bool> numeric(h_.session_count(), false);
  for (size_t s = 0; s < h_.session_count(); ++s) {
    const std::string_view name = h_.session_name(SessionId(static_cast<uint32_t>(s)));
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
    if (ec == std::errc() && ptr == name.data() + name.size() && fmt::format("{}", v) == name) {
      numeric[s] = true;
      process_[s] = v;
      largest = std::max(largest, v);
    }
  }
  for (size_t s = 0; s < h_.session_count(); ++s) {
    if (numeric[s]) continue;
    if (largest == std::numeric_limits<int64_t>::max()) {
      return absl::InvalidArgumentError("no integer left to number the non-numeric sessions");
    }
    process_[s] = ++largest;
  }
  return absl::OkStatus();
}

void EdnWriter::AppendValue(Value v) {
  if (v.absent()) {
    line_.append("nil");
  } else if (v.is_int()) {
    fmt::format_to(std::back_inserter(line_), "{}", v.as_int());
  } else {
    AppendString(h_.bytes(v.bytes_index()), &line_);
  }
}

void EdnWriter::AppendKey(KeyId key) {
  const history::KeyInfo& info = h_.key(key);
  if (info.is_int) {
    fmt::format_to(std::back_inserter(line_), "{}", info.payload);
    return;
  }
  const std::string_view bytes = h_.bytes(static_cast<uint32_t>(info.payload));
  if (IsKeyword(bytes)) {
    line_.append(bytes);
  } else {
    AppendString(bytes, &line_);
  }
}

void EdnWriter::AppendOps(const Transaction& t, bool invoke) {
  const bool never_completed = t.has_real_time && t.complete_time == Transaction::kNeverCompleted;
  line_.push_back('[');
  bool first = true;
  for (const Op& op : h_.ops(t)) {
    if (!first) line_.push_back(' ');
    first = false;
    switch (op.kind()) {
      case OpKind::kWrite:
        line_.append("[:w ");
        break;
      case OpKind::kAppend:
        line_.append("[:append ");
        break;
      case OpKind::kRead:
      case OpKind::kListRead:
        line_.append("[:r ");
        break;
    }
    AppendKey(op.key());
    line_.push_back(' ');
    if (!op.is_write() && (op.unknown() || (invoke && !never_completed))) {
      // An invocation's reads are nil, unless it is all there is of the transaction.
      line_.append("nil");
    } else if (op.kind() == OpKind::kListRead) {
      line_.push_back('[');
      bool first_element = true;
      for (Value v : h_.list_elements(op)) {
        if (!first_element) line_.push_back(' ');
        first_element = false;
        AppendValue(v);
      }
      line_.push_back(']');
    } else {
      AppendValue(op.value());  // a write's value, or a register read's
    }
    line_.push_back(']');
  }
  line_.push_back(']');
}

void EdnWriter::Line(TxnId id, bool invoke) {
  const Transaction& t = h_.txn(id);
  line_.clear();
  const char* type = ":invoke";
  if (!invoke) {
    type = t.status == TxnStatus::kCommitted ? ":ok"
           : t.status == TxnStatus::kAborted ? ":fail"
                                             : ":info";
  }
  fmt::format_to(std::back_inserter(line_), "{{:index {}, :type {}, :process {}, :f :txn",
                 next_index_++, type, process_[t.session.value()]);
  if (t.has_real_time) {
    fmt::format_to(std::back_inserter(line_), ", :time {}",
                   invoke ? t.invoke_time : t.complete_time);
  }
  line_.append(", :value ");
  AppendOps(t, invoke);
  if (!invoke && t.has_start) {
    fmt::format_to(std::back_inserter(line_), ", :ts {{:rts {} :cts {}}}", t.start.physical,
                   t.commit.physical);
  }
  line_.append("}\n");
  out_ << line_;
}

absl::Status EdnWriter::Write() {
  RETURN_IF_ERROR(Check());
  const std::vector<TxnId> ids = h_.HeldTxns();
  auto never = [&](const Transaction& t) {
    return t.has_real_time && t.complete_time == Transaction::kNeverCompleted;
  };
  // Session successors, to know when an invocation may be written (after its predecessor's
  // completion).
  absl::flat_hash_map<uint64_t, TxnId> next;
  for (TxnId id : ids) {
    const Transaction& t = h_.txn(id);
    if (t.session_prev.valid()) next[t.session_prev.value()] = id;
  }
  std::vector<bool> invoked(h_.size(), false);
  using Item = std::pair<int64_t, uint64_t>;  // (invoke time, transaction)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  auto offer = [&](TxnId id) {
    const Transaction& t = h_.txn(id);
    if (h_.has_real_time() && t.has_real_time) ready.push({t.invoke_time, id.value()});
  };
  for (TxnId id : ids) {
    if (!h_.txn(id).session_prev.valid()) offer(id);
  }
  auto invoke = [&](TxnId id) {
    if (invoked[id.value()]) return;
    invoked[id.value()] = true;
    Line(id, true);
  };
  for (TxnId id : ids) {
    const Transaction& t = h_.txn(id);
    if (never(t)) continue;
    while (!ready.empty() && (!t.has_real_time || ready.top().first < t.complete_time)) {
      if (!t.has_real_time) break;
      const TxnId j(static_cast<uint32_t>(ready.top().second));
      ready.pop();
      invoke(j);
    }
    invoke(id);
    Line(id, false);
    if (auto it = next.find(id.value()); it != next.end()) offer(it->second);
  }
  // Invocations never completed, in invocation order, then any left.
  while (!ready.empty()) {
    const TxnId j(static_cast<uint32_t>(ready.top().second));
    ready.pop();
    invoke(j);
  }
  for (TxnId id : ids) invoke(id);
  if (!out_) return absl::InternalError("writing the EDN history failed");
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteEdn(const History& h, std::ostream& out) {
  EdnWriter writer(h, out);
  return writer.Write();
}

}  // namespace isowatch::formats
