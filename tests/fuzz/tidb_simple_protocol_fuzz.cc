// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the simple-protocol decoder (collectors/tidb/simple_protocol.h).
// The input is a sequence of messages separated by newlines, all through one decoder, so that
// the table schemas of BOOTSTRAP and DDL messages reach the rows after them. Nothing may
// crash; a decoded row must carry a commit ts and the key columns its table's schema gave.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/simple_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  isowatch::tidb::SimpleProtocolDecoder decoder;
  while (!input.empty()) {
    const size_t end = input.find('\n');
    const std::string_view message = input.substr(0, end);
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
    auto events = decoder.Decode(message);
    if (!events.ok()) continue;
    for (const isowatch::tidb::CdcEvent& event : *events) {
      const auto* row = std::get_if<isowatch::tidb::RowChange>(&event);
      if (row == nullptr) continue;
      if (row->commit_ts == 0 || row->columns.empty()) std::abort();
      const auto* keys = decoder.KeyColumns(row->schema, row->table);
      if (keys != nullptr ? *keys != row->key_columns : !row->key_columns.empty()) std::abort();
    }
  }
  return 0;
}
