// SPDX-License-Identifier: Apache-2.0
#include "isowatch/common/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

#include <fmt/format.h>

namespace isowatch {
namespace {

absl::Status Errno(std::string_view what, const std::string& file) {
  return absl::ErrnoToStatus(errno, fmt::format("{} {}", what, file));
}

// Writes all of `data` to `fd`, resuming after short writes and interruptions.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

absl::Status SyncDirectoryOf(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open the directory", dir);
  const bool synced = fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  errno = saved;
  return synced ? absl::OkStatus() : Errno("cannot sync the directory", dir);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents, bool sync) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  absl::Status s;
  if (!WriteAll(fd, contents)) {
    s = Errno("cannot write", tmp);
  } else if (sync && fsync(fd) != 0) {
    s = Errno("cannot sync", tmp);
  }
  if (close(fd) != 0 && s.ok()) s = Errno("cannot close", tmp);
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Errno(fmt::format("cannot rename {} to", tmp), path);
  }
  if (!s.ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  return sync ? SyncDirectoryOf(path) : absl::OkStatus();
}

}  // namespace isowatch
