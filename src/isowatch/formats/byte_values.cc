// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/byte_values.h"

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/native.h"
#include "isowatch/formats/proto_decoder.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history.pb.h"

namespace isowatch::formats {
namespace {

void ToBytes(v1::Datum* d) {
  if (d->kind_case() == v1::Datum::kInt) d->set_bytes(fmt::format("v{}", d->int_()));
}

}  // namespace

absl::StatusOr<history::History> WithByteValues(const history::History& h) {
  // Through the isowatch.v1 encoding, which carries everything a history holds.
  v1::Header header;
  RETURN_IF_ERROR(EncodeHeader(h, &header));
  v1::InitialState* initial = header.mutable_initial();
  if (initial->has_default_value()) ToBytes(initial->mutable_default_value());
  for (v1::InitialState::Register& r : *initial->mutable_registers()) ToBytes(r.mutable_value());
  for (v1::InitialState::List& l : *initial->mutable_lists()) {
    for (v1::Datum& e : *l.mutable_elements()) ToBytes(&e);
  }
  history::HistoryBuilder builder;
  builder.set_source(h.source());
  ProtoDecoder decoder(builder);
  RETURN_IF_ERROR(decoder.ApplyInitialState(*initial));
  v1::Transaction t;
  for (uint64_t i = 0; i < h.size(); ++i) {
    t.Clear();
    RETURN_IF_ERROR(EncodeTxn(h, TxnId(i), &t));
    for (v1::Operation& op : *t.mutable_ops()) {
      if (op.has_value()) ToBytes(op.mutable_value());
      if (op.has_list()) {
        for (v1::Datum& e : *op.mutable_list()->mutable_elements()) ToBytes(&e);
      }
    }
    RETURN_IF_ERROR(decoder.ApplyTxn(t, h.txn(TxnId(i)).source_offset).status());
  }
  return std::move(builder).Finish();
}

}  // namespace isowatch::formats
