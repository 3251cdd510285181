// SPDX-License-Identifier: Apache-2.0
#include "collectors/common/state_dir_lock.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <utility>

#include "absl/status/status.h"
#include <fmt/format.h>

namespace isowatch::collectors {

StateDirLock::StateDirLock(StateDirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

StateDirLock& StateDirLock::operator=(StateDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<StateDirLock> StateDirLock::Acquire(const std::string& dir) {
  const std::string path = dir + "/lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(error, fmt::format("cannot open {}", path));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(fmt::format(
          "another collector runs with the state directory {}: give each its own", dir));
    }
    return absl::ErrnoToStatus(error, fmt::format("cannot lock {}", path));
  }
  return StateDirLock(fd);
}

}  // namespace isowatch::collectors
