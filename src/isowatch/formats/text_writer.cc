// SPDX-License-Identifier: Apache-2.0
// Writer of the text r/w format (see text.h).
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include <fmt/format.h>

#include "isowatch/formats/text.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;
using isowatch::TxnId;

constexpr std::string_view kAbortPrefix = "abort#";

bool NonNegativeDecimal(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 19 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  if (s.size() > 1 && s[0] == '0') return false;  // would not read back as written
  return absl::SimpleAtoi(absl::string_view(s.data(), s.size()), out);
}

absl::Status Refuse(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("text format cannot express {}", what));
}

}  // namespace

absl::Status WriteText(const History& h, std::ostream& out) {
  const Value zero = Value::Int(0);
  // 0 is the format's initial value; a history whose registers start absent (null) says the same
  // with 0 standing for "absent", since no transaction may write 0.
  if (h.initial().default_value != zero && !h.initial().default_value.absent()) {
    return Refuse(fmt::format("a default initial value of {} (it is always 0)",
                              h.ValueToString(h.initial().default_value)));
  }
  if (!h.initial().lists.empty()) return Refuse("initial lists");
  auto int_of = [&](Value v, std::string_view what, int64_t* n) -> absl::Status {
    if (!v.is_int()) return Refuse(fmt::format("{} {}", what, h.ValueToString(v)));
    if (v.as_int() < 0) return Refuse(fmt::format("negative {} {}", what, v.as_int()));
    *n = v.as_int();
    return absl::OkStatus();
  };
  auto key_of = [&](isowatch::KeyId k, int64_t* n) -> absl::Status {
    const history::KeyInfo& info = h.key(k);
    if (!info.is_int) return Refuse(fmt::format("the bytes key {}", h.KeyToString(k)));
    if (info.payload < 0) return Refuse(fmt::format("the negative key {}", info.payload));
    *n = info.payload;
    return absl::OkStatus();
  };

  // Ids as written when every one is a non-negative decimal integer, else renumbered.
  bool keep_ids = true, keep_sessions = true;
  for (const Transaction& t : h.txns()) {
    const TxnId id(static_cast<uint64_t>(&t - h.txns().data()) + h.first_txn());
    const std::string_view name = h.txn_name(id);
    int64_t n = 0;
    const bool pool = t.status == TxnStatus::kAborted;
    if (!pool) {
      keep_ids =
          keep_ids && NonNegativeDecimal(name, &n) && !(n == 0 && !h.initial().registers.empty());
      keep_sessions = keep_sessions && NonNegativeDecimal(h.session_name(t.session), &n);
    } else {
      std::string_view s = h.session_name(t.session);
      if (s.starts_with(kAbortPrefix)) s.remove_prefix(kAbortPrefix.size());
      keep_sessions = keep_sessions && NonNegativeDecimal(s, &n);
    }
  }
  absl::flat_hash_map<std::string, int64_t> session_numbers;
  auto session_of = [&](const Transaction& t) -> int64_t {
    std::string_view s = h.session_name(t.session);
    if (t.status == TxnStatus::kAborted && s.starts_with(kAbortPrefix)) {
      s.remove_prefix(kAbortPrefix.size());
    }
    int64_t n = 0;
    if (keep_sessions && NonNegativeDecimal(s, &n)) return n;
    auto [it, inserted] = session_numbers.try_emplace(
        std::string(s), static_cast<int64_t>(session_numbers.size()) + 1);
    return it->second;
  };

  std::string text;
  // The initial state, as an IsoVista transaction 0, when it is not the default 0 everywhere.
  std::vector<std::pair<int64_t, int64_t>> initial;
  for (const auto& [key, value] : h.initial().registers) {
    int64_t k = 0, v = 0;
    if (absl::Status s = key_of(key, &k); !s.ok()) return s;
    if (absl::Status s = int_of(value, "initial value", &v); !s.ok()) return s;
    initial.emplace_back(k, v);
  }
  if (!initial.empty()) {
    std::sort(initial.begin(), initial.end());
    for (const auto& [k, v] : initial) text += fmt::format("w({},{},0,0)\n", k, v);
  }

  int64_t next_id = 1;
  for (const Transaction& t : h.txns()) {
    const TxnId id(static_cast<uint64_t>(&t - h.txns().data()) + h.first_txn());
    if (t.status == TxnStatus::kUnknown) {
      return Refuse(fmt::format("transaction {} of unknown outcome", h.TxnLabel(id)));
    }
    const bool aborted = t.status == TxnStatus::kAborted;
    int64_t txn = -1;
    if (!aborted) {
      if (!keep_ids || !NonNegativeDecimal(h.txn_name(id), &txn)) txn = next_id;
      ++next_id;
    }
    const int64_t session = session_of(t);
    if (t.ops_count == 0) {
      return Refuse(fmt::format("the empty transaction {}", h.TxnLabel(id)));
    }
    for (const Op& op : h.ops(t)) {
      int64_t k = 0, v = 0;
      if (absl::Status s = key_of(op.key(), &k); !s.ok()) return s;
      if (op.kind() == OpKind::kAppend || op.kind() == OpKind::kListRead) {
        return Refuse(fmt::format("the list operation of transaction {}", h.TxnLabel(id)));
      }
      if (op.unknown()) {
        return Refuse(fmt::format("the read of an unknown value by {}", h.TxnLabel(id)));
      }
      const bool write = op.kind() == OpKind::kWrite;
      // An aborted transaction is its writes (-1 lines): what it read judges nothing.
      if (aborted && !write) continue;
      if (op.value().absent()) {
        // With 0 as the initial value, "no value" is a missing key the format cannot say.
        if (write || !h.initial().default_value.absent()) {
          return Refuse(
              fmt::format("the {} of no value by {}", write ? "write" : "read", h.TxnLabel(id)));
        }
        v = 0;
      } else if (absl::Status s = int_of(op.value(), "value", &v); !s.ok()) {
        return s;
      }
      if (write && v == 0) {
        return Refuse(fmt::format("the write of 0 by {} (0 is the initial value)", h.TxnLabel(id)));
      }
      text += fmt::format("{}({},{},{},{})\n", write ? 'w' : 'r', k, v, session, txn);
    }
  }
  out << text;
  return out.good() ? absl::OkStatus() : absl::DataLossError("text: write failed");
}

}  // namespace isowatch::formats
