// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "isowatch/common/clock.h"

namespace isowatch::engine {

// The engine takes the process-wide clock interface (common/clock.h) under its own names.
using Clock = common::Clock;
using SystemClock = common::SystemClock;

// A clock that moves only when told to, in whole milliseconds; its wall-clock time is its steady
// time. The simulated delivery (delivery.h) runs the engine on one. Thread-compatible.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_ms = 0) : now_ms_(now_ms) {}
  int64_t NowMicros() const override { return now_ms_ * 1000; }
  int64_t NowUnixMs() const override { return now_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }
  void Set(int64_t ms) { now_ms_ = ms; }

 private:
  int64_t now_ms_;
};

}  // namespace isowatch::engine
