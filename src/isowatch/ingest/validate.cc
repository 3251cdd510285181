// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/validate.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include <fmt/format.h>

#include "isowatch/history/snapshot.h"
#include "isowatch/ingest/txn_fingerprint.h"

namespace isowatch::ingest {
namespace {

// The longest prefix of `s` of at most `max` bytes that does not end inside a UTF-8 sequence
// (proto3 strings must be valid UTF-8, and `s` is).
std::string_view CutUtf8(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return s.substr(0, n);
}

std::optional<Problem> Fail(v1::RefusalReason reason, std::string detail) {
  return Problem{reason, std::move(detail)};
}

bool HasValue(const v1::Datum& d) { return d.kind_case() != v1::Datum::KIND_NOT_SET; }

// A byte string that is equal for two Datums exactly when they are equal.
std::string DatumKey(const v1::Datum& d) {
  if (d.kind_case() == v1::Datum::kInt) return fmt::format("i{}", d.int_());
  return "b" + d.bytes();
}

std::optional<Problem> CheckOperation(const v1::Operation& op, int index) {
  if (op.kind() == v1::Operation::KIND_UNSPECIFIED) {
    return Fail(v1::UNKNOWN_OPERATION_KIND,
                fmt::format("ops[{}]: an operation without a kind (expected READ, WRITE, APPEND "
                            "or LIST_READ)",
                            index));
  }
  if (!v1::Operation::Kind_IsValid(op.kind())) {
    return Fail(v1::UNKNOWN_OPERATION_KIND,
                fmt::format("ops[{}]: unknown operation kind {} (expected READ, WRITE, APPEND "
                            "or LIST_READ)",
                            index, static_cast<int>(op.kind())));
  }
  if (!HasValue(op.key())) {
    return Fail(v1::MISSING_KEY,
                fmt::format("ops[{}]: the operation has no key (expected int or bytes)", index));
  }
  const bool has_value = HasValue(op.value());
  const int elements = op.list().elements_size();
  switch (op.kind()) {
    case v1::Operation::READ:
      if (elements > 0) {
        return Fail(
            v1::MALFORMED_LIST,
            fmt::format("ops[{}]: a READ with a list (a list is read by LIST_READ)", index));
      }
      if (op.unknown() && has_value) {
        return Fail(v1::MALFORMED_TRANSACTION,
                    fmt::format("ops[{}]: an unknown READ with a value", index));
      }
      return std::nullopt;
    case v1::Operation::WRITE:
    case v1::Operation::APPEND: {
      const char* kind = op.kind() == v1::Operation::WRITE ? "WRITE" : "APPEND";
      if (!has_value) {
        return Fail(
            v1::MISSING_VALUE,
            fmt::format("ops[{}]: a {} without a value (expected int or bytes)", index, kind));
      }
      if (elements > 0) {
        return Fail(v1::MALFORMED_LIST, fmt::format("ops[{}]: a {} with a list", index, kind));
      }
      if (op.unknown()) {
        return Fail(v1::MALFORMED_TRANSACTION,
                    fmt::format("ops[{}]: an unknown {} (only reads can be unknown)", index, kind));
      }
      return std::nullopt;
    }
    case v1::Operation::LIST_READ:
      if (has_value) {
        return Fail(
            v1::MALFORMED_LIST,
            fmt::format("ops[{}]: a LIST_READ with a value (its result is in list)", index));
      }
      if (op.unknown() && elements > 0) {
        return Fail(v1::MALFORMED_LIST,
                    fmt::format("ops[{}]: an unknown LIST_READ with elements", index));
      }
      for (int e = 0; e < elements; ++e) {
        if (!HasValue(op.list().elements(e))) {
          return Fail(v1::MALFORMED_LIST,
                      fmt::format("ops[{}]: list.elements[{}] has no value (expected int or "
                                  "bytes)",
                                  index, e));
        }
      }
      return std::nullopt;
    default:
      break;
  }
  return Fail(v1::UNKNOWN_OPERATION_KIND, fmt::format("ops[{}]: unknown operation kind {}", index,
                                                      static_cast<int>(op.kind())));
}

std::string TimestampText(const v1::Timestamp& ts) {
  if (ts.logical() == 0) return fmt::format("{}", ts.physical());
  return fmt::format("({},{})", ts.physical(), ts.logical());
}

bool After(const v1::Timestamp& a, const v1::Timestamp& b) {
  if (a.physical() != b.physical()) return a.physical() > b.physical();
  return a.logical() > b.logical();
}

}  // namespace

std::string_view RefusalReasonName(v1::RefusalReason reason) {
  switch (reason) {
    case v1::REFUSAL_REASON_UNSPECIFIED:
      return "unspecified";
    case v1::MISSING_ID:
      return "missing_id";
    case v1::MISSING_COMMIT_TIMESTAMP:
      return "missing_commit_timestamp";
    case v1::START_AFTER_COMMIT:
      return "start_after_commit";
    case v1::UNKNOWN_OPERATION_KIND:
      return "unknown_operation_kind";
    case v1::MISSING_KEY:
      return "missing_key";
    case v1::MISSING_VALUE:
      return "missing_value";
    case v1::MALFORMED_LIST:
      return "malformed_list";
    case v1::ID_REUSED:
      return "id_reused";
    case v1::BATCH_TOO_LARGE:
      return "batch_too_large";
    case v1::TOO_MANY_OPERATIONS:
      return "too_many_operations";
    case v1::SEQUENCE_GAP:
      return "sequence_gap";
    case v1::UNKNOWN_STATUS:
      return "unknown_status";
    case v1::MALFORMED_TRANSACTION:
      return "malformed_transaction";
    case v1::INVALID_HEADER:
      return "invalid_header";
    case v1::STREAM_CLOSED:
      return "stream_closed";
    case v1::STREAM_MISMATCH:
      return "stream_mismatch";
    case v1::MALFORMED_SNAPSHOT:
      return "malformed_snapshot";
    case v1::KEY_KIND_CONFLICT:
      return "key_kind_conflict";
    case v1::SESSION_SEQ_CONFLICT:
      return "session_seq_conflict";
    case v1::ID_ON_OTHER_STREAM:
      return "id_on_other_stream";
    default:
      break;
  }
  return "unknown";
}

std::optional<Problem> CheckTransaction(const v1::Transaction& txn, std::string_view stream,
                                        const ValidationLimits& limits) {
  switch (txn.id_case()) {
    case v1::Transaction::kIdInt:
      break;
    case v1::Transaction::kIdStr:
      if (txn.id_str().empty()) return Fail(v1::MISSING_ID, "a transaction with an empty id");
      if (txn.id_str().size() > kMaxTxnIdBytes) {
        return Fail(v1::MALFORMED_TRANSACTION,
                    fmt::format("an id of {} bytes, over the limit of {}", txn.id_str().size(),
                                kMaxTxnIdBytes));
      }
      break;
    case v1::Transaction::ID_NOT_SET:
      return Fail(v1::MISSING_ID, "a transaction without an id (expected id_int or id_str)");
  }
  if (!txn.stream().empty() && txn.stream() != stream) {
    return Fail(v1::STREAM_MISMATCH,
                fmt::format("the transaction names stream \"{}\", its batch \"{}\"",
                            CutUtf8(txn.stream(), kMaxStreamNameBytes), stream));
  }
  if (!v1::Transaction::Status_IsValid(txn.status())) {
    return Fail(v1::UNKNOWN_STATUS,
                fmt::format("unknown status {} (expected COMMITTED, ABORTED or UNKNOWN)",
                            static_cast<int>(txn.status())));
  }
  if (txn.has_seq() && (txn.seq() < 0 || txn.seq() > kMaxSessionSeq)) {
    return Fail(v1::MALFORMED_TRANSACTION,
                fmt::format("session position {} out of range (expected 0 to {})", txn.seq(),
                            kMaxSessionSeq));
  }
  const bool committed = txn.status() == v1::Transaction::COMMITTED ||
                         txn.status() == v1::Transaction::STATUS_UNSPECIFIED;
  if (committed && !txn.has_commit()) {
    return Fail(v1::MISSING_COMMIT_TIMESTAMP, "a committed transaction without a commit timestamp");
  }
  if (txn.has_start() && txn.has_commit() && After(txn.start(), txn.commit())) {
    return Fail(v1::START_AFTER_COMMIT,
                fmt::format("starts at {} after it commits at {}", TimestampText(txn.start()),
                            TimestampText(txn.commit())));
  }
  if (txn.has_snapshot()) {
    if (txn.has_start()) {
      return Fail(v1::MALFORMED_SNAPSHOT,
                  "both a snapshot and a start timestamp (a snapshot replaces the start)");
    }
    const auto& xip = txn.snapshot().xip();
    if (std::optional<std::string> defect = history::SnapshotDefect(
            txn.snapshot().xmin(), txn.snapshot().xmax(),
            std::span<const uint64_t>(xip.data(), static_cast<size_t>(xip.size())))) {
      return Fail(v1::MALFORMED_SNAPSHOT, *std::move(defect));
    }
  }
  if (static_cast<uint64_t>(txn.ops_size()) > limits.max_ops_per_txn) {
    return Fail(v1::TOO_MANY_OPERATIONS, fmt::format("{} operations, over the limit of {}",
                                                     txn.ops_size(), limits.max_ops_per_txn));
  }
  for (int i = 0; i < txn.ops_size(); ++i) {
    if (std::optional<Problem> p = CheckOperation(txn.ops(i), i)) return p;
  }
  return std::nullopt;
}

std::optional<Problem> CheckHeader(const v1::Header& header) {
  if (header.version() > 1) {
    return Fail(v1::INVALID_HEADER,
                fmt::format("unsupported header version {} (expected 1)", header.version()));
  }
  const v1::InitialState& initial = header.initial();
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < initial.registers_size(); ++i) {
    const v1::Datum& key = initial.registers(i).key();
    if (!HasValue(key)) {
      return Fail(v1::INVALID_HEADER, fmt::format("initial.registers[{}] has no key", i));
    }
    if (!seen.insert(DatumKey(key)).second) {
      return Fail(v1::INVALID_HEADER,
                  fmt::format("initial.registers[{}] repeats the key of an earlier register", i));
    }
  }
  seen.clear();
  for (int i = 0; i < initial.lists_size(); ++i) {
    const v1::InitialState::List& list = initial.lists(i);
    if (!HasValue(list.key())) {
      return Fail(v1::INVALID_HEADER, fmt::format("initial.lists[{}] has no key", i));
    }
    if (!seen.insert(DatumKey(list.key())).second) {
      return Fail(v1::INVALID_HEADER,
                  fmt::format("initial.lists[{}] repeats the key of an earlier list", i));
    }
    for (int e = 0; e < list.elements_size(); ++e) {
      if (!HasValue(list.elements(e))) {
        return Fail(v1::INVALID_HEADER,
                    fmt::format("initial.lists[{}].elements[{}] has no value", i, e));
      }
    }
  }
  return std::nullopt;
}

