// SPDX-License-Identifier: Apache-2.0
// Writer of Jepsen/Elle EDN histories and of their elle-cli JSON form (see edn.h).
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
#include <simdjson.h>

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

// The two ways to write one Jepsen history: EDN maps of keywords, or elle-cli's JSON array of
// objects whose members are the keywords' names.
enum class Syntax : uint8_t { kEdn, kJson };

class EdnWriter {
 public:
  EdnWriter(const History& h, std::ostream& out, Syntax syntax)
      : h_(h), out_(out), json_(syntax == Syntax::kJson), name_(json_ ? "elle-cli JSON" : "EDN") {}
  absl::Status Write();

 private:
  absl::Status Check();
  // Bytes as a string; for JSON, an error unless they are UTF-8.
  void AppendText(std::string_view s);
  void AppendValue(Value v);
  void AppendKey(KeyId key);
  // `invoke`: the invocation's :value (reads as nil).
  void AppendOps(const Transaction& t, bool invoke);
  void Line(TxnId id, bool invoke);
  std::string Name(TxnId id) const { return h_.TxnLabel(id); }
  // A keyword as the syntax writes it: :ok, or "ok".
  std::string Keyword(std::string_view k) const {
    return json_ ? fmt::format("\"{}\"", k) : fmt::format(":{}", k);
  }

  const History& h_;
  std::ostream& out_;
  const bool json_;
  const char* const name_;  // of the syntax, in messages
  bool first_line_ = true;
  TxnId at_;            // the transaction being written
  absl::Status error_;  // the first thing the syntax cannot hold
  std::string line_;
  int64_t next_index_ = 0;
  std::vector<int64_t> process_;  // per session
};

