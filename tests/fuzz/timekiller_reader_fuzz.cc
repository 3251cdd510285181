// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the TimeKiller reader. The input is split at its first NUL byte: the part before
// is the history document, the part after (if any) the initial-transaction document.
//
// Besides "no crash", it checks that the reader's answer does not depend on the chunk size, on
// whether the parser for usual transactions is tried first, on whether the parsing is on a
// second thread, nor on whether the document is read from a file mapped into memory, and that a
// history it accepts survives a round trip through the writer unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/timekiller.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/scratch_file.h"

namespace {

using isowatch::formats::ReadOptions;
using isowatch::history::History;

std::string Written(const History& h) {
  std::ostringstream out;
  if (!isowatch::formats::WriteTimeKiller(h, out).ok()) std::abort();
  return out.str();
}

std::string Outcome(const absl::StatusOr<History>& h) {
  if (!h.ok()) return h.status().ToString();
  return Written(*h);
}

// What reading `history` from a mapped file gives, its errors named as the string's are.
std::string MappedOutcome(std::string_view history, const ReadOptions& options, size_t chunk) {
  static const isowatch::testing::ScratchFile kFile("isowatch-tk-fuzz");
  kFile.Write(history);
  return kFile.Renamed(
      Outcome(isowatch::formats::internal::ReadTimeKillerFileChunked(
          kFile.path(), options, chunk, isowatch::formats::internal::TxnParsers::kUsualFirst,
          isowatch::formats::internal::Pipelining::kAuto,
          isowatch::formats::internal::FileMapping::kAlways)),
      "fuzz.json");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view history = input;
  std::string_view initial;
  if (size_t nul = input.find('\0'); nul != std::string_view::npos) {
    history = input.substr(0, nul);
    initial = input.substr(nul + 1);
  }
  ReadOptions options;
  if (!history.empty() && history.back() == '\n') options.initial_value = 0;

  absl::StatusOr<History> h =
      isowatch::formats::ReadTimeKillerString(history, options, "fuzz.json", initial);
  // Small chunks put boundaries inside tokens, strings and escapes.
  const size_t chunk = 1 + size % 17;
  absl::StatusOr<History> chunked = isowatch::formats::internal::ReadTimeKillerStringChunked(
      history, options, "fuzz.json", initial, chunk);
  const std::string outcome = Outcome(h);
  if (Outcome(chunked) != outcome) std::abort();
  absl::StatusOr<History> general = isowatch::formats::internal::ReadTimeKillerStringChunked(
      history, options, "fuzz.json", initial, chunk,
      isowatch::formats::internal::TxnParsers::kGeneralOnly);
  if (Outcome(general) != outcome) std::abort();
  // The pipelined read accepts what the one-thread read accepts, and gives its errors.
  absl::StatusOr<History> pipelined = isowatch::formats::internal::ReadTimeKillerStringChunked(
      history, options, "fuzz.json", initial, chunk,
      isowatch::formats::internal::TxnParsers::kUsualFirst,
      isowatch::formats::internal::Pipelining::kAlways);
  if (Outcome(pipelined) != outcome) std::abort();
  // Without the read again: when it succeeds, it holds the list reads as the one-thread read.
  absl::StatusOr<History> no_retry = isowatch::formats::internal::ReadTimeKillerStringChunked(
      history, options, "fuzz.json", initial, chunk,
      isowatch::formats::internal::TxnParsers::kUsualFirst,
      isowatch::formats::internal::Pipelining::kNoRetry);
  if (no_retry.ok() && (!h.ok() || Outcome(no_retry) != outcome ||
                        isowatch::testing::CanonicalListStorage(*no_retry) !=
                            isowatch::testing::CanonicalListStorage(*h))) {
    std::abort();
  }
  // Read in place from a file: the same answer, positions included.
  if (initial.empty() && MappedOutcome(history, options, chunk) != outcome) std::abort();

  if (h.ok()) {
    absl::StatusOr<History> again =
        isowatch::formats::ReadTimeKillerString(outcome, options, "fuzz.json", initial);
    if (!again.ok() || Written(*again) != outcome) std::abort();
  }
  return 0;
}
