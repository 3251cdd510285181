// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the ViperBench reader as a directory: the input is split at its NUL bytes into
// the files J0.log, J1.log, ... An input whose first byte is '!' is read leniently (without it).
//
// Besides "no crash", it checks that a history the reader accepts is one the writer can write,
// and that what the writer writes reads back to a history it writes identically.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/viper.h"

namespace {

using isowatch::formats::ReadOptions;
using isowatch::formats::ViperFiles;
using isowatch::history::History;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  ReadOptions options;
  if (input.starts_with('!')) {
    options.lenient = true;
    input.remove_prefix(1);
  }
  ViperFiles files;
  while (true) {
    const size_t nul = input.find('\0');
    files.emplace_back("J" + std::to_string(files.size()) + ".log",
                       std::string(input.substr(0, nul)));
    if (nul == std::string_view::npos) break;
    input.remove_prefix(nul + 1);
  }
  absl::StatusOr<History> h = isowatch::formats::ReadViperFiles(files, options, "fuzz");
  if (!h.ok()) return 0;
  absl::StatusOr<ViperFiles> written = isowatch::formats::EncodeViper(*h);
  if (!written.ok()) std::abort();
  absl::StatusOr<History> again = isowatch::formats::ReadViperFiles(*written, {}, "fuzz");
  if (!again.ok()) std::abort();
  absl::StatusOr<ViperFiles> rewritten = isowatch::formats::EncodeViper(*again);
  if (!rewritten.ok() || *rewritten != *written) std::abort();
  return 0;
}
