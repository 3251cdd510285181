// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the elle-cli JSON reader and its sniffer. Besides "no crash", it checks that a
// history it accepts and the EDN writer can express reads back from EDN to the same
// transactions.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/edn.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  isowatch::formats::ReadOptions options;
  options.lenient = size % 2 == 1;
  (void)isowatch::formats::SniffElleJson(input.substr(0, 4096));
  absl::StatusOr<isowatch::history::History> h =
      isowatch::formats::ReadElleJsonString(input, options, "fuzz.json");
  if (!h.ok()) return 0;
  std::ostringstream out;
  if (!isowatch::formats::WriteEdn(*h, out).ok()) return 0;
  absl::StatusOr<isowatch::history::History> again =
      isowatch::formats::ReadEdnString(out.str(), {}, "fuzz.edn");
  if (!again.ok() || again->size() != h->size()) std::abort();
  return 0;
}
