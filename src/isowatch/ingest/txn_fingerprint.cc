// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/txn_fingerprint.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace isowatch::ingest {
namespace {

// 64-bit FNV-1a over a stream of bytes.
class Fnv1a {
 public:
  void Byte(uint8_t b) {
    hash_ ^= b;
    hash_ *= kPrime;
  }
  // Eight bytes, least significant first, so the result does not depend on the host's byte order.
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  // A length, then the bytes: no two different sequences of strings encode the same.
  void Bytes(std::string_view s) {
    U64(s.size());
    for (char c : s) Byte(static_cast<uint8_t>(c));
  }
  uint64_t value() const { return hash_; }

 private:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t hash_ = kOffsetBasis;
};

void HashDatum(const v1::Datum& d, Fnv1a& h) {
  switch (d.kind_case()) {
    case v1::Datum::kInt:
      h.Byte(1);
      h.I64(d.int_());
      return;
    case v1::Datum::kBytes:
      h.Byte(2);
      h.Bytes(d.bytes());
      return;
    case v1::Datum::KIND_NOT_SET:
      break;
  }
  h.Byte(0);
}

void HashTimestamp(bool present, const v1::Timestamp& ts, Fnv1a& h) {
  if (!present) {
    h.Byte(0);
    return;
  }
  h.Byte(1);
  h.I64(ts.physical());
  h.I64(ts.logical());
}

}  // namespace

uint64_t TxnFingerprint(const v1::Transaction& txn) {
  Fnv1a h;
  switch (txn.id_case()) {
    case v1::Transaction::kIdInt:
      h.Byte(1);
      h.I64(txn.id_int());
      break;
    case v1::Transaction::kIdStr:
      h.Byte(2);
      h.Bytes(txn.id_str());
      break;
    case v1::Transaction::ID_NOT_SET:
      h.Byte(0);
      break;
  }
  switch (txn.session_case()) {
    case v1::Transaction::kSessionInt:
      h.Byte(1);
      h.I64(txn.session_int());
      break;
    case v1::Transaction::kSessionStr:
      h.Byte(2);
      h.Bytes(txn.session_str());
      break;
    case v1::Transaction::SESSION_NOT_SET:
      h.Byte(0);
      break;
  }
  if (txn.has_seq()) {
    h.Byte(1);
    h.I64(txn.seq());
  } else {
    h.Byte(0);
  }
  const int status = txn.status() == v1::Transaction::STATUS_UNSPECIFIED
                         ? v1::Transaction::COMMITTED
                         : txn.status();
  h.I64(status);
  HashTimestamp(txn.has_start(), txn.start(), h);
  HashTimestamp(txn.has_commit(), txn.commit(), h);
  h.U64(static_cast<uint64_t>(txn.ops_size()));
  for (const v1::Operation& op : txn.ops()) {
    h.I64(op.kind());
    HashDatum(op.key(), h);
    HashDatum(op.value(), h);
    h.U64(static_cast<uint64_t>(op.list().elements_size()));
    for (const v1::Datum& e : op.list().elements()) HashDatum(e, h);
    h.Byte(op.unknown() ? 1 : 0);
  }
  return h.value();
}

std::string TxnIdString(const v1::Transaction& txn) {
  switch (txn.id_case()) {
    case v1::Transaction::kIdInt:
      return fmt::format_int(txn.id_int()).str();
    case v1::Transaction::kIdStr:
      return txn.id_str();
    case v1::Transaction::ID_NOT_SET:
      break;
  }
  return std::string();
}

}  // namespace isowatch::ingest
