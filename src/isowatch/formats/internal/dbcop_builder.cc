// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/dbcop_builder.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::formats::internal {

using history::Op;
using history::OpKind;
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

void DbcopBuilder::StartSession() {
  ++session_;
  index_ = 0;
  session_name_ = std::to_string(session_);
}

void DbcopBuilder::Reserve(size_t txns, size_t events) {
  builder_.Reserve(txns, events);
  expected_writes_ = events;
}

void DbcopBuilder::EndSession(uint64_t offset) {
  if (index_ == 0) {
    builder_.Note("empty sessions (kept as positions)",
                  fmt::format("session {} at byte {}", session_, offset));
  }
}

absl::Status DbcopBuilder::AddTxn(const std::vector<DbcopEvent>& events, bool success,
                                  uint64_t offset) {
  // "session:index", written by hand: fmt::format and std::to_string for every transaction cost
  // a tenth of the reading.
  char index[24];
  const std::to_chars_result r = std::to_chars(std::begin(index), std::end(index), index_++);
  id_.assign(session_name_);
  id_.push_back(':');
  id_.append(index, r.ptr);
  const std::string& id = id_;
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
  header.id_new = true;  // "session:index" is new with every transaction
  header.session = session_name_;
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
    if (WrittenBefore(key, *e.value)) {
      builder_.Note("duplicate writes of one (variable, value)",
                    fmt::format("transaction {} event {}: variable {} value {}", id, i, e.variable,
                                *e.value));
    }
    builder_.Write(key, Value::Int(*e.value));
  }
  builder_.EndTxn();
  return absl::OkStatus();
}

bool DbcopBuilder::WrittenBefore(KeyId key, int64_t value) {
  ++writes_;
  if (!exact_) {
    const auto v = static_cast<uint64_t>(value);
    if (v / 64 < value_bits_.size() || CoverValue(v)) {
      uint64_t& word = value_bits_[v / 64];
      const uint64_t bit = uint64_t{1} << (v % 64);
      if ((word & bit) == 0) {
        word |= bit;
        return false;
      }
      DecideExactly();
    }
  }
  return !written_.insert({key.value(), value}).second;
}

bool DbcopBuilder::CoverValue(uint64_t value) {
  // At most 64 bits (8 bytes) a write, counting the writes to come.
  const uint64_t budget = 64 * (std::max(writes_, expected_writes_) + 1024);
  if (value >= budget) return false;
  const size_t words = std::max<size_t>(2 * value_bits_.size(), value / 64 + 1);
  value_bits_.resize(std::min<size_t>(words, budget / 64), 0);
  // The values written while out of range that are now in it: their bits, and if two of them
  // are one value, exactness from here on.
  bool twice = false;
  absl::erase_if(written_, [&](const std::pair<uint32_t, int64_t>& w) {
    const auto v = static_cast<uint64_t>(w.second);
    if (v / 64 >= value_bits_.size()) return false;
    uint64_t& word = value_bits_[v / 64];
    const uint64_t bit = uint64_t{1} << (v % 64);
    twice = twice || (word & bit) != 0;
    word |= bit;
    return true;
  });
  if (twice) DecideExactly();
  return !exact_;
}

void DbcopBuilder::DecideExactly() {
  exact_ = true;
  value_bits_ = {};
  written_.clear();
  written_.reserve(static_cast<size_t>(std::max(writes_, expected_writes_ / 2)));
  for (const Op& op : builder_.ops()) {
    if (op.kind() == OpKind::kWrite) written_.insert({op.key().value(), op.value().as_int()});
  }
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
