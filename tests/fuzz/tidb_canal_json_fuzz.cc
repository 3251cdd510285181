// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the canal-json decoder (collectors/tidb/canal_json.h). The input is
// a sequence of messages separated by newlines, as a storage-sink file holds them. Nothing may
// crash; a decoded row must carry a commit ts and a row.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "collectors/tidb/canal_json.h"
#include "collectors/tidb/cdc_event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  while (!input.empty()) {
    const size_t end = input.find('\n');
    const std::string_view message = input.substr(0, end);
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
    auto events = isowatch::tidb::DecodeCanalJson(message);
    if (!events.ok()) continue;
    for (const isowatch::tidb::CdcEvent& event : *events) {
      if (const auto* row = std::get_if<isowatch::tidb::RowChange>(&event)) {
        if (row->commit_ts == 0 || row->columns.empty()) std::abort();
      }
    }
  }
  return 0;
}
