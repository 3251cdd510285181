// SPDX-License-Identifier: Apache-2.0
#include "isowatch/axioms/explain.h"

#include <cstdint>

#include <fmt/format.h>

namespace isowatch::axioms {

using history::History;
using history::Transaction;
using history::Value;
using verdict::Anomaly;
using verdict::ExtKind;
using verdict::IsolationLevel;
using verdict::ReadFault;
using verdict::Violation;

std::string DescribeTxn(const History& h, TxnId id, std::string_view released_name) {
  if (!h.has_txn(id)) {
    return fmt::format("{} (no longer held in memory)",
                       released_name.empty() ? h.TxnLabel(id) : std::string(released_name));
  }
  const Transaction& t = h.txn(id);
  std::string out = fmt::format("{} (session {}", h.txn_name(id), h.session_name(t.session));
  if (t.has_start) out += fmt::format(", start {}", t.start.ToString());
  if (const uint64_t xid = h.xid(t); xid != 0) out += fmt::format(", xid {}", xid);
  if (h.has_snapshot(t))
    out += fmt::format(", snapshot {}", history::FormatSnapshot(h.snapshot(t)));
  if (t.has_commit) out += fmt::format(", commit {}", t.commit.ToString());
  if (!t.committed()) out += fmt::format(", {}", history::TxnStatusName(t.status));
  out += ")";
  return out;
}

namespace {

// "its snapshot at start 5" / "its commit point 9 in commit order".
std::string Point(const History& h, IsolationLevel level, TxnId reader) {
  const Transaction& t = h.txn(reader);
  if (level == IsolationLevel::kSerializable) {
    return fmt::format("its place in commit order (commit {})", t.commit.ToString());
  }
  if (h.has_snapshot(t))
    return fmt::format("its snapshot {}", history::FormatSnapshot(h.snapshot(t)));
  return fmt::format("its snapshot (start {})", t.start.ToString());
}

std::string Writer(const History& h, TxnId writer) {
  if (!writer.valid()) return "the initial state";
  return fmt::format("transaction {}", DescribeTxn(h, writer));
}

// The index of `txn`'s write or append of `value` to `key`, or -1.
int64_t OwnWriteOf(const History& h, TxnId txn, KeyId key, Value value) {
  auto ops = h.ops(txn);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].is_write() && ops[i].key() == key && ops[i].value() == value) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

// Why the value read of `key` is wrong, given who wrote it.
std::string Why(const History& h, IsolationLevel level, TxnId reader, KeyId key, Value value,
                const ExtFinding& f) {
  if (f.writer.valid() && f.writer == reader) {
    return fmt::format("it is a value the transaction writes itself only later, at operation {}",
                       OwnWriteOf(h, reader, key, value) + 1);
  }
  switch (f.kind) {
    case ExtKind::kNever:
      return "no transaction wrote that value";
    case ExtKind::kUnknown:
      return "no transaction still held in memory wrote that value (older ones are forgotten)";
    case ExtKind::kBefore:
      return fmt::format("that version, from {}, had already been overwritten at {}",
                         Writer(h, f.writer), Point(h, level, reader));
    case ExtKind::kUncommitted:
      return fmt::format("it was written by {}, which had not committed at {}", Writer(h, f.writer),
                         Point(h, level, reader));
    case ExtKind::kAfter:
      return fmt::format("it was written by {}, which started only after {}", Writer(h, f.writer),
                         Point(h, level, reader));
    case ExtKind::kAborted:
      return fmt::format("it was written by {}, which aborted", Writer(h, f.writer));
    case ExtKind::kIntermediate:
      return fmt::format("it is an intermediate value that {} overwrote before committing",
                         Writer(h, f.writer));
    case ExtKind::kNone:
      break;
  }
  return "";
}

Violation Base(Anomaly anomaly, IsolationLevel level, KeyId key) {
  Violation v;
  v.anomaly = anomaly;
  v.level = level;
  v.key = key;
  return v;
}

}  // namespace

Violation ExplainSession(const History& h, IsolationLevel level, TxnId txn, TxnId pred) {
  Violation v = Base(Anomaly::kSession, level, KeyId::Invalid());
  v.txns = {txn, pred};
  const Transaction& t = h.txn(txn);
  const Transaction& p = h.txn(pred);
  if (level == IsolationLevel::kSerializable) {
    v.explanation = fmt::format(
        "Transaction {} commits at {}, before its session predecessor {} committed at {}, so the "
        "commit order contradicts the session order.",
        DescribeTxn(h, txn), t.commit.ToString(), DescribeTxn(h, pred), p.commit.ToString());
  } else if (h.has_snapshot(t)) {
    v.explanation = fmt::format(
        "The snapshot {} of transaction {} does not see its session predecessor {}, so it "
        "cannot see the writes of an earlier transaction of its own session.",
        history::FormatSnapshot(h.snapshot(t)), DescribeTxn(h, txn), DescribeTxn(h, pred));
  } else {
    v.explanation = fmt::format(
        "Transaction {} starts at {}, before its session predecessor {} committed at {}, so it "
        "cannot see the writes of an earlier transaction of its own session.",
        DescribeTxn(h, txn), t.start.ToString(), DescribeTxn(h, pred), p.commit.ToString());
  }
  return v;
}

ReadFault ReadFaultOf(TxnId reader, const ExtFinding& finding) {
  if (finding.writer.valid() && finding.writer == reader) return ReadFault::kFuture;
  switch (finding.kind) {
    case ExtKind::kNever:
      return ReadFault::kThinAir;
    case ExtKind::kAborted:
      return ReadFault::kAborted;
    case ExtKind::kIntermediate:
      return ReadFault::kIntermediate;
    default:
      return ReadFault::kNone;
  }
}

