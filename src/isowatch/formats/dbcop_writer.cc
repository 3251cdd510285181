// SPDX-License-Identifier: Apache-2.0
// Writer of old dbcop bincode histories (see dbcop.h).
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include <fmt/format.h>

#include "isowatch/formats/dbcop.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutString(std::string& out, std::string_view s) {
  PutU64(out, s.size());
  out.append(s);
}

absl::Status Refuse(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("dbcop bincode cannot express {}", what));
}

}  // namespace

absl::Status WriteDbcopBincode(const History& h, std::ostream& out, const DbcopHeader* header) {
  // Sessions by number when every name is a positive decimal integer.
  bool by_number = true;
  std::vector<uint64_t> position(h.session_count());
  for (size_t s = 0; s < h.session_count(); ++s) {
    const std::string_view name = h.session_name(SessionId(s));
    uint64_t n = 0;
    by_number = by_number && !name.empty() && name[0] != '0' &&
                absl::SimpleAtoi(absl::string_view(name.data(), name.size()), &n) && n >= 1 &&
                n <= h.session_count() + 1'000'000;
    position[s] = n;
  }
  uint64_t sessions = h.session_count();
  if (by_number) {
    sessions = 0;
    for (uint64_t p : position) sessions = std::max(sessions, p);
  }
  if (header != nullptr && by_number) sessions = std::max(sessions, header->sessions);
  std::vector<std::vector<TxnId>> order(sessions);
  for (TxnId id : h.HeldTxns()) {
    const Transaction& t = h.txn(id);
    const uint64_t slot = by_number ? position[t.session.value()] - 1 : t.session.value();
    order[slot].push_back(id);
  }
  uint64_t most_txns = 0, most_events = 0;
  for (auto& txns : order) {
    std::sort(txns.begin(), txns.end(),
              [&](TxnId a, TxnId b) { return h.txn(a).seq < h.txn(b).seq; });
    most_txns = std::max<uint64_t>(most_txns, txns.size());
    for (TxnId id : txns) most_events = std::max<uint64_t>(most_events, h.txn(id).ops_count);
  }
  DbcopHeader computed{.id = 0,
                       .n_node = sessions,
                       .n_variable = h.key_count(),
                       .n_transaction = most_txns,
                       .n_event = most_events,
                       .info = "isowatch",
                       .start = "1970-01-01T00:00:00+00:00",
                       .end = "1970-01-01T00:00:00+00:00"};
  const DbcopHeader& head = header != nullptr ? *header : computed;
  std::string bytes;
  for (uint64_t v : {head.id, head.n_node, head.n_variable, head.n_transaction, head.n_event}) {
    PutU64(bytes, v);
  }
  PutString(bytes, head.info);
  PutString(bytes, head.start);
  PutString(bytes, head.end);
  PutU64(bytes, sessions);
  for (const auto& txns : order) {
    PutU64(bytes, txns.size());
    for (TxnId id : txns) {
      const Transaction& t = h.txn(id);
      if (t.status == TxnStatus::kUnknown) {
        return Refuse(fmt::format("transaction {} of unknown outcome", h.TxnLabel(id)));
      }
      PutU64(bytes, t.ops_count);
      for (const Op& op : h.ops(t)) {
        const history::KeyInfo& key = h.key(op.key());
        if (!key.is_int || key.payload < 0) {
          return Refuse(fmt::format("the key {}", h.KeyToString(op.key())));
        }
        if (op.kind() == OpKind::kAppend || op.kind() == OpKind::kListRead) {
          return Refuse("list operations");
        }
        if (op.unknown()) return Refuse(fmt::format("the unknown read of {}", h.TxnLabel(id)));
        if (op.value().absent()) {
          return Refuse(fmt::format("the read of no value by {}", h.TxnLabel(id)));
        }
        if (!op.value().is_int() || op.value().as_int() < 0) {
          return Refuse(fmt::format("the value {}", h.ValueToString(op.value())));
        }
        bytes.push_back(op.kind() == OpKind::kWrite ? 1 : 0);
        PutU64(bytes, static_cast<uint64_t>(key.payload));
        PutU64(bytes, static_cast<uint64_t>(op.value().as_int()));
        bytes.push_back(1);
      }
      bytes.push_back(t.status == TxnStatus::kCommitted ? 1 : 0);
    }
  }
  out << bytes;
  return out.good() ? absl::OkStatus() : absl::DataLossError("dbcop: write failed");
}

}  // namespace isowatch::formats
