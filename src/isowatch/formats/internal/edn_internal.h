// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the EDN reader and its tests: the reader with a chosen chunk size.

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats::internal {

// ReadEdnString, reading the data `chunk_size` bytes at a time (small sizes put chunk boundaries
// inside tokens); with `usual_maps` false every form goes through the general parser (the
// reader's ReadUsualEdnOp is not used), which tests compare with.
absl::StatusOr<history::History> ReadEdnStringChunked(std::string_view data,
                                                      const ReadOptions& options,
                                                      std::string_view source, size_t chunk_size,
                                                      bool usual_maps = true);

}  // namespace isowatch::formats::internal
