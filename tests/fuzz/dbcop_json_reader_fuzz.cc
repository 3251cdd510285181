// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the dbcop JSON reader. Besides "no crash", a history it accepts and the bincode
// writer can express must read back from that bincode as the same history.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/dbcop.h"

#include "tests/testing/canonical_history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using isowatch::formats::ReadOptions;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  (void)isowatch::formats::SniffDbcopJson(input.substr(0, 4096));
  absl::StatusOr<isowatch::history::History> h =
      isowatch::formats::ReadDbcopJsonString(input, ReadOptions{}, "fuzz.json");
  if (!h.ok()) return 0;
  std::ostringstream out;
  if (!isowatch::formats::WriteDbcopBincode(*h, out).ok()) return 0;
  absl::StatusOr<isowatch::history::History> again =
      isowatch::formats::ReadDbcopBincodeString(out.str(), ReadOptions{}, "fuzz.bincode");
  if (!again.ok()) std::abort();
  if (isowatch::testing::CanonicalHistory(*again) != isowatch::testing::CanonicalHistory(*h)) {
    std::abort();
  }
  return 0;
}
