// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>

namespace isowatch::server {

// The resident set size of this process in bytes, read from /proc/self/statm; nullopt where
// /proc is not available. Thread-safe.
std::optional<uint64_t> ProcessResidentMemoryBytes();

}  // namespace isowatch::server
