// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/txn_fingerprint.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <xxhash.h>

#include <fmt/format.h>

namespace isowatch::ingest {
namespace {

// The byte encoding of a transaction's content (docs/ingest-protocol.md), hashed with XXH3-64
// (seed 0) once complete. The encoding is built in a buffer of the calling thread, reused.
class ContentHash {
 public:
  ContentHash() : buffer_(Buffer()) { buffer_.clear(); }
  void Byte(uint8_t b) { buffer_.push_back(static_cast<char>(b)); }
  // Eight bytes, least significant first, so the result does not depend on the host's byte order.
  void U64(uint64_t v) {
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
    buffer_.append(bytes, sizeof(bytes));
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  // A length, then the bytes: no two different sequences of strings encode the same.
  void Bytes(std::string_view s) {
    U64(s.size());
    buffer_.append(s.data(), s.size());
  }
  uint64_t value() const { return XXH3_64bits(buffer_.data(), buffer_.size()); }

 private:
  static std::string& Buffer() {
    thread_local std::string buffer;
    return buffer;
  }
  std::string& buffer_;
};

void HashDatum(const v1::Datum& d, ContentHash& h) {
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

void HashTimestamp(bool present, const v1::Timestamp& ts, ContentHash& h) {
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
  ContentHash h;
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
  // Only when present, so that the fingerprints of transactions without them do not change.
  if (txn.xid() != 0 || txn.has_snapshot()) {
    h.Byte(0xfe);
    h.U64(txn.xid());
    h.Byte(txn.has_snapshot() ? 1 : 0);
    h.U64(txn.snapshot().xmin());
    h.U64(txn.snapshot().xmax());
    h.U64(static_cast<uint64_t>(txn.snapshot().xip_size()));
    for (uint64_t x : txn.snapshot().xip()) h.U64(x);
  }
  return h.value();
}

uint64_t BatchFingerprint(const v1::IngestBatch& batch) {
  // TxnFingerprint uses the thread's buffer: the transactions' first, then the batch's own.
  std::vector<uint64_t> txns;
  txns.reserve(static_cast<size_t>(batch.txns_size()));
  for (const v1::Transaction& t : batch.txns()) txns.push_back(TxnFingerprint(t));
  std::vector<std::pair<std::string_view, std::string_view>> metadata;
  if (batch.has_header()) {
    for (const auto& [key, value] : batch.header().metadata()) metadata.emplace_back(key, value);
    std::sort(metadata.begin(), metadata.end());
  }
  ContentHash h;
  h.Byte(0xba);  // never the first byte of a transaction's encoding
  h.U64(txns.size());
  for (uint64_t f : txns) h.U64(f);
  HashTimestamp(batch.has_watermark(), batch.watermark(), h);
  h.Byte(batch.end_of_stream() ? 1 : 0);
  if (!batch.has_header()) {
    h.Byte(0);
    return h.value();
  }
  const v1::Header& header = batch.header();
  h.Byte(1);
  h.U64(header.version());
  h.Bytes(header.time_unit());
  h.U64(metadata.size());
  for (const auto& [key, value] : metadata) {
    h.Bytes(key);
    h.Bytes(value);
  }
  const v1::InitialState& initial = header.initial();
  HashDatum(initial.default_value(), h);
  h.U64(static_cast<uint64_t>(initial.registers_size()));
  for (const v1::InitialState::Register& r : initial.registers()) {
    HashDatum(r.key(), h);
    HashDatum(r.value(), h);
    h.Byte(r.installed() ? 1 : 0);
  }
  h.U64(static_cast<uint64_t>(initial.lists_size()));
  for (const v1::InitialState::List& l : initial.lists()) {
    HashDatum(l.key(), h);
    h.U64(static_cast<uint64_t>(l.elements_size()));
    for (const v1::Datum& e : l.elements()) HashDatum(e, h);
  }
  h.U64(static_cast<uint64_t>(initial.tombstones_size()));
  for (const v1::KeyValue& kv : initial.tombstones()) {
    HashDatum(kv.key(), h);
    HashDatum(kv.value(), h);
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
