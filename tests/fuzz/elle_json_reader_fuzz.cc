// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the elle-cli JSON reader and its sniffer. Besides "no crash", it checks that the
// reader gives the same answer from a file mapped into memory as from the bytes, and that a
// history it accepts reads back from what the EDN writer and the elle-cli JSON writer make of it
// (the latter to the very same text when written again).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/edn.h"
#include "isowatch/formats/internal/elle_json_internal.h"

#include "tests/testing/scratch_file.h"

namespace {

using isowatch::formats::ReadOptions;
using isowatch::history::History;

// The history as the EDN writer writes it (or why it cannot), or the error.
std::string Outcome(const absl::StatusOr<History>& h) {
  if (!h.ok()) return h.status().ToString();
  std::ostringstream out;
  const absl::Status s = isowatch::formats::WriteEdn(*h, out);
  return s.ok() ? out.str() : s.ToString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  ReadOptions options;
  options.lenient = size % 2 == 1;
  (void)isowatch::formats::SniffElleJson(input.substr(0, 4096));
  absl::StatusOr<History> h = isowatch::formats::ReadElleJsonString(input, options, "fuzz.json");

  // Read in place from a file: the same answer, positions included.
  static const isowatch::testing::ScratchFile kFile("isowatch-elle-fuzz");
  kFile.Write(input);
  const absl::StatusOr<History> mapped = isowatch::formats::internal::ReadElleJsonFileMapped(
      kFile.path(), options, isowatch::formats::internal::FileMapping::kAlways);
  if (kFile.Renamed(Outcome(mapped), "fuzz.json") != Outcome(h)) std::abort();

  if (!h.ok()) return 0;
  std::ostringstream out;
  if (isowatch::formats::WriteEdn(*h, out).ok()) {
    absl::StatusOr<History> again = isowatch::formats::ReadEdnString(out.str(), {}, "fuzz.edn");
    if (!again.ok() || again->size() != h->size()) std::abort();
  }
  std::ostringstream json;
  if (isowatch::formats::WriteElleJson(*h, json).ok()) {
    absl::StatusOr<History> again =
        isowatch::formats::ReadElleJsonString(json.str(), {}, "fuzz.json");
    if (!again.ok() || again->size() != h->size()) std::abort();
    std::ostringstream twice;
    if (!isowatch::formats::WriteElleJson(*again, twice).ok() || twice.str() != json.str()) {
      std::abort();
    }
  }
  return 0;
}
