// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/read_flags.h"

#include <charconv>
#include <cstdint>

#include <fmt/format.h>

namespace isowatch::cli {

absl::StatusOr<formats::ReadOptions> ParseReadFlags(std::string_view initial_value,
                                                    const std::string& initial_txn) {
  formats::ReadOptions options;
  if (initial_value != "null") {
    int64_t v = 0;
    auto [ptr, ec] =
        std::from_chars(initial_value.data(), initial_value.data() + initial_value.size(), v);
    if (ec != std::errc() || ptr != initial_value.data() + initial_value.size()) {
      return absl::InvalidArgumentError(
          fmt::format("--initial-value must be null or an integer, not {}", initial_value));
    }
    options.initial_value = v;
  }
  options.initial_txn_path = initial_txn;
  return options;
}

}  // namespace isowatch::cli
