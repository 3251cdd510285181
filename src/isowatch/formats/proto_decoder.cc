// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/proto_decoder.h"

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"

namespace isowatch::formats {
namespace {

namespace pb = ::isowatch::v1;
using history::Timestamp;
using history::TxnHeader;
using history::TxnStatus;
using history::Value;

bool HasValue(const pb::Datum& d) { return d.kind_case() != pb::Datum::KIND_NOT_SET; }

}  // namespace

absl::StatusOr<KeyId> ProtoDecoder::Key(const pb::Datum& d, std::string_view what) {
  switch (d.kind_case()) {
    case pb::Datum::kInt:
      return builder_.IntKey(d.int_());
    case pb::Datum::kBytes:
      return builder_.BytesKey(d.bytes());
    case pb::Datum::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(fmt::format("{} has no key (expected int or bytes)", what));
}

// A Datum that is unset or holds neither int nor bytes is absent.
Value ProtoDecoder::ValueOf(const pb::Datum& d) {
  switch (d.kind_case()) {
    case pb::Datum::kInt:
      return Value::Int(d.int_());
    case pb::Datum::kBytes:
      return builder_.BytesValue(d.bytes());
    case pb::Datum::KIND_NOT_SET:
      break;
  }
  return Value::Absent();
}

// Fills elements_ from `list`; every element needs a value.
absl::Status ProtoDecoder::Elements(const google::protobuf::RepeatedPtrField<pb::Datum>& list,
                                    std::string_view what) {
  elements_.clear();
  for (int i = 0; i < list.size(); ++i) {
    if (!HasValue(list.Get(i))) {
      return absl::InvalidArgumentError(
          fmt::format("{}[{}] has no value (expected int or bytes)", what, i));
    }
    elements_.push_back(ValueOf(list.Get(i)));
  }
  return absl::OkStatus();
}

absl::Status ProtoDecoder::ApplyInitialState(const pb::InitialState& initial) {
  if (initial.tombstones_size() > 0 && builder_.live()) {
    return absl::InvalidArgumentError(
        "initial.tombstones: a live history holds no tombstones (the ingest protocol has no "
        "deletes)");
  }
  for (int i = 0; i < initial.tombstones_size(); ++i) {
    const pb::KeyValue& kv = initial.tombstones(i);
    ASSIGN_OR_RETURN(KeyId key, Key(kv.key(), fmt::format("initial.tombstones[{}]", i)));
    builder_.MarkTombstone(key, ValueOf(kv.value()));
  }
  if (HasValue(initial.default_value())) {
    builder_.SetDefaultInitialValue(ValueOf(initial.default_value()));
  }
  absl::flat_hash_map<KeyId, int> seen;
  for (int i = 0; i < initial.registers_size(); ++i) {
    const pb::InitialState::Register& r = initial.registers(i);
    ASSIGN_OR_RETURN(KeyId key, Key(r.key(), fmt::format("initial.registers[{}]", i)));
    if (auto [it, inserted] = seen.try_emplace(key, i); !inserted) {
      return absl::InvalidArgumentError(fmt::format(
          "initial.registers[{}] repeats the key of initial.registers[{}]", i, it->second));
    }
    if (r.installed()) {
      builder_.SetInitialVersion(key, ValueOf(r.value()));
    } else {
      builder_.SetInitialRegister(key, ValueOf(r.value()));
    }
  }
  seen.clear();
  for (int i = 0; i < initial.lists_size(); ++i) {
    const pb::InitialState::List& l = initial.lists(i);
    std::string what = fmt::format("initial.lists[{}]", i);
    ASSIGN_OR_RETURN(KeyId key, Key(l.key(), what));
    if (auto [it, inserted] = seen.try_emplace(key, i); !inserted) {
      return absl::InvalidArgumentError(
          fmt::format("{} repeats the key of initial.lists[{}]", what, it->second));
    }
    RETURN_IF_ERROR(Elements(l.elements(), what + ".elements"));
    builder_.SetInitialList(key, elements_);
  }
  return absl::OkStatus();
}

absl::StatusOr<TxnId> ProtoDecoder::ApplyTxn(const pb::Transaction& t, uint64_t source_offset) {
  TxnHeader header;
  switch (t.id_case()) {
    case pb::Transaction::kIdInt: {
      const fmt::format_int text(t.id_int());
      id_.assign(text.data(), text.size());
    }
      header.id = id_;
      header.id_numeric = true;
      break;
    case pb::Transaction::kIdStr:
      if (t.id_str().empty()) return absl::InvalidArgumentError("a transaction with an empty id");
      header.id = t.id_str();
      break;
    case pb::Transaction::ID_NOT_SET:
      return absl::InvalidArgumentError("a transaction without an id (expected id_int or id_str)");
  }
  switch (t.session_case()) {
    case pb::Transaction::kSessionInt: {
      const fmt::format_int text(t.session_int());
      session_.assign(text.data(), text.size());
    }
      header.session = session_;
      header.session_numeric = true;
      break;
    case pb::Transaction::kSessionStr:
      header.session = t.session_str();
      break;
    case pb::Transaction::SESSION_NOT_SET:
      header.session = "";
      break;
  }
  if (t.has_seq()) {
    if (t.seq() < 0) {
      return absl::InvalidArgumentError(fmt::format(
          "transaction {}: negative sequence number {} (expected 0 or more)", header.id, t.seq()));
    }
    header.seq = t.seq();
  }
  switch (t.status()) {
    case pb::Transaction::STATUS_UNSPECIFIED:
    case pb::Transaction::COMMITTED:
      header.status = TxnStatus::kCommitted;
      break;
    case pb::Transaction::ABORTED:
      header.status = TxnStatus::kAborted;
      break;
    case pb::Transaction::UNKNOWN:
      header.status = TxnStatus::kUnknown;
      break;
    default:
      return absl::InvalidArgumentError(
          fmt::format("transaction {}: unknown status {} (expected COMMITTED, ABORTED or UNKNOWN)",
                      header.id, static_cast<int>(t.status())));
  }
  if (t.has_start()) header.start = Timestamp{t.start().physical(), t.start().logical()};
  if (t.has_commit()) header.commit = Timestamp{t.commit().physical(), t.commit().logical()};
  if (t.has_real_time() && !builder_.live()) {
    header.real_time = history::TxnHeader::RealTime{
        .invoke = t.real_time().invoke(),
        .complete = t.real_time().has_complete() ? t.real_time().complete()
                                                 : history::Transaction::kNeverCompleted};
  }
  header.source_offset = source_offset;
  header.xid = t.xid();
  if (t.has_snapshot()) {
    const auto& xip = t.snapshot().xip();
    header.snapshot = history::SnapshotView{
        .xmin = t.snapshot().xmin(),
        .xmax = t.snapshot().xmax(),
        .xip = std::span<const uint64_t>(reinterpret_cast<const uint64_t*>(xip.data()),
                                         static_cast<size_t>(xip.size()))};
  }
  const auto& ranges = t.range_reads();
  if (!ranges.empty() && builder_.live()) {
    return absl::InvalidArgumentError(fmt::format(
        "transaction {}: range reads in a live history (the ingest protocol has none)", header.id));
  }
  for (int i = 0; i < ranges.size(); ++i) {
    const uint32_t position = ranges.Get(i).position();
    if (position > static_cast<uint32_t>(t.ops_size())) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {}, range_reads[{}]: position {} is past its {} operations",
                      header.id, i, position, t.ops_size()));
    }
    if (i > 0 && position < ranges.Get(i - 1).position()) {
      return absl::InvalidArgumentError(fmt::format(
          "transaction {}, range_reads[{}]: position {} is before the previous range read's {} "
          "(range reads are in program order)",
          header.id, i, position, ranges.Get(i - 1).position()));
    }
  }
  RETURN_IF_ERROR(builder_.BeginTxn(header));
  int next_range = 0;
  // Adds the range reads at `position`.
  auto apply_ranges = [&](int position) -> absl::Status {
    for (; next_range < ranges.size() &&
           ranges.Get(next_range).position() == static_cast<uint32_t>(position);
         ++next_range) {
      if (absl::Status status = ApplyRangeRead(ranges.Get(next_range)); !status.ok()) {
        return absl::InvalidArgumentError(fmt::format("transaction {}, range_reads[{}]: {}",
                                                      header.id, next_range,
                                                      common::StdView(status.message())));
      }
    }
    return absl::OkStatus();
  };
  for (int i = 0; i <= t.ops_size(); ++i) {
    if (absl::Status status = apply_ranges(i); !status.ok()) {
      builder_.AbandonTxn();
      return status;
    }
    if (i == t.ops_size()) break;
    if (absl::Status status = ApplyOp(t.ops(i)); !status.ok()) {
      builder_.AbandonTxn();
      return absl::InvalidArgumentError(fmt::format("transaction {}, ops[{}]: {}", header.id, i,
                                                    common::StdView(status.message())));
    }
  }
  if (builder_.live()) return builder_.EndLiveTxn();
  builder_.EndTxn();
  return TxnId(builder_.txn_count() - 1);
}

