// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/windows/window_cutter.h"

namespace isowatch::windows {

// A sealed window to and from v1::SavedWindow, for a window kept across a restart until its
// checks are done: its history in the native binary format (docs/history-format.md), the rest
// field by field. Loading gives back a window every checker judges the same way.
//
// SaveWindow errors: what the native format cannot hold (InvalidArgument, formats::WriteNative).
absl::Status SaveWindow(const Window& w, v1::SavedWindow* out);
// LoadWindow errors: DataLoss naming what is malformed.
absl::StatusOr<Window> LoadWindow(const v1::SavedWindow& in);

}  // namespace isowatch::windows
