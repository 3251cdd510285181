// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/adya/internal/explain.h"

#include <vector>

#include <fmt/format.h>

namespace isowatch::checkers::adya::internal {

namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::Value;
using verdict::IsolationLevel;

constexpr size_t kListTail = 6;  // list reads longer than this show their last elements only

const char* LevelLongName(IsolationLevel level) {
  switch (level) {
    case IsolationLevel::kReadCommitted:
      return "read committed";
    case IsolationLevel::kRepeatableRead:
      return "repeatable read";
    case IsolationLevel::kSnapshotIsolation:
      return "snapshot isolation";
    case IsolationLevel::kSerializable:
      return "serializable";
    case IsolationLevel::kReadAtomic:
      return "read atomic";
    case IsolationLevel::kCausal:
      return "causal consistency";
  }
  return "?";
}

bool IsList(const History& h, KeyId key) { return h.key(key).is_list; }

}  // namespace

std::string TxnLabel(const History& h, uint64_t txn) {
  std::string name = h.TxnLabel(TxnId(txn));
  const bool number = !name.empty() && (name[0] == '-' || (name[0] >= '0' && name[0] <= '9'));
  return number ? fmt::format("T{}", name) : name;
}

std::string LastWritten(const History& h, uint64_t txn, KeyId key) {
  std::span<const Op> ops = h.ops(TxnId(txn));
  for (size_t i = ops.size(); i-- > 0;) {
    if (ops[i].is_write() && ops[i].key() == key) return h.ValueToString(ops[i].value());
  }
  return "?";
}

std::string DescribeRead(const History& h, const Op& read) {
  std::string key = h.KeyToString(read.key());
  if (read.kind() != OpKind::kListRead) {
    return fmt::format("{} from key {}", h.ValueToString(read.value()), key);
  }
  std::span<const Value> list = h.list_elements(read);
  if (list.size() <= kListTail) return fmt::format("{} from key {}", h.ListToString(list), key);
  std::string tail = h.ListToString(list.last(kListTail));
  return fmt::format("[..., {} ({} elements) from key {}", tail.substr(1), list.size(), key);
}

std::string DescribeEdge(const History& h, const Edge& e) {
  const std::string from = TxnLabel(h, e.from);
  const std::string to = TxnLabel(h, e.to);
  switch (e.kind) {
    case EdgeKind::kWw: {
      const Op& w = h.ops(TxnId(e.to))[e.op];
      const std::string key = h.KeyToString(w.key());
      if (IsList(h, w.key())) {
        return fmt::format("{} appended {} to key {} and {} appended {} after it (ww)", from,
                           LastWritten(h, e.from, w.key()), key, to, h.ValueToString(w.value()));
      }
      return fmt::format("{} wrote {} to key {} and {} overwrote it with {} (ww)", from,
                         LastWritten(h, e.from, w.key()), key, to, h.ValueToString(w.value()));
    }
    case EdgeKind::kWr: {
      const Op& r = h.ops(TxnId(e.to))[e.op];
      if (IsList(h, r.key())) {
        return fmt::format("{} read {}, which includes {}'s append of {} (wr)", to,
                           DescribeRead(h, r), from, LastWritten(h, e.from, r.key()));
      }
      return fmt::format("{} read {}, which {} wrote (wr)", to, DescribeRead(h, r), from);
    }
    case EdgeKind::kRw: {
      const Op& r = h.ops(TxnId(e.from))[e.op];
      if (IsList(h, r.key())) {
        return fmt::format("{} read {} and {} installed the next version, appending {} (rw)", from,
                           DescribeRead(h, r), to, LastWritten(h, e.to, r.key()));
      }
      return fmt::format("{} read {} and {} overwrote that version with {} (rw)", from,
                         DescribeRead(h, r), to, LastWritten(h, e.to, r.key()));
    }
    case EdgeKind::kStart: {
      const Transaction& a = h.txn(TxnId(e.from));
      const Transaction& b = h.txn(TxnId(e.to));
      if (h.has_snapshot(b)) {
        return fmt::format("{} (xid {}) committed in the snapshot {} of {} (start)", from, h.xid(a),
                           history::FormatSnapshot(h.snapshot(b)), to);
      }
      return fmt::format("{} committed at {}, no later than {} started at {} (start)", from,
                         a.commit.ToString(), to, b.start.ToString());
    }
    case EdgeKind::kPredWr:
    case EdgeKind::kPredRw:
      break;
  }
  return fmt::format("{} -> {} ({})", from, to, EdgeKindName(e.kind));
}

std::string DescribeCycle(const History& h, std::span<const Edge> cycle) {
  std::string out;
  std::string path;
  for (size_t i = 0; i < cycle.size(); ++i) {
    if (i > 0) out += "; ";
    out += DescribeEdge(h, cycle[i]);
    path += TxnLabel(h, cycle[i].from) + " -> ";
  }
  if (!cycle.empty()) path += TxnLabel(h, cycle.front().from);
  return fmt::format("{}: {}", out, path);
}

std::string LevelList(std::span<const IsolationLevel> levels) {
  std::string out;
  for (size_t i = 0; i < levels.size(); ++i) {
    if (i > 0) out += i + 1 == levels.size() ? " and " : ", ";
    out += LevelLongName(levels[i]);
  }
  return out;
}

}  // namespace isowatch::checkers::adya::internal
