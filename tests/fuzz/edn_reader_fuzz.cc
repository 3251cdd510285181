// SPDX-License-Identifier: Apache-2.0
// Feeds bytes to the EDN reader.
//
// Besides "no crash", it checks that the answer does not depend on the chunk size nor on whether
// usual operation maps are read by the general parser, and that a
// history it accepts and the writer can express survives EDN -> history -> EDN -> history with
// the same canonical text and the same written bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/edn.h"
#include "isowatch/formats/internal/edn_internal.h"

namespace {

using isowatch::formats::ReadOptions;
using isowatch::history::History;

std::string Outcome(const absl::StatusOr<History>& h) {
  if (!h.ok()) return h.status().ToString();
  std::ostringstream out;
  absl::Status s = isowatch::formats::WriteEdn(*h, out);
  return s.ok() ? out.str() : "refused: " + s.ToString() + std::to_string(h->size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  ReadOptions options;
  options.lenient = size % 2 == 1;
  if (size % 3 == 1) options.dialect = "list-append";
  absl::StatusOr<History> h = isowatch::formats::ReadEdnString(input, options, "fuzz.edn");
  (void)isowatch::formats::SniffEdn(input.substr(0, 4096));
  const std::string outcome = Outcome(h);
  const size_t chunk = 1 + size % 13;
  absl::StatusOr<History> chunked =
      isowatch::formats::internal::ReadEdnStringChunked(input, options, "fuzz.edn", chunk);
  if (Outcome(chunked) != outcome) std::abort();
  // Operation maps of the usual shape are read without the general parser: the answer must be
  // the one the general parser gives.
  absl::StatusOr<History> general = isowatch::formats::internal::ReadEdnStringChunked(
      input, options, "fuzz.edn", chunk, /*usual_maps=*/false);
  if (Outcome(general) != outcome) std::abort();
  if (!h.ok()) return 0;
  std::ostringstream out;
  if (!isowatch::formats::WriteEdn(*h, out).ok()) return 0;
  absl::StatusOr<History> again = isowatch::formats::ReadEdnString(out.str(), {}, "fuzz.edn");
  if (!again.ok()) std::abort();
  std::ostringstream out2;
  if (!isowatch::formats::WriteEdn(*again, out2).ok() || out2.str() != out.str()) std::abort();
  if (again->size() != h->size()) std::abort();
  for (size_t i = 0; i < h->size(); ++i) {
    const isowatch::TxnId id(static_cast<uint32_t>(i));
    const auto& a = h->txn(id);
    const auto& b = again->txn(id);
    if (a.status != b.status || a.has_real_time != b.has_real_time ||
        a.invoke_time != b.invoke_time || a.complete_time != b.complete_time ||
        a.has_start != b.has_start || !(a.start == b.start) || !(a.commit == b.commit) ||
        h->ops(id).size() != again->ops(id).size() || a.seq != b.seq) {
      std::abort();
    }
  }
  return 0;
}