std::string OwnReadSentence(const History& h, std::string_view who, TxnId txn, KeyId key,
                            std::string_view observed, std::string_view expected,
                            const IntRead& what) {
  const bool list = h.key(key).is_list;
  const std::string read =
      fmt::format("{} read {} {} = {} at operation {}", who, list ? "list" : "key",
                  h.KeyToString(key), observed, what.read_op + 1);
  const uint32_t other = what.own_op + 1;
  const auto own_ops = h.ops(txn);
  const std::string own_value =
      what.own_op < own_ops.size() ? h.ValueToString(own_ops[what.own_op].value()) : "";
  switch (what.fault) {
    case ReadFault::kFuture:
      return fmt::format("{}, {} it writes itself only later, at operation {}", read,
                         list ? "with an element" : "a value", other);
    case ReadFault::kNotLastWrite:
      return list ? fmt::format(
                        "{}, which ends with an earlier append of its own, though it had since "
                        "appended {} at operation {}",
                        read, own_value, other)
                  : fmt::format(
                        "{}, an earlier write of its own, though it had since written {} there "
                        "at operation {}",
                        read, own_value, other);
    case ReadFault::kNotOwnWrite:
      return list ? fmt::format("{}, which misses its own append of {} at operation {}", read,
                                own_value, other)
                  : fmt::format("{}, though it had written {} there itself at operation {}", read,
                                own_value, other);
    default:
      return fmt::format(
          "{}, but at operation {} it had read {} there, and nothing of its own changed the key "
          "in between (a non-repeatable read)",
          read, other, expected);
  }
}

Violation ExplainInt(const History& h, IsolationLevel level, TxnId txn, KeyId key,
                     std::string expected, std::string observed, const IntRead& what) {
  Violation v = Base(Anomaly::kInt, level, key);
  v.read_fault = what.fault;
  v.txns = {txn};
  v.explanation = OwnReadSentence(h, fmt::format("Transaction {}", DescribeTxn(h, txn)), txn, key,
                                  observed, expected, what) +
                  ".";
  v.expected = std::move(expected);
  v.observed = std::move(observed);
  return v;
}

Violation ExplainExtRegister(const History& h, IsolationLevel level, TxnId reader, KeyId key,
                             Value expected, TxnId expected_writer, Value observed,
                             const ExtFinding& finding) {
  Violation v = Base(Anomaly::kExt, level, key);
  v.ext_kind = finding.kind;
  v.read_fault = ReadFaultOf(reader, finding);
  v.txns = {reader};
  if (finding.writer.valid() && finding.writer != reader) v.txns.push_back(finding.writer);
  v.expected = h.ValueToString(expected);
  v.observed = h.ValueToString(observed);
  v.explanation = fmt::format(
      "Transaction {} read key {} = {}, but {} holds {} (written by {}); {}.",
      DescribeTxn(h, reader), h.KeyToString(key), v.observed, Point(h, level, reader), v.expected,
      expected_writer.valid() ? h.TxnLabel(expected_writer) : "the initial state",
      Why(h, level, reader, key, observed, finding));
  return v;
}

Violation ExplainExtList(const History& h, IsolationLevel level, TxnId reader, KeyId key,
                         std::span<const Value> expected, std::span<const Value> observed,
                         size_t first_difference, const ExtFinding& finding) {
  Violation v = Base(Anomaly::kExt, level, key);
  v.ext_kind = finding.kind;
  v.read_fault = ReadFaultOf(reader, finding);
  v.txns = {reader};
  if (finding.writer.valid() && finding.writer != reader) v.txns.push_back(finding.writer);
  v.expected = h.ListToString(expected);
  v.observed = h.ListToString(observed);
  std::string why;
  if (first_difference >= observed.size() && finding.kind == ExtKind::kIntermediate) {
    why = fmt::format(
        "it holds only part of the appends of {}: an intermediate state that transaction went "
        "on to extend before committing",
        Writer(h, finding.writer));
  } else if (first_difference >= observed.size()) {
    why = fmt::format("the list read is missing {} element(s) committed before {}",
                      expected.size() - observed.size(), Point(h, level, reader));
  } else {
    why = fmt::format("element {} ({}) is wrong: {}", first_difference,
                      h.ValueToString(observed[first_difference]),
                      Why(h, level, reader, key, observed[first_difference], finding));
  }
  v.explanation =
      fmt::format("Transaction {} read list {} = {}, but {} holds {}; {}.", DescribeTxn(h, reader),
                  h.KeyToString(key), v.observed, Point(h, level, reader), v.expected, why);
  return v;
}

Violation ExplainNoConflict(const History& h, TxnId first, TxnId second, KeyId key,
                            std::span<const std::pair<TxnId, std::string>> released) {
  Violation v = Base(Anomaly::kNoConflict, IsolationLevel::kSnapshotIsolation, key);
  v.txns = {first, second};
  v.released_names.assign(released.begin(), released.end());
  const bool snapshot = h.has_txn(second) && h.has_snapshot(h.txn(second));
  v.explanation = fmt::format(
      "Transactions {} and {} both wrote key {} and ran concurrently ({}); under snapshot "
      "isolation one of them must abort (a lost update).",
      DescribeTxn(h, first, verdict::TxnLabel(h, v, first)),
      DescribeTxn(h, second, verdict::TxnLabel(h, v, second)), h.KeyToString(key),
      snapshot ? "the first committed, but the snapshot of the second does not see it"
               : "each started before the other committed");
  return v;
}

}  // namespace isowatch::axioms
