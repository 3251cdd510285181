// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/dbcop_builder.h"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::formats::internal {

using history::TxnHeader;
using history::TxnStatus;
using history::Value;

DbcopBuilder::DbcopBuilder(const ReadOptions& options, std::string source, std::string format,
                           std::string dialect)
    : options_(options),
      source_(std::move(source)),
      format_(std::move(format)),
      dialect_(std::move(dialect)) {
  builder_.set_source(source_);
  builder_.SetDefaultInitialValue(Value::Int(options.initial_value.value_or(0)));
}

void DbcopBuilder::EndSession(uint64_t offset) {
  if (index_ == 0) {
    builder_.Note("empty sessions (kept as positions)",
                  fmt::format("session {} at byte {}", session_, offset));
  }
}

absl::Status DbcopBuilder::AddTxn(const std::vector<DbcopEvent>& events, bool success,
                                  uint64_t offset) {
  const std::string session = std::to_string(session_);
  const std::string id = fmt::format("{}:{}", session_, index_++);
  ++txns_;
  if (success) {
    ++committed_;
  } else {
    builder_.Note(
        "unsuccessful transactions read as aborted (the format cannot tell aborted "
        "from unknown)",
        fmt::format("transaction {} at byte {}", id, offset));
  }
  if (events.empty()) {
    builder_.Note("empty transactions", fmt::format("transaction {} at byte {}", id, offset));
  }
  TxnHeader header;
  header.id = id;
  header.session = session;
  header.session_numeric = true;
  header.status = success ? TxnStatus::kCommitted : TxnStatus::kAborted;
  header.source_offset = offset;
  RETURN_IF_ERROR(builder_.BeginTxn(header));
  const int64_t initial = options_.initial_value.value_or(0);
  for (size_t i = 0; i < events.size(); ++i) {
    const DbcopEvent& e = events[i];
    if (!e.success) {
      builder_.Note("ineffective events dropped (success false)",
                    fmt::format("transaction {} event {}", id, i));
      continue;
    }
    const KeyId key = builder_.IntKey(e.variable);
    if (!e.write) {
      builder_.Read(key, e.value ? Value::Int(*e.value) : Value::Absent());
      continue;
    }
    if (*e.value == initial) {
      builder_.Note("writes of the initial value",
                    fmt::format("transaction {} event {}: variable {}", id, i, e.variable));
    }
    if (!written_.insert({e.variable, *e.value}).second) {
      builder_.Note("duplicate writes of one (variable, value)",
                    fmt::format("transaction {} event {}: variable {} value {}", id, i, e.variable,
                                *e.value));
    }
    builder_.Write(key, Value::Int(*e.value));
  }
  builder_.EndTxn();
  return absl::OkStatus();
}

absl::StatusOr<history::History> DbcopBuilder::Finish() && {
  if (txns_ > 0 && committed_ == 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: no transaction succeeded: this is a dbcop workload template (from `dbcop "
                    "generate`), not an executed history",
                    source_));
  }
  builder_.set_format(format_, dialect_);
  absl::StatusOr<history::History> h = std::move(builder_).Finish();
  if (!h.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", source_, std::string(h.status().message())));
  }
  return h;
}

}  // namespace isowatch::formats::internal
