// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the text r/w reader. The first byte picks the dialect and whether the read is
// lenient. Besides "no crash", a history the reader accepts and the writer can express must
// survive a round trip: read(write(h)) is h, and writing it again gives the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/text.h"

#include "tests/testing/canonical_history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr const char* kDialects[] = {"", "polysi", "mtc", "plume", "isovista"};
  isowatch::formats::ReadOptions options;
  options.dialect = kDialects[data[0] % 5];
  options.lenient = (data[0] & 0x10) != 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<isowatch::history::History> h =
      isowatch::formats::ReadTextString(text, options, "fuzz.txt");
  (void)isowatch::formats::SniffText(text.substr(0, 4096));
  if (!h.ok()) return 0;
  std::ostringstream out;
  if (!isowatch::formats::WriteText(*h, out).ok()) return 0;
  isowatch::formats::ReadOptions plain;
  plain.initial_value = options.initial_value;
  absl::StatusOr<isowatch::history::History> again =
      isowatch::formats::ReadTextString(out.str(), plain, "fuzz.txt");
  if (!again.ok()) std::abort();
  if (isowatch::testing::CanonicalHistory(*again) != isowatch::testing::CanonicalHistory(*h)) {
    std::abort();
  }
  std::ostringstream second;
  if (!isowatch::formats::WriteText(*again, second).ok() || second.str() != out.str()) std::abort();
  return 0;
}
