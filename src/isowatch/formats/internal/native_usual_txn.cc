// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/native_usual_txn.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

namespace isowatch::formats::internal {
namespace {

// Wire types of the protobuf encoding that the usual shape uses.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kLengthDelimited = 2;

// Field numbers of isowatch.v1 (proto/isowatch/v1/history.proto).
constexpr uint32_t kRecordTxn = 2;
constexpr uint32_t kTxnIdInt = 1;
constexpr uint32_t kTxnIdStr = 2;
constexpr uint32_t kTxnSessionInt = 3;
constexpr uint32_t kTxnSessionStr = 4;
constexpr uint32_t kTxnSeq = 5;
constexpr uint32_t kTxnStatus = 6;
constexpr uint32_t kTxnStart = 7;
constexpr uint32_t kTxnCommit = 8;
constexpr uint32_t kTxnOps = 9;
constexpr uint32_t kTxnXid = 11;
constexpr uint32_t kOpKind = 1;
constexpr uint32_t kOpKey = 2;
constexpr uint32_t kOpValue = 3;
constexpr uint32_t kOpList = 4;
constexpr uint32_t kOpUnknown = 5;
constexpr uint32_t kListElements = 1;
constexpr uint32_t kDatumInt = 1;
constexpr uint32_t kDatumBytes = 2;
constexpr uint32_t kTimestampPhysical = 1;
constexpr uint32_t kTimestampLogical = 2;

// isowatch.v1.Operation.Kind and Transaction.Status values.
constexpr uint64_t kRead = 1;
constexpr uint64_t kWrite = 2;
constexpr uint64_t kAppend = 3;
constexpr uint64_t kListRead = 4;
constexpr uint64_t kLastStatus = 3;

// Reads the fields of one message. Every read answers false on what the usual shape does not
// hold, and the whole record is then declined.
class Fields {
 public:
  explicit Fields(std::string_view bytes)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(p_ + bytes.size()) {}

  bool done() const { return p_ == end_; }

  // The next field's number and wire type.
  bool Tag(uint32_t* field, uint32_t* wire) {
    uint64_t tag = 0;
    if (!Varint(&tag) || tag > std::numeric_limits<uint32_t>::max()) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    return true;
  }

  // A varint in its shortest form (an over-long one is valid protobuf, but rare enough to leave
  // to the generated parser, which knows how far it accepts them).
  bool Varint(uint64_t* value) {
    if (p_ != end_ && *p_ < 0x80) [[likely]] {
      *value = *p_++;
      return true;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10 && p_ != end_; ++i) {
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (b < 0x80) {
        if (b == 0 || (i == 9 && b > 1)) return false;  // over-long, or past 64 bits
        *value = v;
        return true;
      }
    }
    return false;
  }

