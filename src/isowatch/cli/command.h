// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace isowatch::cli {

// Exit statuses of the isowatch command.
inline constexpr int kExitValid = 0;       // checked, no violation (or the command succeeded)
inline constexpr int kExitViolations = 1;  // checked, violations found
inline constexpr int kExitBadInput = 2;    // bad input or usage

}  // namespace isowatch::cli