absl::Status CheckStreamName(std::string_view stream) {
  if (stream.empty()) return absl::InvalidArgumentError("a batch without a stream name");
  if (stream.size() > kMaxStreamNameBytes) {
    return absl::InvalidArgumentError(fmt::format("a stream name of {} bytes, over the limit of {}",
                                                  stream.size(), kMaxStreamNameBytes));
  }
  for (char c : stream) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError("a stream name with a control character");
    }
  }
  return absl::OkStatus();
}

v1::Refusal MakeRefusal(uint64_t seq, uint32_t index, std::string_view txn_id,
                        v1::RefusalReason reason, std::string_view detail) {
  v1::Refusal r;
  r.set_seq(seq);
  r.set_index(index);
  r.set_txn_id(std::string(CutUtf8(txn_id, kMaxTxnIdBytes)));
  r.set_reason(reason);
  r.set_detail(std::string(CutUtf8(detail, kMaxRefusalDetailBytes)));
  return r;
}

v1::Refusal MakeBatchRefusal(uint64_t seq, v1::RefusalReason reason, std::string_view detail) {
  v1::Refusal r = MakeRefusal(seq, 0, "", reason, detail);
  r.set_whole_batch(true);
  return r;
}

std::vector<v1::Refusal> MergeRefusals(std::span<const v1::Refusal> first,
                                       std::span<const v1::Refusal> second) {
  std::vector<v1::Refusal> all(first.begin(), first.end());
  all.insert(all.end(), second.begin(), second.end());
  std::stable_sort(all.begin(), all.end(), [](const v1::Refusal& a, const v1::Refusal& b) {
    return a.index() < b.index();
  });
  return all;
}

