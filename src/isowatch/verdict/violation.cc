// SPDX-License-Identifier: Apache-2.0
#include "isowatch/verdict/violation.h"

#include <algorithm>
#include <tuple>

namespace isowatch::verdict {

const char* IsolationLevelName(IsolationLevel level) {
  switch (level) {
    case IsolationLevel::kSnapshotIsolation:
      return "si";
    case IsolationLevel::kSerializable:
      return "ser";
    case IsolationLevel::kReadCommitted:
      return "rc";
    case IsolationLevel::kRepeatableRead:
      return "rr";
    case IsolationLevel::kReadAtomic:
      return "ra";
    case IsolationLevel::kCausal:
      return "tcc";
  }
  return "?";
}

std::optional<IsolationLevel> ParseIsolationLevel(std::string_view name) {
  if (name == "si" || name == "SI" || name == "snapshot-isolation") {
    return IsolationLevel::kSnapshotIsolation;
  }
  if (name == "ser" || name == "SER" || name == "serializable")
    return IsolationLevel::kSerializable;
  if (name == "rc" || name == "RC" || name == "read-committed") {
    return IsolationLevel::kReadCommitted;
  }
  if (name == "rr" || name == "RR" || name == "repeatable-read") {
    return IsolationLevel::kRepeatableRead;
  }
  if (name == "ra" || name == "RA" || name == "read-atomic") return IsolationLevel::kReadAtomic;
  if (name == "tcc" || name == "TCC" || name == "causal") return IsolationLevel::kCausal;
  return std::nullopt;
}

const char* AnomalyName(Anomaly anomaly) {
  switch (anomaly) {
    case Anomaly::kSession:
      return "SESSION";
    case Anomaly::kInt:
      return "INT";
    case Anomaly::kExt:
      return "EXT";
    case Anomaly::kNoConflict:
      return "NOCONFLICT";
    case Anomaly::kG0:
      return "G0";
    case Anomaly::kG1a:
      return "G1a";
    case Anomaly::kG1b:
      return "G1b";
    case Anomaly::kG1c:
      return "G1c";
    case Anomaly::kGSingle:
      return "G-single";
    case Anomaly::kG2Item:
      return "G2-item";
    case Anomaly::kGSIa:
      return "G-SIa";
    case Anomaly::kGSIb:
      return "G-SIb";
    case Anomaly::kThinAir:
      return "thin-air";
    case Anomaly::kIncompatibleOrder:
      return "incompatible-order";
    case Anomaly::kDuplicateElements:
      return "duplicate-elements";
    case Anomaly::kTapA:
      return "TAP-a";
    case Anomaly::kTapB:
      return "TAP-b";
    case Anomaly::kTapC:
      return "TAP-c";
    case Anomaly::kTapD:
      return "TAP-d";
    case Anomaly::kTapE:
      return "TAP-e";
    case Anomaly::kTapF:
      return "TAP-f";
    case Anomaly::kTapG:
      return "TAP-g";
    case Anomaly::kTapH:
      return "TAP-h";
    case Anomaly::kTapI:
      return "TAP-i";
    case Anomaly::kTapJ:
      return "TAP-j";
    case Anomaly::kTapK:
      return "TAP-k";
    case Anomaly::kTapL:
      return "TAP-l";
    case Anomaly::kTapM:
      return "TAP-m";
    case Anomaly::kTapN:
      return "TAP-n";
  }
  return "?";
}

const char* ExtKindName(ExtKind kind) {
  switch (kind) {
    case ExtKind::kNone:
      return "";
    case ExtKind::kNever:
      return "never";
    case ExtKind::kBefore:
      return "before";
    case ExtKind::kUncommitted:
      return "uncommitted";
    case ExtKind::kAfter:
      return "after";
    case ExtKind::kAborted:
      return "aborted";
    case ExtKind::kIntermediate:
      return "intermediate";
    case ExtKind::kUnknown:
      return "unknown";
  }
  return "?";
}

const char* ReadFaultName(ReadFault fault) {
  switch (fault) {
    case ReadFault::kNone:
      return "";
    case ReadFault::kThinAir:
      return "thin-air read";
    case ReadFault::kAborted:
      return "aborted read";
    case ReadFault::kFuture:
      return "future read";
    case ReadFault::kNotOwnWrite:
      return "not own write";
    case ReadFault::kNotLastWrite:
      return "not last write";
    case ReadFault::kIntermediate:
      return "intermediate read";
  }
  return "?";
}

const char* CycleKindName(CycleKind kind) {
  switch (kind) {
    case CycleKind::kNone:
      return "";
    case CycleKind::kWriteCycle:
      return "write cycle";
    case CycleKind::kCircularFlow:
      return "circular information flow";
    case CycleKind::kOrderCycle:
      return "order cycle";
    case CycleKind::kLostUpdate:
      return "lost update";
    case CycleKind::kReadSkew:
      return "read skew";
    case CycleKind::kMissedEffect:
      return "missed effect";
    case CycleKind::kWriteSkew:
      return "write skew";
    case CycleKind::kAntiDependencyCycle:
      return "anti-dependency cycle";
    case CycleKind::kLongFork:
      return "long fork";
  }
  return "?";
}

std::string TxnLabel(const history::History& h, const Violation& v, TxnId id) {
  if (!h.has_txn(id)) {
    for (const auto& [r, name] : v.released_names) {
      if (r == id) return name;
    }
  }
  return h.TxnLabel(id);
}

void SortViolations(std::vector<Violation>& violations) {
  auto rank = [](const Violation& v) {
    return std::tie(v.anomaly, v.txns, v.key, v.ext_kind, v.expected, v.observed);
  };
  std::stable_sort(violations.begin(), violations.end(),
                   [&](const Violation& a, const Violation& b) { return rank(a) < rank(b); });
}

}  // namespace isowatch::verdict
