// SPDX-License-Identifier: Apache-2.0
// Writer of TimeKiller JSON histories (see timekiller.h). Output is canonical: "[\n", then one
// compact transaction object per line with members in the order tid, sid, sts, cts, ops, lines
// joined by ",\n", then "\n]\n" ("[\n]\n" for no transactions). Writing what the reader read from
// such output reproduces it byte for byte.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/formats/timekiller.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::Value;

constexpr size_t kFlushSize = size_t{1} << 20;

// A JSON integer: -?(0|[1-9][0-9]*).
bool IsJsonInteger(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i == s.size()) return false;
  if (s[i] == '0') return i + 1 == s.size();
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// Builds the output in a buffer and hands it to the stream in large pieces. Not thread-safe.
class JsonOut {
 public:
  explicit JsonOut(std::ostream& out) : out_(out) { buffer_.reserve(kFlushSize + 4096); }

  void Raw(std::string_view s) { buffer_.append(s); }
  void Char(char c) { buffer_.push_back(c); }
  void Int(int64_t v) {
    char digits[24];
    auto result = std::to_chars(digits, digits + sizeof(digits), v);
    buffer_.append(digits, result.ptr);
  }
  // A JSON string. REQUIRES: `s` is valid UTF-8.
  void String(std::string_view s) {
    buffer_.push_back('"');
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"':
          buffer_.append("\\\"");
          break;
        case '\\':
          buffer_.append("\\\\");
          break;
        case '\n':
          buffer_.append("\\n");
          break;
        case '\r':
          buffer_.append("\\r");
          break;
        case '\t':
          buffer_.append("\\t");
          break;
        case '\b':
          buffer_.append("\\b");
          break;
        case '\f':
          buffer_.append("\\f");
          break;
        default:
          if (u < 0x20) {
            fmt::format_to(std::back_inserter(buffer_), "\\u{:04x}", u);
          } else {
            buffer_.push_back(c);
          }
      }
    }
    buffer_.push_back('"');
  }
  void MaybeFlush() {
    if (buffer_.size() >= kFlushSize) Flush();
  }
  absl::Status Finish() {
    Flush();
    out_.flush();
    if (!out_.good()) return absl::DataLossError("cannot write the TimeKiller output");
    return absl::OkStatus();
  }

 private:
  void Flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

  std::ostream& out_;
  std::string buffer_;
};

// An id as written by the source: a number if it was one (and still reads as a JSON integer),
// else a string.
absl::Status WriteId(JsonOut& out, std::string_view id, bool numeric, std::string_view what,
                     std::string_view txn_name) {
  if (numeric && IsJsonInteger(id)) {
    out.Raw(id);
    return absl::OkStatus();
  }
  if (!simdjson::validate_utf8(id.data(), id.size())) {
    return absl::InvalidArgumentError(fmt::format(
        "transaction {}: its {} is not valid UTF-8, which JSON cannot hold", txn_name, what));
  }
  out.String(id);
  return absl::OkStatus();
}

void WriteTimestamp(JsonOut& out, const history::Timestamp& ts) {
  out.Raw("{\"p\":");
  out.Int(ts.physical);
  out.Raw(",\"l\":");
  out.Int(ts.logical);
  out.Char('}');
}

absl::Status CheckKey(const History& h, KeyId key, std::string_view context) {
  if (h.key(key).is_int) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}: key {} is not an integer; TimeKiller holds integer keys only", context,
                  h.KeyToString(key)));
}

absl::Status CheckValue(const History& h, Value v, std::string_view context) {
  if (!v.is_bytes()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}: value {} is not an integer; TimeKiller holds integer values only", context,
                  h.ValueToString(v)));
}

// "v" of a scalar op: the integer, or null for the absent value.
void WriteScalar(JsonOut& out, Value v) {
  if (v.is_int()) {
    out.Int(v.as_int());
  } else {
    out.Raw("null");
  }
}

