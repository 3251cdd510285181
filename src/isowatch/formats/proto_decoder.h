// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history.pb.h"

namespace isowatch::formats {

// Turns isowatch.v1 messages (docs/history-format.md) into a history: a Header's initial state
// and each Transaction with its operations. Shared by the native file reader and the daemon's
// ingestion, so both accept exactly the same transactions.
//
// Errors are InvalidArgument with a message that names the transaction and the operation; a
// transaction that fails leaves nothing in the builder. Thread-compatible.
class ProtoDecoder {
 public:
  // REQUIRES: `builder` outlives the decoder.
  explicit ProtoDecoder(history::HistoryBuilder& builder) : builder_(builder) {}

  // Applies the initial state of `header` (its version is the caller's business).
  absl::Status ApplyInitialState(const v1::InitialState& initial);

  // Adds `t` to the builder; in live mode (HistoryBuilder::StartLive) the transaction is complete
  // and readable when this returns. Live mode refuses range reads, and ApplyInitialState
  // tombstones: the ingest protocol has neither. `source_offset`: where it came from, for
  // counterexamples.
  absl::StatusOr<TxnId> ApplyTxn(const v1::Transaction& t, uint64_t source_offset);

 private:
  absl::StatusOr<KeyId> Key(const v1::Datum& d, std::string_view what);
  history::Value ValueOf(const v1::Datum& d);
  absl::Status Elements(const google::protobuf::RepeatedPtrField<v1::Datum>& list,
                        std::string_view what);
  absl::Status ApplyOp(const v1::Operation& op);
  absl::Status Pairs(const google::protobuf::RepeatedPtrField<v1::KeyValue>& pairs,
                     std::string_view what, std::vector<history::KeyValue>& out);
  absl::Status ApplyRangeRead(const v1::RangeRead& r);

  history::HistoryBuilder& builder_;
  std::string id_;
  std::string session_;
  std::vector<history::Value> elements_;
  std::vector<history::KeyValue> live_;
  std::vector<history::KeyValue> dead_;
};

}  // namespace isowatch::formats
