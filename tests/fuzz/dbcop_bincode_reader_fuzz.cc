// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the dbcop bincode reader (strict and lenient). Besides "no crash", a history it
// accepts strictly and the writer can express is written with the header the reader saw: the
// bytes must read back to the same history, and a file without ineffective events or empty
// transactions must come back byte for byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/dbcop.h"

#include "tests/testing/canonical_history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using isowatch::formats::DbcopHeader;
  using isowatch::formats::ReadOptions;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  (void)isowatch::formats::SniffDbcopBincode(input.substr(0, 4096));
  ReadOptions lenient;
  lenient.lenient = true;
  (void)isowatch::formats::ReadDbcopBincodeString(input, lenient, "fuzz.bincode");
  DbcopHeader header;
  absl::StatusOr<isowatch::history::History> h =
      isowatch::formats::ReadDbcopBincodeString(input, ReadOptions{}, "fuzz.bincode", &header);
  if (!h.ok()) return 0;
  std::ostringstream out;
  if (!isowatch::formats::WriteDbcopBincode(*h, out, &header).ok()) return 0;
  absl::StatusOr<isowatch::history::History> again =
      isowatch::formats::ReadDbcopBincodeString(out.str(), ReadOptions{}, "fuzz.bincode");
  if (!again.ok()) std::abort();
  if (isowatch::testing::CanonicalHistory(*again) != isowatch::testing::CanonicalHistory(*h)) {
    std::abort();
  }
  bool lossless = true;
  for (const auto& note : h->info().notes) {
    lossless = lossless && note.kind.find("ineffective") == std::string::npos;
  }
  if (lossless && out.str() != input) std::abort();
  return 0;
}