BatchValidation ValidateBatch(const v1::IngestBatch& batch, const ValidationLimits& limits,
                              IdRegistry& registry, std::optional<uint64_t> serialized_bytes) {
  BatchValidation out;
  const uint64_t seq = batch.seq();
  auto refuse_whole = [&](v1::RefusalReason reason, std::string_view detail) {
    out.refusals.push_back(MakeBatchRefusal(seq, reason, detail));
    out.whole_batch_refused = true;
    return out;
  };
  if (static_cast<uint64_t>(batch.txns_size()) > limits.max_batch_txns) {
    return refuse_whole(v1::BATCH_TOO_LARGE, fmt::format("{} transactions, over the limit of {}",
                                                         batch.txns_size(), limits.max_batch_txns));
  }
  if (const uint64_t bytes = serialized_bytes ? *serialized_bytes : batch.ByteSizeLong();
      bytes > limits.max_batch_bytes) {
    return refuse_whole(v1::BATCH_TOO_LARGE, fmt::format("{} bytes, over the limit of {}", bytes,
                                                         limits.max_batch_bytes));
  }
  if (batch.has_header()) {
    if (std::optional<Problem> p = CheckHeader(batch.header())) {
      return refuse_whole(p->reason, p->detail);
    }
  }
  out.accepted.reserve(static_cast<size_t>(batch.txns_size()));
  out.fingerprints.reserve(static_cast<size_t>(batch.txns_size()));
  // Never reallocated: `in_batch` points into its strings.
  out.ids.reserve(static_cast<size_t>(batch.txns_size()));
  // The ids accepted so far in this batch, with their fingerprints.
  absl::flat_hash_map<absl::string_view, uint64_t> in_batch;
  in_batch.reserve(static_cast<size_t>(batch.txns_size()));
  for (int i = 0; i < batch.txns_size(); ++i) {
    const v1::Transaction& txn = batch.txns(i);
    const auto index = static_cast<uint32_t>(i);
    std::string id = TxnIdString(txn);
    if (std::optional<Problem> p = CheckTransaction(txn, batch.stream(), limits)) {
      out.refusals.push_back(MakeRefusal(seq, index, id, p->reason, p->detail));
      continue;
    }
    const uint64_t fingerprint = TxnFingerprint(txn);
    if (auto it = in_batch.find(absl::string_view(id.data(), id.size())); it != in_batch.end()) {
      if (it->second == fingerprint) {
        ++out.duplicates;
      } else {
        out.refusals.push_back(
            MakeRefusal(seq, index, id, v1::ID_REUSED,
                        "the id is used earlier in this batch with other content"));
      }
      continue;
    }
    switch (registry.Check(batch.stream(), id, fingerprint)) {
      case IdRegistry::Outcome::kNew:
        out.accepted.push_back(index);
        out.fingerprints.push_back(fingerprint);
        out.ids.push_back(std::move(id));
        in_batch.emplace(absl::string_view(out.ids.back().data(), out.ids.back().size()),
                         fingerprint);
        break;
      case IdRegistry::Outcome::kDuplicate:
        ++out.duplicates;
        break;
      case IdRegistry::Outcome::kConflict:
        out.refusals.push_back(MakeRefusal(seq, index, id, v1::ID_REUSED,
                                           "the id was accepted earlier on this stream with "
                                           "other content"));
        break;
    }
  }
  return out;
}

}  // namespace isowatch::ingest