absl::Status ProtoDecoder::Pairs(const google::protobuf::RepeatedPtrField<pb::KeyValue>& pairs,
                                 std::string_view what, std::vector<history::KeyValue>& out) {
  out.clear();
  for (int i = 0; i < pairs.size(); ++i) {
    ASSIGN_OR_RETURN(KeyId key, Key(pairs.Get(i).key(), fmt::format("{}[{}]", what, i)));
    out.push_back({key, ValueOf(pairs.Get(i).value())});
  }
  return absl::OkStatus();
}

absl::Status ProtoDecoder::ApplyRangeRead(const pb::RangeRead& r) {
  history::KeyBound low;
  history::KeyBound high;
  if (HasValue(r.low())) {
    ASSIGN_OR_RETURN(KeyId key, Key(r.low(), "low"));
    low = history::KeyBound::At(key);
  }
  if (HasValue(r.high())) {
    ASSIGN_OR_RETURN(KeyId key, Key(r.high(), "high"));
    high = history::KeyBound::At(key);
  }
  RETURN_IF_ERROR(Pairs(r.live(), "live", live_));
  RETURN_IF_ERROR(Pairs(r.dead(), "dead", dead_));
  builder_.RangeRead(low, high, live_, dead_);
  return absl::OkStatus();
}

