// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace isowatch {

// Replaces the file at `path` with `contents` in one step: readers see the old file or the new
// one, never a part. Writes `path`.tmp (in the same directory), then renames it over `path`.
// With `sync`, the new file and then its directory are synced first and after, so that once this
// returns the new contents survive a crash of the machine. Errors name the file and the failing
// call; on error `path` is left as it was.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents, bool sync);

}  // namespace isowatch
