// SPDX-License-Identifier: Apache-2.0
// Reader of the text r/w format (see text.h and docs/history-format.md, "Text r/w").
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/text.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats {
namespace {

using history::HistoryBuilder;
using history::TxnHeader;
using history::TxnStatus;
using history::Value;

constexpr std::string_view kBom = "\xEF\xBB\xBF";

struct TextOp {
  bool write = false;
  int64_t key = 0;
  int64_t value = 0;
  uint64_t line = 0;
};

// One transaction of the file (or one session's pool of aborted writes), with its lines'
// operations in file order.
struct TextTxn {
  int64_t id = 0;
  int64_t session = 0;
  uint64_t first_line = 0;
  bool abort_pool = false;
  std::vector<TextOp> ops;
};

// A parsed line: op(key,value,session,txn).
struct TextLine {
  bool write = false;
  int64_t fields[4] = {0, 0, 0, 0};
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Parses one line's text (without its end of line). `column0` is the column of text[0]. Returns
// nullopt for a blank line.
absl::StatusOr<std::optional<TextLine>> ParseLine(std::string_view text, uint64_t column0,
                                                  std::string* where_col) {
  size_t i = 0;
  auto fail = [&](size_t at, std::string_view what) {
    *where_col = std::to_string(column0 + at);
    return absl::InvalidArgumentError(std::string(what));
  };
  auto skip_space = [&] {
    while (i < text.size() && IsSpace(text[i])) ++i;
  };
  skip_space();
  if (i == text.size()) return std::optional<TextLine>();
  TextLine line;
  const char op = text[i];
  if (op == 'R' || op == 'W') return fail(i, "uppercase operation (only lowercase r and w)");
  if (op != 'r' && op != 'w') return fail(i, "expected r( or w(");
  line.write = op == 'w';
  ++i;
  skip_space();
  if (i == text.size() || text[i] != '(') return fail(i, "expected '(' after the operation");
  ++i;
  static constexpr const char* kNames[4] = {"key", "value", "session", "transaction"};
  for (int f = 0; f < 4; ++f) {
    skip_space();
    const size_t start = i;
    bool negative = false;
    if (i < text.size() && text[i] == '-') {
      negative = true;
      ++i;
    }
    if (i == text.size() || text[i] < '0' || text[i] > '9') {
      return fail(i, fmt::format("expected the {} (an integer)", kNames[f]));
    }
    uint64_t magnitude = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
      if (magnitude > (uint64_t{1} << 63) / 10 || magnitude * 10 + digit > (uint64_t{1} << 63)) {
        return fail(start, fmt::format("{} overflows a 64-bit integer", kNames[f]));
      }
      magnitude = magnitude * 10 + digit;
      ++i;
    }
    if (!negative && magnitude > static_cast<uint64_t>(INT64_MAX)) {
      return fail(start, fmt::format("{} overflows a 64-bit integer", kNames[f]));
    }
    if (negative && f < 3 && magnitude != 0) {
      return fail(start, fmt::format("negative {}", kNames[f]));
    }
    line.fields[f] =
        negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    skip_space();
    const char want = f < 3 ? ',' : ')';
    if (i == text.size() || text[i] != want) {
      return fail(i, fmt::format("expected '{}' after the {}", want, kNames[f]));
    }
    ++i;
  }
  skip_space();
  if (i != text.size()) return fail(i, "unexpected text after ')'");
  return std::optional<TextLine>(line);
}

class TextParser {
 public:
  TextParser(const ReadOptions& options, std::string source)
      : options_(options), source_(std::move(source)) {}

  absl::Status Start() {
    const std::string& d = options_.dialect;
    if (!d.empty() && d != "polysi" && d != "mtc" && d != "plume" && d != "isovista") {
      return absl::InvalidArgumentError(fmt::format(
          "{}: unknown text dialect \"{}\" (polysi, mtc, plume or isovista)", source_, d));
    }
    allow_abort_ = d != "polysi" && d != "mtc";
    first_session_wins_ = !d.empty();
    drop_zero_writes_ = d == "plume";
    builder_.set_source(source_);
    return absl::OkStatus();
  }

  // One line of the file, without its end of line; `number` counts from 1.
  absl::Status Line(std::string_view text, uint64_t number) {
    uint64_t column0 = 1;
    if (number == 1 && text.starts_with(kBom)) {
      text.remove_prefix(kBom.size());
      column0 += kBom.size();
    }
    std::string col;
    absl::StatusOr<std::optional<TextLine>> parsed = ParseLine(text, column0, &col);
    if (!parsed.ok()) {
      std::string message =
          fmt::format("{}:{}:{}: {}", source_, number, col, std::string(parsed.status().message()));
      if (options_.lenient) {
        builder_.Note("malformed lines dropped", message);
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(message);
    }
    if (!parsed->has_value()) return absl::OkStatus();
    const TextLine& l = **parsed;
    const int64_t key = l.fields[0], value = l.fields[1], session = l.fields[2], txn = l.fields[3];
    if (txn < -1) {
      return Error(number, fmt::format("transaction id {} (only -1 may be negative)", txn));
    }
    if (txn == -1) {
      if (!allow_abort_) {
        return Error(number, fmt::format("transaction -1 (an aborted write) is not part of the "
                                         "{} dialect",
                                         options_.dialect));
      }
      uses_abort_ = true;
      if (!l.write) {
        builder_.Note("reads of transaction -1 dropped", fmt::format("line {}", number));
        return absl::OkStatus();
      }
      auto [it, inserted] = abort_pools_.try_emplace(session, txns_.size());
      if (inserted) {
        txns_.push_back({.id = -1, .session = session, .first_line = number, .abort_pool = true});
      }
      txns_[it->second].ops.push_back({true, key, value, number});
      return absl::OkStatus();
    }
    auto [it, inserted] = by_id_.try_emplace(txn, txns_.size());
    if (inserted) {
      txns_.push_back({.id = txn, .session = session, .first_line = number});
    } else if (TextTxn& t = txns_[it->second]; t.session != session) {
      const std::string what =
          fmt::format("transaction {} under session {}, but line {} put it in session {}", txn,
                      session, t.first_line, t.session);
      if (first_session_wins_) {
        builder_.Note("session of a later line ignored (first session wins)",
                      fmt::format("line {}: {}", number, what));
      } else if (options_.lenient) {
        builder_.Note("lines of a transaction under another session dropped",
                      fmt::format("line {}: {}", number, what));
        return absl::OkStatus();
      } else {
        return Error(number, what);
      }
    }
    txns_[it->second].ops.push_back({l.write, key, value, number});
    return absl::OkStatus();
  }

  absl::StatusOr<history::History> Finish() && {
    const int64_t initial = options_.initial_value.value_or(0);
    builder_.SetDefaultInitialValue(Value::Int(initial));
    // The transaction holding the initial state.
    std::optional<size_t> init;
    if (options_.init_txn) {
      int64_t id = 0;
      auto it = absl::SimpleAtoi(*options_.init_txn, &id) ? by_id_.find(id) : by_id_.end();
      if (it == by_id_.end()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: no transaction {} to hold the initial state", source_, *options_.init_txn));
      }
      init = it->second;
    } else if (auto it = by_id_.find(0); it != by_id_.end()) {
      const TextTxn& t = txns_[it->second];
      bool shape = it->second == 0;
      for (const TextOp& op : t.ops) shape = shape && op.write && op.value == 0;
      if (shape) {
        init = it->second;
      } else {
        builder_.Note("transaction 0 read as an ordinary transaction",
                      fmt::format("line {}: not the first transaction, or not writes of 0 only",
                                  t.first_line));
      }
    }
    std::string dialect = options_.dialect;
    if (dialect.empty()) {
      dialect = init && !options_.init_txn ? "isovista" : uses_abort_ ? "plume" : "polysi";
    }
    builder_.set_format("text", dialect);
    if (init) {
      for (const TextOp& op : txns_[*init].ops) {
        if (!op.write) {
          return Error(op.line, "the initial transaction reads (it may only write)");
        }
        if (op.value != initial) {
          builder_.SetInitialRegister(builder_.IntKey(op.key), Value::Int(op.value));
        }
      }
    }
    absl::flat_hash_set<std::pair<int64_t, int64_t>> written;
    for (size_t i = 0; i < txns_.size(); ++i) {
      if (init && i == *init) continue;
      RETURN_IF_ERROR(Emit(txns_[i], initial, written));
    }
    txns_.clear();
    absl::StatusOr<history::History> h = std::move(builder_).Finish();
    if (!h.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}", source_, std::string(h.status().message())));
    }
    return h;
  }

 private:
  absl::Status Error(uint64_t line, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_, line, what));
  }

  absl::Status Emit(const TextTxn& t, int64_t initial,
                    absl::flat_hash_set<std::pair<int64_t, int64_t>>& written) {
    const std::string session =
        t.abort_pool ? fmt::format("abort#{}", t.session) : std::to_string(t.session);
    const std::string id = t.abort_pool ? session : std::to_string(t.id);
    for (const TextOp& op : t.ops) {
      if (!op.write || op.value != initial) continue;
      const std::string what = fmt::format(
          "write of {} (the initial value) by transaction {}: a read of {} could not tell it "
          "from the initial state",
          initial, id, initial);
      if (drop_zero_writes_) {
        builder_.Note("writes of the initial value dropped (plume)",
                      fmt::format("line {}: {}", op.line, what));
      } else if (options_.lenient) {
        builder_.Note("transactions writing the initial value dropped",
                      fmt::format("line {}: {}", op.line, what));
        return absl::OkStatus();
      } else {
        return Error(op.line, what);
      }
    }
    TxnHeader header;
    header.id = id;
    header.id_numeric = !t.abort_pool;
    header.session = session;
    header.session_numeric = !t.abort_pool;
    header.status = t.abort_pool ? TxnStatus::kAborted : TxnStatus::kCommitted;
    header.source_offset = t.first_line;
    RETURN_IF_ERROR(builder_.BeginTxn(header));
    for (const TextOp& op : t.ops) {
      if (op.write && drop_zero_writes_ && op.value == initial) continue;
      const isowatch::KeyId key = builder_.IntKey(op.key);
      if (op.write) {
        if (!written.insert({op.key, op.value}).second) {
          builder_.Note("duplicate writes of one (key, value)",
                        fmt::format("line {}: w({},{})", op.line, op.key, op.value));
        }
        builder_.Write(key, Value::Int(op.value));
      } else {
        builder_.Read(key, Value::Int(op.value));
      }
    }
    builder_.EndTxn();
    return absl::OkStatus();
  }

  const ReadOptions& options_;
  std::string source_;
  HistoryBuilder builder_;
  bool allow_abort_ = true;
  bool first_session_wins_ = false;
  bool drop_zero_writes_ = false;
  bool uses_abort_ = false;
  std::vector<TextTxn> txns_;                         // in order of first appearance
  absl::flat_hash_map<int64_t, size_t> by_id_;        // txn id -> index in txns_
  absl::flat_hash_map<int64_t, size_t> abort_pools_;  // session -> index in txns_
};

}  // namespace