  // A length-delimited field's bytes.
  bool Bytes(std::string_view* out) {
    uint64_t n = 0;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// A length-delimited field met for the first time (*seen false, then set), whose bytes `decode`
// accepts.
template <typename Decode>
bool OnceMessage(Fields& f, uint32_t wire, bool* seen, Decode decode) {
  std::string_view inner;
  if (*seen || wire != kLengthDelimited || !f.Bytes(&inner) || !decode(inner)) return false;
  *seen = true;
  return true;
}

bool Ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
}

// A Datum with at most one of its fields (protobuf would let the last one win).
bool DecodeDatum(std::string_view bytes, UsualDatum* d) {
  *d = UsualDatum();
  Fields f(bytes);
  if (f.done()) return true;
  uint32_t field = 0;
  uint32_t wire = 0;
  if (!f.Tag(&field, &wire)) return false;
  if (field == kDatumInt && wire == kVarint) {
    uint64_t v = 0;
    if (!f.Varint(&v)) return false;
    d->kind = UsualDatum::Kind::kInt;
    d->i = static_cast<int64_t>(v);
  } else if (field == kDatumBytes && wire == kLengthDelimited) {
    if (!f.Bytes(&d->bytes)) return false;
    d->kind = UsualDatum::Kind::kBytes;
  } else {
    return false;
  }
  return f.done();
}

bool DecodeTimestamp(std::string_view bytes, int64_t* physical, int64_t* logical) {
  *physical = 0;
  *logical = 0;
  bool seen_physical = false;
  bool seen_logical = false;
  Fields f(bytes);
  while (!f.done()) {
    uint32_t field = 0;
    uint32_t wire = 0;
    uint64_t v = 0;
    if (!f.Tag(&field, &wire) || wire != kVarint || !f.Varint(&v)) return false;
    if (field == kTimestampPhysical && !seen_physical) {
      seen_physical = true;
      *physical = static_cast<int64_t>(v);
    } else if (field == kTimestampLogical && !seen_logical) {
      seen_logical = true;
      *logical = static_cast<int64_t>(v);
    } else {
      return false;
    }
  }
  return true;
}

// A ListValue's elements, appended to txn->elements; each must hold a value.
bool DecodeList(std::string_view bytes, UsualTxn* txn) {
  Fields f(bytes);
  while (!f.done()) {
    uint32_t field = 0;
    uint32_t wire = 0;
    std::string_view element;
    if (!f.Tag(&field, &wire) || field != kListElements || wire != kLengthDelimited ||
        !f.Bytes(&element)) {
      return false;
    }
    UsualDatum& d = txn->elements.emplace_back();
    if (!DecodeDatum(element, &d) || d.kind == UsualDatum::Kind::kNone) return false;
  }
  return true;
}

// An Operation that ProtoDecoder::ApplyOp accepts, appended to txn->ops.
bool DecodeOp(std::string_view bytes, UsualTxn* txn) {
  UsualOp& op = txn->ops.emplace_back();
  op.elements_begin = static_cast<uint32_t>(txn->elements.size());
  uint64_t kind = 0;
  bool seen_kind = false;
  bool seen_key = false;
  bool seen_value = false;
  bool seen_list = false;
  bool seen_unknown = false;
  Fields f(bytes);
  while (!f.done()) {
    uint32_t field = 0;
    uint32_t wire = 0;
    if (!f.Tag(&field, &wire)) return false;
    uint64_t v = 0;
    switch (field) {
      case kOpKind:
        if (seen_kind || wire != kVarint || !f.Varint(&kind)) return false;
        seen_kind = true;
        break;
      case kOpKey:
        if (!OnceMessage(f, wire, &seen_key, [&](auto b) { return DecodeDatum(b, &op.key); })) {
          return false;
        }
        break;
      case kOpValue:
        if (!OnceMessage(f, wire, &seen_value, [&](auto b) { return DecodeDatum(b, &op.value); })) {
          return false;
        }
        break;
      case kOpList:
        if (!OnceMessage(f, wire, &seen_list, [&](auto b) { return DecodeList(b, txn); })) {
          return false;
        }
        break;
      case kOpUnknown:
        if (seen_unknown || wire != kVarint || !f.Varint(&v) || v > 1) return false;
        seen_unknown = true;
        op.unknown = v == 1;
        break;
      default:
        return false;
    }
  }
  op.elements_count = static_cast<uint32_t>(txn->elements.size()) - op.elements_begin;
  // What ProtoDecoder::ApplyOp refuses is declined, so that its message stays the only one.
  if (op.key.kind == UsualDatum::Kind::kNone) return false;
  const bool has_value = op.value.kind != UsualDatum::Kind::kNone;
  const bool has_elements = op.elements_count > 0;
  switch (kind) {
    case kRead:
      if (has_elements || (op.unknown && has_value)) return false;
      break;
    case kWrite:
    case kAppend:
      if (!has_value || op.unknown || has_elements) return false;
      break;
    case kListRead:
      if (has_value || (op.unknown && has_elements)) return false;
      break;
    default:
      return false;
  }
  op.kind = static_cast<int>(kind);
  return true;
}

bool DecodeTxn(std::string_view bytes, UsualTxn* txn) {
  bool seen_id = false;
  bool seen_session = false;
  bool seen_status = false;
  bool seen_xid = false;
  uint64_t status = 0;
  Fields f(bytes);
  while (!f.done()) {
    uint32_t field = 0;
    uint32_t wire = 0;
    if (!f.Tag(&field, &wire)) return false;
    std::string_view inner;
    uint64_t v = 0;
    switch (field) {
      case kTxnIdInt:
        if (seen_id || wire != kVarint || !f.Varint(&v)) return false;
        seen_id = true;
        txn->id_numeric = true;
        txn->id_int = static_cast<int64_t>(v);
        break;
      case kTxnIdStr:
        if (seen_id || wire != kLengthDelimited || !f.Bytes(&txn->id_str)) return false;
        if (txn->id_str.empty() || !Ascii(txn->id_str)) return false;
        seen_id = true;
        break;
      case kTxnSessionInt:
        if (seen_session || wire != kVarint || !f.Varint(&v)) return false;
        seen_session = true;
        txn->session = UsualTxn::Session::kInt;
        txn->session_int = static_cast<int64_t>(v);
        break;
      case kTxnSessionStr:
        if (seen_session || wire != kLengthDelimited || !f.Bytes(&txn->session_str) ||
            !Ascii(txn->session_str)) {
          return false;
        }
        seen_session = true;
        txn->session = UsualTxn::Session::kStr;
        break;
      case kTxnSeq:
        if (txn->has_seq || wire != kVarint || !f.Varint(&v)) return false;
        txn->has_seq = true;
        txn->seq = static_cast<int64_t>(v);
        if (txn->seq < 0) return false;
        break;
      case kTxnStatus:
        if (seen_status || wire != kVarint || !f.Varint(&status) || status > kLastStatus) {
          return false;
        }
        seen_status = true;
        break;
      case kTxnStart:
        if (!OnceMessage(f, wire, &txn->has_start, [&](auto b) {
              return DecodeTimestamp(b, &txn->start_physical, &txn->start_logical);
            })) {
          return false;
        }
        break;
      case kTxnCommit:
        if (!OnceMessage(f, wire, &txn->has_commit, [&](auto b) {
              return DecodeTimestamp(b, &txn->commit_physical, &txn->commit_logical);
            })) {
          return false;
        }
        break;
      case kTxnOps:
        if (wire != kLengthDelimited || !f.Bytes(&inner) || !DecodeOp(inner, txn)) return false;
        break;
      case kTxnXid:
        if (seen_xid || wire != kVarint || !f.Varint(&txn->xid)) return false;
        seen_xid = true;
        break;
      default:
        return false;
    }
  }
  txn->status = static_cast<int>(status);
  return seen_id;
}

}  // namespace

bool DecodeUsualTxn(std::string_view record, UsualTxn* txn) {
  txn->id_numeric = false;
  txn->id_int = 0;
  txn->id_str = {};
  txn->session = UsualTxn::Session::kNone;
  txn->session_int = 0;
  txn->session_str = {};
  txn->has_seq = false;
  txn->seq = 0;
  txn->status = 0;
  txn->has_start = false;
  txn->start_physical = txn->start_logical = 0;
  txn->has_commit = false;
  txn->commit_physical = txn->commit_logical = 0;
  txn->xid = 0;
  txn->ops.clear();
  txn->elements.clear();
  Fields f(record);
  uint32_t field = 0;
  uint32_t wire = 0;
  std::string_view body;
  if (!f.Tag(&field, &wire) || field != kRecordTxn || wire != kLengthDelimited || !f.Bytes(&body) ||
      !f.done()) {
    return false;
  }
  return DecodeTxn(body, txn);
}

}  // namespace isowatch::formats::internal
