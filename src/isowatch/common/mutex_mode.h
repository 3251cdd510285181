// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/synchronization/mutex.h"

namespace isowatch {

// In optimised builds (NDEBUG), turns off absl::Mutex deadlock detection. Debian's abseil is
// built with it on: every lock then records its acquisition in a process-wide graph, which costs
// the ingest path (a few locks per batch and per transaction) several percent of its CPU. Debug
// builds, the tests' included, keep it. Call once at the start of main, before any thread.
inline void SetReleaseMutexMode() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace isowatch
