// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the Cobra log reader. The input is split into files at each "|T|" (log files
// carry NUL bytes everywhere, so NUL cannot separate them); file i is named T<i>.log. The first
// byte picks the dialect and leniency. Besides "no crash", a history the reader accepts is
// re-encoded with the reader's extras and must read back to the same history and encode to the
// same bytes again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include <fmt/format.h>

#include "isowatch/formats/cobra.h"

#include "tests/testing/canonical_history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using isowatch::formats::CobraExtras;
  using isowatch::formats::NamedFiles;
  if (size == 0) return 0;
  static constexpr const char* kDialects[] = {"", "plain", "time-order"};
  isowatch::formats::ReadOptions options;
  options.dialect = kDialects[data[0] % 3];
  options.lenient = (data[0] & 0x10) != 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  NamedFiles files;
  while (true) {
    const size_t sep = input.find("|T|");
    files.emplace_back(fmt::format("T{}.log", files.size()), std::string(input.substr(0, sep)));
    (void)isowatch::formats::SniffCobra(files.back().second.substr(0, 4096));
    if (sep == std::string_view::npos) break;
    input.remove_prefix(sep + 3);
  }
  CobraExtras extras;
  absl::StatusOr<isowatch::history::History> h =
      isowatch::formats::ReadCobraFiles(files, options, "fuzz", &extras);
  if (!h.ok()) return 0;
  absl::StatusOr<NamedFiles> encoded = isowatch::formats::EncodeCobra(*h, &extras);
  if (!encoded.ok()) return 0;  // e.g. unknown reads of deleted values
  isowatch::formats::ReadOptions again_options;
  again_options.dialect = extras.time_order ? "time-order" : "plain";
  CobraExtras again_extras;
  absl::StatusOr<isowatch::history::History> again =
      isowatch::formats::ReadCobraFiles(*encoded, again_options, "fuzz", &again_extras);
  if (!again.ok()) std::abort();
  if (isowatch::testing::CanonicalHistory(*again) != isowatch::testing::CanonicalHistory(*h)) {
    std::abort();
  }
  absl::StatusOr<NamedFiles> twice = isowatch::formats::EncodeCobra(*again, &again_extras);
  if (!twice.ok() || *twice != *encoded) std::abort();
  return 0;
}
