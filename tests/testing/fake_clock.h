// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

#include "isowatch/common/clock.h"

namespace isowatch::testing {

// A clock that moves only when the test moves it. Steady and wall-clock time move together; the
// wall clock starts at 2024-05-01T12:00:00Z, so that the timestamps it gives look like real ones.
//
// Thread-safe: the daemon's threads read it while the test advances it.
class FakeClock final : public common::Clock {
 public:
  static constexpr int64_t kStartUnixMs = 1'714'564'800'000;

  int64_t NowMicros() const override {
    // Acquire: pairs with Advance, so a thread that sees the new time sees what came before it.
    return micros_.load(std::memory_order_acquire);
  }
  int64_t NowUnixMs() const override { return kStartUnixMs + NowMicros() / 1000; }

  // Moves both readings on by `d`. REQUIRES: d >= 0 (steady time never goes back).
  void Advance(absl::Duration d) {
    // Release: pairs with the acquire in NowMicros.
    micros_.fetch_add(absl::ToInt64Microseconds(d), std::memory_order_release);
  }

 private:
  std::atomic<int64_t> micros_{0};
};

}  // namespace isowatch::testing
