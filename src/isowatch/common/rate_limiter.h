// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace isowatch {

// Bounds how often something is logged: lets at most `burst` events through in each window of
// `interval_ms`, and counts those it holds back, so that the next line let through can say how
// many were not logged.
//
// Thread-safe.
class RateLimiter {
 public:
  // REQUIRES: interval_ms > 0, burst > 0.
  RateLimiter(int64_t interval_ms, uint64_t burst) : interval_ms_(interval_ms), burst_(burst) {}
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Whether an event at `now_ms` (any clock that does not go back) is let through. When it is,
  // `*held_back` is the number of events held back since the last one let through; otherwise it
  // is left as it is.
  bool Allow(int64_t now_ms, uint64_t* held_back) {
    absl::MutexLock l(&mu_);
    if (now_ms - window_start_ms_ >= interval_ms_ || now_ms < window_start_ms_) {
      window_start_ms_ = now_ms;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++held_back_;
      return false;
    }
    ++in_window_;
    *held_back = held_back_;
    held_back_ = 0;
    return true;
  }

 private:
  const int64_t interval_ms_;
  const uint64_t burst_;
  absl::Mutex mu_;
  int64_t window_start_ms_ ABSL_GUARDED_BY(mu_) = INT64_MIN / 2;
  uint64_t in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t held_back_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace isowatch
