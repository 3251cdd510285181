// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/checkpoint_codec.h"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::history::checkpoint_codec {
namespace {

// Flag bits of CheckpointOps.flags (history_checkpoint.proto).
constexpr uint8_t kOpUnknown = 0x10;
constexpr uint8_t kOpFlags = 0x1f;

template <typename... Args>
absl::Status Malformed(fmt::format_string<Args...> format, Args&&... args) {
  return absl::DataLossError(fmt::format(format, std::forward<Args>(args)...));
}

uint8_t Byte(const std::string& bytes, size_t i) { return static_cast<uint8_t>(bytes[i]); }

absl::StatusOr<Value> LoadValue(uint8_t kind, int64_t payload, size_t byte_count,
                                std::string_view what, size_t i) {
  if (kind > static_cast<uint8_t>(ValueKind::kBytes)) {
    return Malformed("{} {}: value kind {}", what, i, kind);
  }
  if (kind == static_cast<uint8_t>(ValueKind::kBytes) &&
      (payload < 0 || static_cast<uint64_t>(payload) >= byte_count)) {
    return Malformed("{} {}: byte string {} of {}", what, i, payload, byte_count);
  }
  return Value::FromRaw(static_cast<ValueKind>(kind), payload);
}

}  // namespace

void SaveValues(std::span<const Value> values, v1::CheckpointValues& out) {
  out.mutable_kinds()->reserve(values.size());
  out.mutable_payloads()->Reserve(static_cast<int>(values.size()));
  for (const Value v : values) {
    out.mutable_kinds()->push_back(static_cast<char>(v.kind()));
    out.add_payloads(v.payload());
  }
}

absl::StatusOr<std::vector<Value>> LoadValues(const v1::CheckpointValues& in, size_t byte_count,
                                              std::string_view what) {
  const std::string& kinds = in.kinds();
  if (kinds.size() != static_cast<size_t>(in.payloads_size())) {
    return Malformed("{}: {} kinds for {} payloads", what, kinds.size(), in.payloads_size());
  }
  std::vector<Value> out;
  out.reserve(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    ASSIGN_OR_RETURN(const Value v, LoadValue(Byte(kinds, i), in.payloads(static_cast<int>(i)),
                                              byte_count, what, i));
    out.push_back(v);
  }
  return out;
}

void SaveOps(std::span<const Op> ops, v1::CheckpointOps& out) {
  out.mutable_flags()->reserve(out.flags().size() + ops.size());
  for (const Op& op : ops) {
    const bool list_read = op.kind() == OpKind::kListRead;
    const Value v = list_read ? Value::Absent() : op.value();
    out.mutable_flags()->push_back(static_cast<char>(static_cast<uint8_t>(op.kind()) |
                                                     static_cast<uint8_t>(v.kind()) << 2 |
                                                     (op.unknown() ? kOpUnknown : 0)));
    out.add_keys(op.key().value());
    // An unknown list read may carry its owner's offset; it has no elements.
    out.add_payloads(op.unknown() ? 0
                     : list_read  ? static_cast<int64_t>(op.list_offset())
                                  : v.payload());
    out.add_list_sizes(op.list_size());
  }
}

absl::Status LoadOps(const v1::CheckpointOps& in, size_t key_count, size_t byte_count,
                     absl::FunctionRef<bool(uint64_t offset, uint32_t size)> list_in_range,
                     std::string_view what, std::vector<Op>& out) {
  const std::string& flags = in.flags();
  const size_t n = flags.size();
  if (n != static_cast<size_t>(in.keys_size()) || n != static_cast<size_t>(in.payloads_size()) ||
      n != static_cast<size_t>(in.list_sizes_size())) {
    return Malformed("{} operations: arrays of different lengths", what);
  }
  out.reserve(out.size() + n);
  for (size_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i);
    const uint8_t f = Byte(flags, i);
    const auto kind = static_cast<OpKind>(f & 3);
    const uint8_t value_kind = (f >> 2) & 3;
    const KeyId key(in.keys(j));
    const int64_t payload = in.payloads(j);
    const uint32_t list_size = in.list_sizes(j);
    if ((f & ~kOpFlags) != 0 || key.value() >= key_count) {
      return Malformed("{} operation {}: flags {:#x}, key {} of {}", what, i, f, key.value(),
                       key_count);
    }
    if ((f & kOpUnknown) != 0) {
      if ((kind != OpKind::kRead && kind != OpKind::kListRead) || value_kind != 0 || payload != 0 ||
          list_size != 0) {
        return Malformed("{} operation {}: an unknown result with a value", what, i);
      }
      out.push_back(Op::UnknownRead(key, kind));
    } else if (kind == OpKind::kListRead) {
      const auto offset = static_cast<uint64_t>(payload);
      if (value_kind != 0 || !list_in_range(offset, list_size)) {
        return Malformed("{} operation {}: list elements [{}, +{}) out of range", what, i, offset,
                         list_size);
      }
      out.push_back(Op::ListRead(key, offset, list_size));
    } else {
      if (list_size != 0) return Malformed("{} operation {}: a list size for a scalar", what, i);
      ASSIGN_OR_RETURN(const Value v, LoadValue(value_kind, payload, byte_count,
                                                fmt::format("{} operation", what), i));
      out.push_back(kind == OpKind::kRead    ? Op::Read(key, v)
                    : kind == OpKind::kWrite ? Op::Write(key, v)
                                             : Op::Append(key, v));
    }
  }
  return absl::OkStatus();
}

}  // namespace isowatch::history::checkpoint_codec
