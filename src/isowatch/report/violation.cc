// SPDX-License-Identifier: Apache-2.0
#include "isowatch/report/violation.h"

namespace isowatch::report {

const char* IsolationLevelName(IsolationLevel level) {
  switch (level) {
    case IsolationLevel::kSnapshotIsolation:
      return "si";
    case IsolationLevel::kSerializable:
      return "ser";
  }
  return "?";
}

std::optional<IsolationLevel> ParseIsolationLevel(std::string_view name) {
  if (name == "si" || name == "SI" || name == "snapshot-isolation") {
    return IsolationLevel::kSnapshotIsolation;
  }
  if (name == "ser" || name == "SER" || name == "serializable")
    return IsolationLevel::kSerializable;
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

}  // namespace isowatch::report
