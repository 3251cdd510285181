// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace isowatch::cli {

// Exit statuses of the isowatch command.
inline constexpr int kExitValid = 0;       // checked, no violation (or the command succeeded)
inline constexpr int kExitViolations = 1;  // checked, violations found
inline constexpr int kExitBadInput = 2;    // bad input or usage
// Checked, no violation found, but some checker did not finish in time: neither valid nor
// invalid (`check --checker ... --time-limit-ms`).
inline constexpr int kExitUnknown = 3;
inline constexpr int kExitInternalError = 4;  // an exception escaped (a bug)

}  // namespace isowatch::cli