absl::Status ProtoDecoder::ApplyOp(const pb::Operation& op) {
  ASSIGN_OR_RETURN(KeyId key, Key(op.key(), "the operation"));
  const bool has_value = HasValue(op.value());
  switch (op.kind()) {
    case pb::Operation::READ:
      if (op.list().elements_size() > 0) {
        return absl::InvalidArgumentError("a READ with a list (a list is read by LIST_READ)");
      }
      if (op.unknown()) {
        if (has_value) return absl::InvalidArgumentError("an unknown READ with a value");
        builder_.UnknownRead(key);
      } else {
        builder_.Read(key, ValueOf(op.value()));
      }
      return absl::OkStatus();
    case pb::Operation::WRITE:
    case pb::Operation::APPEND: {
      const bool write = op.kind() == pb::Operation::WRITE;
      const char* kind = write ? "WRITE" : "APPEND";
      const char* a_kind = write ? "a WRITE" : "an APPEND";
      if (!has_value) {
        return absl::InvalidArgumentError(
            fmt::format("{} without a value (expected int or bytes)", a_kind));
      }
      if (op.unknown()) {
        return absl::InvalidArgumentError(
            fmt::format("an unknown {} (only reads can be unknown)", kind));
      }
      if (op.list().elements_size() > 0) {
        return absl::InvalidArgumentError(fmt::format("{} with a list", a_kind));
      }
      if (write) {
        builder_.Write(key, ValueOf(op.value()));
      } else {
        builder_.Append(key, ValueOf(op.value()));
      }
      return absl::OkStatus();
    }
    case pb::Operation::LIST_READ:
      if (has_value) {
        return absl::InvalidArgumentError("a LIST_READ with a value (its result is in list)");
      }
      if (op.unknown()) {
        if (op.list().elements_size() > 0) {
          return absl::InvalidArgumentError("an unknown LIST_READ with elements");
        }
        builder_.UnknownRead(key);
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(Elements(op.list().elements(), "list.elements"));
      builder_.ListRead(key, elements_);
      return absl::OkStatus();
    case pb::Operation::KIND_UNSPECIFIED:
      return absl::InvalidArgumentError(
          "an operation without a kind (expected READ, WRITE, APPEND or LIST_READ)");
    default:
      break;
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown operation kind {} (expected READ, WRITE, APPEND or LIST_READ)",
                  static_cast<int>(op.kind())));
}

}  // namespace isowatch::formats
