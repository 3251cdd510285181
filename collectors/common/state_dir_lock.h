// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace isowatch::collectors {

// An exclusive lock on a collector's state directory (flock(2) on `<dir>/lock`), held until the
// object is destroyed or the process ends, however it ends: two collectors never run on one
// state directory, and a killed one leaves no stale lock. Movable; thread-compatible.
class StateDirLock {
 public:
  StateDirLock() = default;
  StateDirLock(StateDirLock&& other) noexcept;
  StateDirLock& operator=(StateDirLock&& other) noexcept;
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;
  ~StateDirLock();

  // Takes the lock of `dir` (which must exist). Errors: FAILED_PRECONDITION when another process
  // holds it, naming the directory; the errno's status when the lock file cannot be opened.
  static absl::StatusOr<StateDirLock> Acquire(const std::string& dir);

  bool held() const { return fd_ >= 0; }

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace isowatch::collectors
