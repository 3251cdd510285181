// SPDX-License-Identifier: Apache-2.0
#include "tests/testing/strip_timestamps.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "isowatch/history/history_builder.h"

namespace isowatch::testing {

namespace {

// `v` of history `h` interned in `b`.
history::Value Copy(const history::History& h, history::Value v, history::HistoryBuilder& b) {
  return v.is_bytes() ? b.BytesValue(h.bytes(v.bytes_index())) : v;
}

KeyId CopyKey(const history::History& h, KeyId k, history::HistoryBuilder& b) {
  const history::KeyInfo& info = h.key(k);
  return info.is_int ? b.IntKey(info.payload)
                     : b.BytesKey(h.bytes(static_cast<uint32_t>(info.payload)));
}

}  // namespace

history::History StripTimestamps(const history::History& h) {
  history::HistoryBuilder b;
  b.set_source(h.source());
  b.SetDefaultInitialValue(Copy(h, h.initial().default_value, b));
  for (const auto& [key, value] : h.initial().registers) {
    b.SetInitialRegister(CopyKey(h, key, b), Copy(h, value, b));
  }
  for (const auto& [key, range] : h.initial().lists) {
    std::vector<history::Value> elements;
    for (history::Value v : h.InitialList(key)) elements.push_back(Copy(h, v, b));
    b.SetInitialList(CopyKey(h, key, b), elements);
  }
  for (uint32_t i = 0; i < h.size(); ++i) {
    const history::Transaction& t = h.txn(TxnId(i));
    history::TxnHeader header{.id = h.txn_name(TxnId(i)),
                              .id_numeric = t.ext_id_numeric,
                              .session = h.session_name(t.session),
                              .session_numeric = h.session_numeric(t.session),
                              .seq = t.seq,
                              .status = t.status};
    if (t.has_real_time)
      header.real_time = {{.invoke = t.invoke_time, .complete = t.complete_time}};
    if (!b.BeginTxn(header).ok()) std::abort();
    for (const history::Op& op : h.ops(TxnId(i))) {
      const KeyId k = CopyKey(h, op.key(), b);
      if (op.unknown()) {
        b.UnknownRead(k);
        continue;
      }
      switch (op.kind()) {
        case history::OpKind::kRead:
          b.Read(k, Copy(h, op.value(), b));
          break;
        case history::OpKind::kWrite:
          b.Write(k, Copy(h, op.value(), b));
          break;
        case history::OpKind::kAppend:
          b.Append(k, Copy(h, op.value(), b));
          break;
        case history::OpKind::kListRead: {
          std::vector<history::Value> elements;
          for (history::Value v : h.list_elements(op)) elements.push_back(Copy(h, v, b));
          b.ListRead(k, elements);
          break;
        }
      }
    }
    b.EndTxn();
  }
  auto out = std::move(b).Finish();
  if (!out.ok()) std::abort();
  return *std::move(out);
}

}  // namespace isowatch::testing
