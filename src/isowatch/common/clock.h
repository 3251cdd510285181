// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>

namespace isowatch::common {

// A source of time, injected so that what waits for time or measures it can be driven by a test
// (tests/testing/fake_clock.h) rather than by the machine's clocks. It gives two readings: steady
// time, which never goes back (timeouts, intervals, durations), and wall-clock time (the
// timestamps people read: when a violation became final, when the daemon started).
//
// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Steady time in microseconds since a fixed, arbitrary origin; never decreases.
  virtual int64_t NowMicros() const = 0;
  // Wall-clock time in milliseconds since the Unix epoch.
  virtual int64_t NowUnixMs() const = 0;
  // Steady time in milliseconds.
  int64_t NowMs() const { return NowMicros() / 1000; }
  // Seconds of steady time since `start_micros`, a NowMicros() reading.
  double SecondsSince(int64_t start_micros) const {
    return static_cast<double>(NowMicros() - start_micros) / 1e6;
  }
};

// The machine's clocks: std::chrono::steady_clock and std::chrono::system_clock. Thread-safe.
class SystemClock final : public Clock {
 public:
  // The one instance for whoever was given no clock (never destroyed).
  static const SystemClock& Get() {
    static const auto* clock = new SystemClock();
    return *clock;
  }

  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t NowUnixMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to, in whole milliseconds; its wall-clock time is its steady
// time. Simulations (sim::RunOnline) and single-threaded tests run on one; tests/testing/
// fake_clock.h has a thread-safe one. Thread-compatible.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ms = 0) : now_ms_(now_ms) {}
  int64_t NowMicros() const override { return now_ms_ * 1000; }
  int64_t NowUnixMs() const override { return now_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }
  void Set(int64_t ms) { now_ms_ = ms; }

 private:
  int64_t now_ms_;
};

}  // namespace isowatch::common
