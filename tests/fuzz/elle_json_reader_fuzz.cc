// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the elle-cli JSON reader and its sniffer. Besides "no crash", it checks that the
// reader gives the same answer from a file mapped into memory as from the bytes, and that a
// history it accepts reads back from what the EDN writer and the elle-cli JSON writer make of it
// (the latter to the very same text when written again).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>

#include "absl/status/statusor.h"
#include <fmt/format.h>

#include "isowatch/formats/edn.h"
#include "isowatch/formats/internal/elle_json_internal.h"

namespace {

using isowatch::formats::ReadOptions;
using isowatch::history::History;

// A file of this process's own, rewritten for each input and removed at exit.
const std::string& FilePath() {
  struct File {
    std::string path =
        fmt::format("{}/isowatch_elle_fuzz_{}.json",
                    getenv("TMPDIR") != nullptr ? getenv("TMPDIR") : "/tmp", getpid());
    ~File() { std::remove(path.c_str()); }
  };
  static const File kFile;
  return kFile.path;
}

// The history as the EDN writer writes it (or why it cannot), or the error.
std::string Outcome(const absl::StatusOr<History>& h, const std::string& path) {
  if (!h.ok()) {
    std::string error = h.status().ToString();
    for (size_t at = error.find(path); at != std::string::npos; at = error.find(path, at)) {
      error.replace(at, path.size(), "fuzz.json");
    }
    return error;
  }
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
  const std::string& path = FilePath();
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(input.data(), static_cast<std::streamsize>(input.size()));
    if (!file) std::abort();
  }
  const absl::StatusOr<History> mapped = isowatch::formats::internal::ReadElleJsonFileMapped(
      path, options, isowatch::formats::internal::FileMapping::kAlways);
  if (Outcome(mapped, path) != Outcome(h, path)) std::abort();

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