absl::StatusOr<history::History> ReadTextString(std::string_view data, const ReadOptions& options,
                                                std::string_view source) {
  TextParser parser(options, std::string(source));
  RETURN_IF_ERROR(parser.Start());
  uint64_t number = 0;
  while (!data.empty()) {
    const size_t end = data.find('\n');
    const std::string_view line = data.substr(0, end);
    RETURN_IF_ERROR(parser.Line(line, ++number));
    if (end == std::string_view::npos) break;
    data.remove_prefix(end + 1);
  }
  return std::move(parser).Finish();
}

absl::StatusOr<history::History> ReadTextFile(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  TextParser parser(options, path);
  RETURN_IF_ERROR(parser.Start());
  std::string line;
  uint64_t number = 0;
  while (std::getline(in, line)) RETURN_IF_ERROR(parser.Line(line, ++number));
  if (in.bad()) return absl::DataLossError(fmt::format("{}: read error", path));
  return std::move(parser).Finish();
}

absl::Status SniffText(std::string_view head) {
  const bool cut = head.size() >= 4096;
  if (head.starts_with(kBom)) head.remove_prefix(kBom.size());
  while (!head.empty()) {
    const size_t end = head.find('\n');
    std::string_view line = head.substr(0, end);
    std::string col;
    if (end == std::string_view::npos && cut) {
      break;  // a line cut by the end of the head: judged by the lines before
    }
    absl::StatusOr<std::optional<TextLine>> parsed = ParseLine(line, 1, &col);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("not r/w text: {} (column {})", std::string(parsed.status().message()), col));
    }
    if (parsed->has_value()) return absl::OkStatus();
    if (end == std::string_view::npos) break;
    head.remove_prefix(end + 1);
  }
  return absl::InvalidArgumentError("not r/w text: no r(...) or w(...) line");
}

}  // namespace isowatch::formats
