// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the version spill's decoders (docs/spill-format.md): the first byte
// chooses a version's key, a version's value or an evicted key's record. Whatever decodes must
// encode back to the same bytes; nothing may crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "isowatch/engine/version_spill.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 3 == 0) {
    std::string_view name;
    isowatch::engine::internal::OrderKey at;
    if (isowatch::engine::spill_format::DecodeKey(bytes, &name, &at) &&
        isowatch::engine::spill_format::EncodeKey(name, at) != bytes) {
      std::abort();
    }
  } else if (data[0] % 3 == 1) {
    isowatch::engine::SpilledVersion v;
    if (isowatch::engine::spill_format::DecodeValue(bytes, &v) &&
        isowatch::engine::spill_format::EncodeValue(v) != bytes) {
      std::abort();
    }
  } else {
    isowatch::engine::SpilledKey record;
    if (isowatch::engine::spill_format::DecodeKeyRecord(bytes, &record) &&
        isowatch::engine::spill_format::EncodeKeyRecord(record) != bytes) {
      std::abort();
    }
  }
  return 0;
}