absl::Status WriteOp(JsonOut& out, const History& h, const Op& op, std::string_view txn_name,
                     size_t index) {
  auto context = [&] { return fmt::format("transaction {}, op #{}", txn_name, index); };
  if (absl::Status s = CheckKey(h, op.key(), context()); !s.ok()) return s;
  if (op.unknown()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: a read with an unknown result cannot be written in TimeKiller format", context()));
  }
  switch (op.kind()) {
    case OpKind::kRead:
      out.Raw("{\"t\":\"r\",\"k\":");
      break;
    case OpKind::kWrite:
      out.Raw("{\"t\":\"w\",\"k\":");
      break;
    case OpKind::kAppend:
      out.Raw("{\"t\":\"a\",\"k\":");
      break;
    case OpKind::kListRead:
      out.Raw("{\"t\":\"r\",\"k\":");
      out.Int(h.key(op.key()).payload);
      out.Raw(",\"v\":[");
      {
        std::span<const Value> elements = h.list_elements(op);
        for (size_t i = 0; i < elements.size(); ++i) {
          if (absl::Status s = CheckValue(h, elements[i], context()); !s.ok()) return s;
          if (i > 0) out.Char(',');
          WriteScalar(out, elements[i]);
        }
      }
      out.Raw("]}");
      return absl::OkStatus();
  }
  if (absl::Status s = CheckValue(h, op.value(), context()); !s.ok()) return s;
  if (op.kind() == OpKind::kAppend && !op.value().is_int()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: an append of the absent value cannot be written", context()));
  }
  out.Int(h.key(op.key()).payload);
  out.Raw(",\"v\":");
  WriteScalar(out, op.value());
  out.Char('}');
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteTimeKiller(const History& h, std::ostream& out_stream) {
  JsonOut out(out_stream);
  out.Raw("[\n");
  bool first = true;
  for (size_t t = 0; t < h.size(); ++t) {
    const TxnId id(static_cast<uint32_t>(t));
    const Transaction& txn = h.txn(id);
    if (!txn.committed()) continue;
    const std::string_view name = h.txn_name(id);
    if (!txn.has_start || !txn.has_commit) {
      return absl::InvalidArgumentError(
          fmt::format("transaction {} has no {} timestamp; TimeKiller needs \"sts\" and \"cts\"",
                      name, txn.has_start ? "commit" : "start"));
    }
    if (!first) out.Raw(",\n");
    first = false;
    out.Raw("{\"tid\":");
    if (absl::Status s = WriteId(out, name, txn.ext_id_numeric, "id", name); !s.ok()) return s;
    out.Raw(",\"sid\":");
    if (absl::Status s = WriteId(out, h.session_name(txn.session), h.session_numeric(txn.session),
                                 "session", name);
        !s.ok()) {
      return s;
    }
    out.Raw(",\"sts\":");
    WriteTimestamp(out, txn.start);
    out.Raw(",\"cts\":");
    WriteTimestamp(out, txn.commit);
    out.Raw(",\"ops\":[");
    std::span<const Op> ops = h.ops(txn);
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i > 0) out.Char(',');
      if (absl::Status s = WriteOp(out, h, ops[i], name, i); !s.ok()) return s;
    }
    out.Raw("]}");
    out.MaybeFlush();
  }
  out.Raw(first ? "]\n" : "\n]\n");
  return out.Finish();
}

absl::Status WriteTimeKillerInitial(const History& h, std::ostream& out_stream) {
  // Keys in increasing order, so that the output does not depend on hash order.
  std::vector<KeyId> keys;
  keys.reserve(h.initial().registers.size() + h.initial().lists.size());
  for (const auto& [key, value] : h.initial().registers) keys.push_back(key);
  for (const auto& [key, range] : h.initial().lists) keys.push_back(key);
  for (KeyId key : keys) {
    if (absl::Status s = CheckKey(h, key, "initial state"); !s.ok()) return s;
  }
  std::sort(keys.begin(), keys.end(),
            [&](KeyId a, KeyId b) { return h.key(a).payload < h.key(b).payload; });
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());

  JsonOut out(out_stream);
  out.Raw("{\"ops\":[");
  bool first = true;
  auto begin_op = [&](const char* type, KeyId key) {
    out.Raw(first ? "\n" : ",\n");
    first = false;
    out.Raw(type);
    out.Int(h.key(key).payload);
    out.Raw(",\"v\":");
  };
  for (KeyId key : keys) {
    if (auto it = h.initial().registers.find(key); it != h.initial().registers.end()) {
      if (absl::Status s = CheckValue(h, it->second, "initial state"); !s.ok()) return s;
      begin_op("{\"t\":\"w\",\"k\":", key);
      WriteScalar(out, it->second);
      out.Char('}');
    } else {
      for (Value element : h.InitialList(key)) {
        if (absl::Status s = CheckValue(h, element, "initial state"); !s.ok()) return s;
        if (!element.is_int()) {
          return absl::InvalidArgumentError(
              fmt::format("initial state: list {} holds an absent element", h.KeyToString(key)));
        }
        begin_op("{\"t\":\"a\",\"k\":", key);
        out.Int(element.as_int());
        out.Char('}');
      }
    }
    out.MaybeFlush();
  }
  out.Raw(first ? "]}\n" : "\n]}\n");
  return out.Finish();
}

}  // namespace isowatch::formats
