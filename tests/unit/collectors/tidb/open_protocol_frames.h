// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace isowatch::tidb::testing {

// `length` as 8 big-endian bytes.
inline std::string BigEndian64(uint64_t length) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, length >>= 8) out[i] = static_cast<char>(length & 0xff);
  return out;
}

// An open-protocol Kafka message key: version 1, then each event's key JSON with its length.
inline std::string OpenProtocolKey(const std::vector<std::string>& events) {
  std::string out = BigEndian64(1);
  for (const std::string& event : events) out += BigEndian64(event.size()) + event;
  return out;
}

// An open-protocol Kafka message value: each event's value JSON with its length.
inline std::string OpenProtocolValue(const std::vector<std::string>& events) {
  std::string out;
  for (const std::string& event : events) out += BigEndian64(event.size()) + event;
  return out;
}

}  // namespace isowatch::tidb::testing
