// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the open-protocol decoder (collectors/tidb/open_protocol.h). The
// input is one Kafka message: an unsigned 16-bit big-endian key length, the key, and the rest
// as the value (a short input is all key). Nothing may crash; a decoded row must carry a
// commit ts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/open_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.size() < 2) return 0;
  const size_t key_size = (static_cast<size_t>(data[0]) << 8) | data[1];
  const std::string_view rest = input.substr(2);
  const std::string_view key = rest.substr(0, key_size);
  const std::string_view value = rest.substr(key.size());
  auto events = isowatch::tidb::DecodeOpenProtocol(key, value);
  if (!events.ok()) return 0;
  for (const isowatch::tidb::CdcEvent& event : *events) {
    if (const auto* row = std::get_if<isowatch::tidb::RowChange>(&event)) {
      if (row->commit_ts == 0) std::abort();
    }
  }
  return 0;
}
