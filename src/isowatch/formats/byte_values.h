// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/statusor.h"

#include "isowatch/history/history.h"

namespace isowatch::formats {

// `h` with every integer value (register values and list elements, read, written or initial)
// written as the byte string "v<integer>" instead; keys, transactions and their order are
// unchanged, and so is every verdict (the mapping is one to one). For checking stores whose
// values are text, and the memory of byte-string values (`isowatch gen --values bytes`).
absl::StatusOr<history::History> WithByteValues(const history::History& h);

}  // namespace isowatch::formats
