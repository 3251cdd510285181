// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>

namespace isowatch::engine {

// A source of wall-clock time in milliseconds, injected so that timeouts are deterministic in
// tests. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;
};

// The process's steady clock.
class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. Thread-compatible.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_ms = 0) : now_ms_(now_ms) {}
  int64_t NowMs() const override { return now_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }
  void Set(int64_t ms) { now_ms_ = ms; }

 private:
  int64_t now_ms_;
};

}  // namespace isowatch::engine
