// SPDX-License-Identifier: Apache-2.0
// Writer of TimeKiller JSON histories (see timekiller.h). Output is canonical: "[\n", then one
// compact transaction object per line with members in the order tid, sid, sts, cts, ops, lines
// joined by ",\n", then "\n]\n" ("[\n]\n" for no transactions). Writing what the reader read from
// such output reproduces it byte for byte.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/timekiller.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::Value;

constexpr size_t kFlushSize = size_t{1} << 20;

// Builds the output in a buffer and hands it to the stream in large pieces. Writers call
// Reserve(n) before writing at most n bytes, so that the writes themselves need no checks.
// Not thread-safe.
class JsonOut {
 public:
  explicit JsonOut(std::ostream& out)
      : out_(out), buffer_(new char[kFlushSize]), capacity_(kFlushSize) {}

  // Makes room for `n` more bytes.
  void Reserve(size_t n) {
    if (size_ + n <= capacity_) return;
    Flush();
    if (n > capacity_) {
      buffer_.reset(new char[n]);
      capacity_ = n;
    }
  }
  void Raw(std::string_view s) {
    std::memcpy(buffer_.get() + size_, s.data(), s.size());
    size_ += s.size();
  }
  template <size_t N>
  void Literal(const char (&s)[N]) {
    std::memcpy(buffer_.get() + size_, s, N - 1);
    size_ += N - 1;
  }
  void Char(char c) { buffer_[size_++] = c; }
  void Int(int64_t v) {
    char* p = buffer_.get() + size_;
    size_ += static_cast<size_t>(std::to_chars(p, p + kMaxIntChars, v).ptr - p);
  }
  // A JSON string; needs MaxStringBytes(s.size()) bytes. REQUIRES: `s` is valid UTF-8.
  void String(std::string_view s) {
    Char('"');
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"':
          Literal("\\\"");
          break;
        case '\\':
          Literal("\\\\");
          break;
        case '\n':
          Literal("\\n");
          break;
        case '\r':
          Literal("\\r");
          break;
        case '\t':
          Literal("\\t");
          break;
        case '\b':
          Literal("\\b");
          break;
        case '\f':
          Literal("\\f");
          break;
        default:
          if (u < 0x20) {
            static constexpr char kHex[] = "0123456789abcdef";
            Literal("\\u00");
            Char(kHex[u >> 4]);
            Char(kHex[u & 15]);
          } else {
            Char(c);
          }
      }
    }
    Char('"');
  }
  static size_t MaxStringBytes(size_t n) { return 6 * n + 2; }

  absl::Status Finish() {
    Flush();
    out_.flush();
    if (!out_.good()) return absl::DataLossError("cannot write the TimeKiller output");
    return absl::OkStatus();
  }

  static constexpr size_t kMaxIntChars = 20;  // "-9223372036854775808"

 private:
  void Flush() {
    out_.write(buffer_.get(), static_cast<std::streamsize>(size_));
    size_ = 0;
  }

  std::ostream& out_;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_;
  size_t size_ = 0;
};

// Writing an id needs this many bytes at most.
size_t MaxIdBytes(std::string_view id) { return JsonOut::MaxStringBytes(id.size()); }