absl::Status EdnWriter::Check() {
  const auto& initial = h_.initial();
  if (!initial.default_value.absent() || !initial.registers.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "{} histories start from nil registers: the history has an initial register value", name_));
  }
  for (const auto& [key, range] : initial.lists) {
    if (range.size != 0) {
      return absl::InvalidArgumentError(
          fmt::format("{} histories start from empty lists: list {} has initial elements", name_,
                      h_.KeyToString(key)));
    }
  }
  for (TxnId id : h_.HeldTxns()) {
    const Transaction& t = h_.txn(id);
    const std::string name = Name(id);
    if (h_.xid(t) != 0 || h_.has_snapshot(t)) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: {} cannot hold xids or snapshots", name, name_));
    }
    if (t.has_start != t.has_commit) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: {}'s {} needs both a start and a commit timestamp", name,
                      name_, Keyword("ts")));
    }
    if (t.has_start && (t.start.logical != 0 || t.commit.logical != 0)) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: {}'s {} holds no logical part ({} .. {})", name, name_,
                      Keyword("ts"), t.start.ToString(), t.commit.ToString()));
    }
    if (t.has_start && t.status != TxnStatus::kCommitted) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: {} carries {} on {} completions only, and it is {}", name,
                      name_, Keyword("ts"), Keyword("ok"), history::TxnStatusName(t.status)));
    }
    if (t.session_prev.valid() && t.session_prev.value() > id.value()) {
      return absl::InvalidArgumentError(fmt::format(
          "transaction {}: its session order is not the history's order, which {}'s process "
          "order follows",
          name, name_));
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
            "transaction {}: an unknown read of {} in a committed transaction ({}'s {} in an "
            "{} is an observed absent value)",
            name, h_.KeyToString(op.key()), name_, json_ ? "null" : "nil", Keyword("ok")));
      }
      if (!op.unknown() && op.kind() == OpKind::kRead && op.value().absent() &&
          t.status != TxnStatus::kCommitted) {
        return absl::InvalidArgumentError(fmt::format(
            "transaction {}: an observed absent read of {} in a transaction not committed ({}'s "
            "{} there means unknown)",
            name, h_.KeyToString(op.key()), name_, json_ ? "null" : "nil"));
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

void EdnWriter::AppendText(std::string_view s) {
  if (json_ && error_.ok() && !simdjson::validate_utf8(s.data(), s.size())) {
    error_ = absl::InvalidArgumentError(
        fmt::format("transaction {}: {} holds UTF-8 text only, and the bytes {:?} are not",
                    Name(at_), name_, s));
  }
  AppendString(s, &line_);
}

void EdnWriter::AppendValue(Value v) {
  if (v.absent()) {
    line_.append(json_ ? "null" : "nil");
  } else if (v.is_int()) {
    fmt::format_to(std::back_inserter(line_), "{}", v.as_int());
  } else {
    AppendText(h_.bytes(v.bytes_index()));
  }
}

void EdnWriter::AppendKey(KeyId key) {
  const history::KeyInfo& info = h_.key(key);
  if (info.is_int) {
    fmt::format_to(std::back_inserter(line_), "{}", info.payload);
    return;
  }
  const std::string_view bytes = h_.bytes(static_cast<uint32_t>(info.payload));
  if (!json_ && IsKeyword(bytes)) {
    line_.append(bytes);
  } else {
    AppendText(bytes);
  }
}

void EdnWriter::AppendOps(const Transaction& t, bool invoke) {
  const bool never_completed = t.has_real_time && t.complete_time == Transaction::kNeverCompleted;
  // Between the elements of a vector.
  const char separator = json_ ? ',' : ' ';
  line_.push_back('[');
  bool first = true;
  for (const Op& op : h_.ops(t)) {
    if (!first) line_.push_back(separator);
    first = false;
    switch (op.kind()) {
      case OpKind::kWrite:
        line_.append(json_ ? "[\"w\"," : "[:w ");
        break;
      case OpKind::kAppend:
        line_.append(json_ ? "[\"append\"," : "[:append ");
        break;
      case OpKind::kRead:
      case OpKind::kListRead:
        line_.append(json_ ? "[\"r\"," : "[:r ");
        break;
    }
    AppendKey(op.key());
    line_.push_back(separator);
    if (!op.is_write() && (op.unknown() || (invoke && !never_completed))) {
      // An invocation's reads are nil, unless it is all there is of the transaction.
      line_.append(json_ ? "null" : "nil");
    } else if (op.kind() == OpKind::kListRead) {
      line_.push_back('[');
      bool first_element = true;
      for (Value v : h_.list_elements(op)) {
        if (!first_element) line_.push_back(separator);
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
  at_ = id;
  line_.clear();
  const char* type = "invoke";
  if (!invoke) {
    type = t.status == TxnStatus::kCommitted ? "ok"
           : t.status == TxnStatus::kAborted ? "fail"
                                             : "info";
  }
  const int64_t process = process_[t.session.value()];
  const int64_t index = next_index_++;
  if (json_) {
    // One object a line, in the array: "type" first, which is how a reader tells the format.
    line_.append(first_line_ ? "[" : ",\n");
    fmt::format_to(std::back_inserter(line_), R"({{"type":"{}","f":"txn","process":{},"index":{})",
                   type, process, index);
  } else {
    fmt::format_to(std::back_inserter(line_), "{{:index {}, :type :{}, :process {}, :f :txn", index,
                   type, process);
  }
  first_line_ = false;
  if (t.has_real_time) {
    line_.append(json_ ? R"(,"time":)" : ", :time ");
    fmt::format_to(std::back_inserter(line_), "{}", invoke ? t.invoke_time : t.complete_time);
  }
  line_.append(json_ ? R"(,"value":)" : ", :value ");
  AppendOps(t, invoke);
  if (!invoke && t.has_start) {
    if (json_) {
      fmt::format_to(std::back_inserter(line_), R"(,"ts":{{"rts":{},"cts":{}}})", t.start.physical,
                     t.commit.physical);
    } else {
      fmt::format_to(std::back_inserter(line_), ", :ts {{:rts {} :cts {}}}", t.start.physical,
                     t.commit.physical);
    }
  }
  line_.append(json_ ? "}" : "}\n");
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
  if (json_) out_ << (first_line_ ? "[]\n" : "\n]\n");
  RETURN_IF_ERROR(error_);
  if (!out_) return absl::InternalError(fmt::format("writing the {} history failed", name_));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteEdn(const History& h, std::ostream& out) {
  EdnWriter writer(h, out, Syntax::kEdn);
  return writer.Write();
}

absl::Status WriteElleJson(const History& h, std::ostream& out) {
  EdnWriter writer(h, out, Syntax::kJson);
  return writer.Write();
}

}  // namespace isowatch::formats
