// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/without_timestamps.h"

#include <utility>
#include <vector>

#include "isowatch/common/status_macros.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::history {
namespace {

// Copies keys and values of `h` into `b`, interning them there.
class Copier {
 public:
  Copier(const History& h, HistoryBuilder& b) : h_(h), b_(b) {}

  Value Of(Value v) const { return v.is_bytes() ? b_.BytesValue(h_.bytes(v.bytes_index())) : v; }

  KeyId Of(KeyId k) const {
    const KeyInfo& info = h_.key(k);
    return info.is_int ? b_.IntKey(info.payload)
                       : b_.BytesKey(h_.bytes(static_cast<uint32_t>(info.payload)));
  }

  KeyBound Of(KeyBound bound) const {
    return bound.unbounded ? bound : KeyBound::At(Of(bound.key));
  }

  std::vector<Value> Of(std::span<const Value> values) const {
    std::vector<Value> out;
    out.reserve(values.size());
    for (Value v : values) out.push_back(Of(v));
    return out;
  }

  std::vector<KeyValue> Of(std::span<const KeyValue> records) const {
    std::vector<KeyValue> out;
    out.reserve(records.size());
    for (const KeyValue& kv : records) out.push_back(KeyValue{Of(kv.key), Of(kv.value)});
    return out;
  }

 private:
  const History& h_;
  HistoryBuilder& b_;
};

}  // namespace

absl::StatusOr<History> WithoutTimestamps(const History& h) {
  HistoryBuilder b;
  const Copier copy(h, b);
  b.set_source(h.source());
  b.set_format(h.info().format, h.info().dialect);
  b.set_time_unit(h.info().time_unit);
  const InitialState& init = h.initial();
  b.SetDefaultInitialValue(copy.Of(init.default_value));
  for (const auto& [key, value] : init.registers) {
    if (init.versions.contains(key)) {
      b.SetInitialVersion(copy.Of(key), copy.Of(value));
    } else {
      b.SetInitialRegister(copy.Of(key), copy.Of(value));
    }
  }
  for (const auto& [key, range] : init.lists) {
    b.SetInitialList(copy.Of(key), copy.Of(h.InitialList(key)));
  }
  for (const KeyValue& kv : h.tombstones()) b.MarkTombstone(copy.Of(kv.key), copy.Of(kv.value));
  for (uint32_t i = 0; i < h.size(); ++i) {
    const TxnId id(i);
    const Transaction& t = h.txn(id);
    TxnHeader header{.id = h.txn_name(id),
                     .id_numeric = t.ext_id_numeric,
                     .session = h.session_name(t.session),
                     .session_numeric = h.session_numeric(t.session),
                     .seq = t.seq,
                     .status = t.status};
    if (t.has_real_time) {
      header.real_time = TxnHeader::RealTime{.invoke = t.invoke_time, .complete = t.complete_time};
    }
    RETURN_IF_ERROR(b.BeginTxn(header));
    const auto ops = h.ops(id);
    const auto ranges = h.range_reads(id);
    size_t next_range = 0;
    auto ranges_up_to = [&](size_t position) {
      for (; next_range < ranges.size() && ranges[next_range].position <= position; ++next_range) {
        const RangeRead& r = ranges[next_range];
        b.RangeRead(copy.Of(r.low), copy.Of(r.high), copy.Of(h.range_live(r)),
                    copy.Of(h.range_dead(r)));
      }
    };
    for (size_t n = 0; n < ops.size(); ++n) {
      ranges_up_to(n);
      const Op& op = ops[n];
      const KeyId k = copy.Of(op.key());
      if (op.unknown()) {
        b.UnknownRead(k);
        continue;
      }
      switch (op.kind()) {
        case OpKind::kRead:
          b.Read(k, copy.Of(op.value()));
          break;
        case OpKind::kWrite:
          b.Write(k, copy.Of(op.value()));
          break;
        case OpKind::kAppend:
          b.Append(k, copy.Of(op.value()));
          break;
        case OpKind::kListRead:
          b.ListRead(k, copy.Of(h.list_elements(op)));
          break;
      }
    }
    ranges_up_to(ops.size());
    b.EndTxn();
  }
  return std::move(b).Finish();
}

}  // namespace isowatch::history
