// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the canal-json decoder (collectors/tidb/canal_json.h). The input is
// a sequence of messages separated by newlines, as a storage-sink file holds them; every
// decoded event goes through one TxnGrouper of two streams (alternating). Nothing may crash;
// a decoded row must carry a commit ts, and a released transaction must lie below the
// grouper's release point.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <variant>

#include "collectors/tidb/canal_json.h"
#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/txn_grouper.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  isowatch::tidb::TxnGrouper grouper(2);
  size_t stream = 0;
  while (!input.empty()) {
    const size_t end = input.find('\n');
    const std::string_view message = input.substr(0, end);
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
    auto events = isowatch::tidb::DecodeCanalJson(message);
    if (!events.ok()) continue;
    for (isowatch::tidb::CdcEvent& event : *events) {
      if (const auto* row = std::get_if<isowatch::tidb::RowChange>(&event)) {
        if (row->commit_ts == 0 || row->columns.empty()) std::abort();
      }
      (void)grouper.Add(stream, std::move(event));
      stream ^= 1;
    }
    for (const isowatch::tidb::CdcTxn& txn : grouper.Release()) {
      if (txn.commit_ts >= grouper.release_point()) std::abort();
    }
  }
  return 0;
}
