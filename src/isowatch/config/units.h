// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace isowatch::config {

// Parses a duration: a decimal number with a unit, or a sequence of them ("5s", "250ms", "1.5h",
// "1m30s"); units ns, us, ms, s, m, h; "0" alone is zero. Negative and infinite durations, and
// durations over 100 years, are refused.
// Errors: InvalidArgument with `expected a duration such as "5s" or "250ms", got "<text>"`.
absl::StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text);

// Renders a whole number of milliseconds the way ParseDuration reads it: "5s", "250ms", "1m30s".
std::string FormatDuration(std::chrono::milliseconds duration);

// Parses a size in bytes: a non-negative integer, optionally followed (with or without a space)
// by a unit: B; kB, MB, GB, TB (powers of 1000); KiB, MiB, GiB, TiB (powers of 1024). Units are
// matched without regard to case.
// Errors: InvalidArgument with `expected a size such as "16MiB" or "65536", got "<text>"`, or
// when the size does not fit in 64 bits.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// Renders a size the way ParseByteSize reads it: in the largest binary unit that divides it
// ("16MiB"), else in bytes ("1000").
std::string FormatByteSize(uint64_t bytes);

}  // namespace isowatch::config
