// SPDX-License-Identifier: Apache-2.0
#include "tests/testing/canonical_history.h"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "isowatch/history/snapshot.h"

namespace isowatch::testing {
namespace {

std::string Bound(const history::History& h, history::KeyBound b) {
  return b.unbounded ? std::string("unbounded") : h.KeyToString(b.key);
}

std::string Pairs(const history::History& h, std::span<const history::KeyValue> pairs) {
  std::string out = "{";
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}: {}", h.KeyToString(pairs[i].key), h.ValueToString(pairs[i].value));
  }
  return out + "}";
}

}  // namespace

std::string CanonicalHistory(const history::History& h) {
  using history::Op;
  using history::OpKind;
  std::string out = fmt::format("model {}\n", history::DataModelName(h.data_model()));
  out += fmt::format("default {}\n", h.ValueToString(h.initial().default_value));
  std::vector<std::string> initial;
  for (const auto& [key, value] : h.initial().registers) {
    initial.push_back(fmt::format("init {} = {}{}", h.KeyToString(key), h.ValueToString(value),
                                  h.initial().versions.contains(key) ? " installed" : ""));
  }
  for (const auto& [key, range] : h.initial().lists) {
    if (range.size == 0) continue;  // the same as an unlisted list
    initial.push_back(
        fmt::format("init {} = {}", h.KeyToString(key), h.ListToString(h.InitialList(key))));
  }
  for (const history::KeyValue& kv : h.tombstones()) {
    initial.push_back(
        fmt::format("tombstone {} = {}", h.KeyToString(kv.key), h.ValueToString(kv.value)));
  }
  std::sort(initial.begin(), initial.end());
  for (const std::string& line : initial) out += line + "\n";
  for (size_t s = 0; s < h.session_count(); ++s) {
    SessionId id(static_cast<uint32_t>(s));
    out += fmt::format("session {} numeric={}\n", h.session_name(id), h.session_numeric(id));
  }
  for (size_t t = 0; t < h.size(); ++t) {
    TxnId id(static_cast<uint32_t>(t));
    const history::Transaction& txn = h.txn(id);
    out +=
        fmt::format("txn {} numeric={} session={} seq={} prev={} status={} start={} commit={}\n",
                    h.txn_name(id), txn.ext_id_numeric, h.session_name(txn.session), txn.seq,
                    txn.session_prev.valid() ? std::string(h.txn_name(txn.session_prev)) : "-",
                    history::TxnStatusName(txn.status), txn.has_start ? txn.start.ToString() : "-",
                    txn.has_commit ? txn.commit.ToString() : "-");
    if (txn.has_real_time) {
      out += fmt::format("  real time {} .. {}\n", txn.invoke_time,
                         txn.complete_time == history::Transaction::kNeverCompleted
                             ? std::string("never")
                             : std::to_string(txn.complete_time));
    }
    if (h.xid(txn) != 0) out += fmt::format("  xid {}\n", h.xid(txn));
    if (h.has_snapshot(txn)) {
      out += fmt::format("  snapshot {}\n", history::FormatSnapshot(h.snapshot(txn)));
    }
    std::span<const history::RangeRead> ranges = h.range_reads(id);
    auto range = ranges.begin();
    auto print_ranges = [&](size_t position) {
      for (; range != ranges.end() && range->position == position; ++range) {
        out += fmt::format("  range {} .. {} live {} dead {}\n", Bound(h, range->low),
                           Bound(h, range->high), Pairs(h, h.range_live(*range)),
                           Pairs(h, h.range_dead(*range)));
      }
    };
    size_t position = 0;
    for (const Op& op : h.ops(id)) {
      print_ranges(position++);
      std::string value;
      if (op.unknown()) {
        value = "?";
      } else if (op.kind() == OpKind::kListRead) {
        value = h.ListToString(h.list_elements(op));
      } else {
        value = h.ValueToString(op.value());
      }
      out +=
          fmt::format("  {}{} {} {}\n", history::OpKindName(op.kind()),
                      op.kind() == OpKind::kListRead ? "[]" : "", h.KeyToString(op.key()), value);
    }
    print_ranges(position);
    if (range != ranges.end()) out += "  range reads past the operations\n";
  }
  return out;
}

std::string CanonicalListStorage(const history::History& h) {
  std::string out;
  for (size_t t = 0; t < h.size(); ++t) {
    for (const history::Op& op : h.ops(TxnId(t))) {
      if (op.kind() != history::OpKind::kListRead) continue;
      out += fmt::format("{} {} {}\n", h.KeyToString(op.key()), h.ListToString(h.list_elements(op)),
                         history::History::SharesKeyList(op) ? "shared" : "apart");
    }
  }
  for (uint32_t k = 0; k < h.key_count(); ++k) {
    out +=
        fmt::format("key {}: {}\n", h.KeyToString(KeyId(k)), h.ListToString(h.key_list(KeyId(k))));
  }
  return out;
}

}  // namespace isowatch::testing