// An id as written by the source: a number if it was one (and still reads as a JSON integer),
// else a string.
absl::Status WriteId(JsonOut& out, std::string_view id, bool numeric, std::string_view what,
                     std::string_view txn_name) {
  if (numeric && internal::IsJsonInteger(id)) {
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

// {"p":P,"l":L}
constexpr size_t kMaxTimestampBytes = 13 + 2 * JsonOut::kMaxIntChars;

void WriteTimestamp(JsonOut& out, const history::Timestamp& ts) {
  out.Literal("{\"p\":");
  out.Int(ts.physical);
  out.Literal(",\"l\":");
  out.Int(ts.logical);
  out.Char('}');
}

absl::Status KeyError(const History& h, KeyId key, std::string_view context) {
  return absl::InvalidArgumentError(
      fmt::format("{}: key {} is not an integer; TimeKiller holds integer keys only", context,
                  h.KeyToString(key)));
}

absl::Status ValueError(const History& h, Value v, std::string_view context) {
  return absl::InvalidArgumentError(
      fmt::format("{}: value {} is not an integer; TimeKiller holds integer values only", context,
                  h.ValueToString(v)));
}

// "v" of a scalar op: the integer, or null for the absent value.
void WriteScalar(JsonOut& out, Value v) {
  if (v.is_int()) {
    out.Int(v.as_int());
  } else {
    out.Literal("null");
  }
}

// {"t":"r","k":K,"v":V} and commas: the bytes an op needs at most, besides list elements.
constexpr size_t kMaxOpBytes = 32 + 2 * JsonOut::kMaxIntChars;
// An element of a list read, with its comma.
constexpr size_t kMaxElementBytes = 1 + JsonOut::kMaxIntChars;

size_t MaxOpBytes(const History& h, const Op& op) {
  return kMaxOpBytes +
         (op.kind() == OpKind::kListRead ? kMaxElementBytes * h.list_elements(op).size() : 0);
}

absl::Status WriteOp(JsonOut& out, const History& h, const Op& op, std::string_view txn_name,
                     size_t index) {
  auto context = [&] { return fmt::format("transaction {}, op #{}", txn_name, index); };
  if (!h.key(op.key()).is_int) return KeyError(h, op.key(), context());
  if (op.unknown()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: a read with an unknown result cannot be written in TimeKiller format", context()));
  }
  switch (op.kind()) {
    case OpKind::kRead:
      out.Literal("{\"t\":\"r\",\"k\":");
      break;
    case OpKind::kWrite:
      out.Literal("{\"t\":\"w\",\"k\":");
      break;
    case OpKind::kAppend:
      out.Literal("{\"t\":\"a\",\"k\":");
      break;
    case OpKind::kListRead: {
      out.Literal("{\"t\":\"r\",\"k\":");
      out.Int(h.key(op.key()).payload);
      out.Literal(",\"v\":[");
      std::span<const Value> elements = h.list_elements(op);
      for (size_t i = 0; i < elements.size(); ++i) {
        if (elements[i].is_bytes()) return ValueError(h, elements[i], context());
        if (i > 0) out.Char(',');
        WriteScalar(out, elements[i]);
      }
      out.Literal("]}");
      return absl::OkStatus();
    }
  }
  if (op.value().is_bytes()) return ValueError(h, op.value(), context());
  if (op.kind() == OpKind::kAppend && !op.value().is_int()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: an append of the absent value cannot be written", context()));
  }
  out.Int(h.key(op.key()).payload);
  out.Literal(",\"v\":");
  WriteScalar(out, op.value());
  out.Char('}');
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteTimeKiller(const History& h, std::ostream& out_stream) {
  JsonOut out(out_stream);
  out.Reserve(2);
  out.Literal("[\n");
  bool first = true;
  for (size_t t = 0; t < h.size(); ++t) {
    const TxnId id(static_cast<uint32_t>(t));
    const Transaction& txn = h.txn(id);
    if (!txn.committed()) continue;
    const std::string_view name = h.txn_name(id);
    const std::string_view session = h.session_name(txn.session);
    const bool snapshot = h.has_snapshot(txn);
    if ((!txn.has_start && !snapshot) || !txn.has_commit) {
      return absl::InvalidArgumentError(fmt::format(
          "transaction {} has no {}; TimeKiller needs \"sts\" (or a snapshot) and \"cts\"", name,
          txn.has_commit ? "start timestamp" : "commit timestamp"));
    }
    std::span<const Op> ops = h.ops(txn);
    // The isowatch extension: the xid and the snapshot, in pg_current_snapshot()'s text form.
    std::string extension;
    if (const uint64_t xid = h.xid(txn); xid != 0) extension = fmt::format(",\"xid\":{}", xid);
    if (snapshot) {
      extension += fmt::format(",\"snapshot\":\"{}\"", history::FormatSnapshot(h.snapshot(txn)));
    }
    size_t bytes =
        64 + MaxIdBytes(name) + MaxIdBytes(session) + 2 * kMaxTimestampBytes + extension.size();
    for (const Op& op : ops) bytes += MaxOpBytes(h, op);
    out.Reserve(bytes);

    if (!first) out.Literal(",\n");
    first = false;
    out.Literal("{\"tid\":");
    if (absl::Status s = WriteId(out, name, txn.ext_id_numeric, "id", name); !s.ok()) return s;
    out.Literal(",\"sid\":");
    if (absl::Status s = WriteId(out, session, h.session_numeric(txn.session), "session", name);
        !s.ok()) {
      return s;
    }
    out.Raw(extension);
    if (!snapshot) {
      out.Literal(",\"sts\":");
      WriteTimestamp(out, txn.start);
    }
    out.Literal(",\"cts\":");
    WriteTimestamp(out, txn.commit);
    out.Literal(",\"ops\":[");
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i > 0) out.Char(',');
      if (absl::Status s = WriteOp(out, h, ops[i], name, i); !s.ok()) return s;
    }
    out.Literal("]}");
  }
  out.Reserve(4);
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
    if (!h.key(key).is_int) return KeyError(h, key, "initial state");
  }
  std::sort(keys.begin(), keys.end(),
            [&](KeyId a, KeyId b) { return h.key(a).payload < h.key(b).payload; });
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());

  JsonOut out(out_stream);
  out.Reserve(8);
  out.Literal("{\"ops\":[");
  bool first = true;
  // Writes {"t":T,"k":K,"v":V} for the integer or absent value `v`.
  auto write_op = [&](const char* type, KeyId key, Value v) {
    out.Reserve(kMaxOpBytes);
    out.Raw(first ? "\n" : ",\n");
    first = false;
    out.Literal("{\"t\":\"");
    out.Raw(type);
    out.Literal("\",\"k\":");
    out.Int(h.key(key).payload);
    out.Literal(",\"v\":");
    WriteScalar(out, v);
    out.Char('}');
  };
  for (KeyId key : keys) {
    if (auto it = h.initial().registers.find(key); it != h.initial().registers.end()) {
      if (it->second.is_bytes()) return ValueError(h, it->second, "initial state");
      write_op("w", key, it->second);
    } else {
      for (Value element : h.InitialList(key)) {
        if (element.is_bytes()) return ValueError(h, element, "initial state");
        if (!element.is_int()) {
          return absl::InvalidArgumentError(
              fmt::format("initial state: list {} holds an absent element", h.KeyToString(key)));
        }
        write_op("a", key, element);
      }
    }
  }
  out.Reserve(5);
  out.Raw(first ? "]}\n" : "\n]}\n");
  return out.Finish();
}

}  // namespace isowatch::formats
