// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"

namespace isowatch::cli {

// The read options of the commands that read a history file (check, replay) from their flags:
// --initial-value (null or an integer) and --initial-txn. Errors (InvalidArgument) name the flag.
absl::StatusOr<formats::ReadOptions> ParseReadFlags(std::string_view initial_value,
                                                    const std::string& initial_txn);

}  // namespace isowatch::cli
