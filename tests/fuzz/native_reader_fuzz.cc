// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the native reader. The answer must be the one the generated parser
// gives when it reads every record (transactions of the usual shape are otherwise decoded
// without it). Whatever it accepts must also survive a round trip: written back in either
// encoding, it reads again into a history of the same shape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "isowatch/formats/internal/native_usual_txn.h"
#include "isowatch/formats/native.h"

namespace {

using isowatch::formats::NativeEncoding;

void RoundTrip(const isowatch::history::History& h, NativeEncoding encoding) {
  std::ostringstream out;
  if (!isowatch::formats::WriteNative(h, encoding, out).ok()) std::abort();
  const std::string written = out.str();
  auto back = isowatch::formats::ReadNativeString(written, {}, "round trip");
  if (!back.ok() || back->size() != h.size() || back->op_count() != h.op_count() ||
      back->data_model() != h.data_model()) {
    std::abort();
  }
  std::ostringstream again;
  if (!isowatch::formats::WriteNative(*back, encoding, again).ok() || again.str() != written) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto h = isowatch::formats::ReadNativeString(input, {}, "fuzz");
  auto generated =
      isowatch::formats::internal::ReadNativeStringWith(input, {}, "fuzz", /*usual_txns=*/false);
  if (h.ok() != generated.ok()) std::abort();
  if (!h.ok()) {
    if (h.status() != generated.status()) std::abort();
    return 0;
  }
  std::ostringstream ours;
  std::ostringstream theirs;
  if (!isowatch::formats::WriteNative(*h, NativeEncoding::kBinary, ours).ok() ||
      !isowatch::formats::WriteNative(*generated, NativeEncoding::kBinary, theirs).ok() ||
      ours.str() != theirs.str() || h->key_count() != generated->key_count() ||
      h->byte_count() != generated->byte_count()) {
    std::abort();
  }
  RoundTrip(*h, NativeEncoding::kBinary);
  RoundTrip(*h, NativeEncoding::kJsonLines);
  return 0;
}
