// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/mapped_file.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace isowatch::formats::internal {
namespace {

// The live mappings, for the SIGBUS handler, which may only read lock-free atomics and what
// they publish. A slot is claimed (`used`), filled, then published by a non-zero `end`; it is
// unpublished before it is given back.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::array<char, 512> name{};  // the file's path, cut short if need be
  size_t name_size = 0;
};
constexpr int kSlots = 16;
std::array<Slot, kSlots> slots;
struct sigaction previous_action;  // the SIGBUS handling before ours; set once

void Say(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t put = ::write(STDERR_FILENO, s, n);
    if (put <= 0) return;
    s += put;
    n -= static_cast<size_t>(put);
  }
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Slot& s : slots) {
    const uintptr_t end = s.end.load(std::memory_order_acquire);
    if (end != 0 && addr >= s.begin.load(std::memory_order_relaxed) && addr < end) {
      // As the command line gives an error: "program: file: what".
      Say(program_invocation_short_name, std::strlen(program_invocation_short_name));
      Say(": ", 2);
      Say(s.name.data(), s.name_size);
      static constexpr char kWhat[] = ": the file shrank while it was being read\n";
      Say(kWhat, sizeof kWhat - 1);
      ::_exit(2);
    }
  }
  // Not a mapped file's: as before this handler.
  if ((previous_action.sa_flags & SA_SIGINFO) != 0 && previous_action.sa_sigaction != nullptr) {
    previous_action.sa_sigaction(sig, info, context);
    return;
  }
  if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(sig);
    return;
  }
  // The default action: a fault ends the process when the access is tried again; a signal sent
  // by a process is raised again.
  ::signal(SIGBUS, SIG_DFL);
  if (info->si_code <= 0) ::raise(SIGBUS);
}

void InstallHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previous_action);
  });
}

size_t PageSize() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

}  // namespace

std::unique_ptr<MappedFile> MappedFile::Map(int fd, size_t size, size_t padding,
                                            const std::string& path) {
  if (size == 0) return nullptr;
  int slot = 0;
  for (bool expected = false; slot < kSlots; ++slot, expected = false) {
    if (slots[slot].used.compare_exchange_strong(expected, true)) break;
  }
  if (slot == kSlots) return nullptr;
  Slot& s = slots[slot];
  const size_t page = PageSize();
  const size_t file_length = (size + page - 1) / page * page;
  const size_t length = (size + padding + page - 1) / page * page;
  // Room for the file and the padding after it (zero pages), then the file over its start.
  void* area = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) {
    s.used.store(false);
    return nullptr;
  }
  if (::mmap(area, file_length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) ==
      MAP_FAILED) {
    ::munmap(area, length);
    s.used.store(false);
    return nullptr;
  }
  (void)::madvise(area, file_length, MADV_SEQUENTIAL);
  s.name_size = std::min(path.size(), s.name.size());
  std::memcpy(s.name.data(), path.data(), s.name_size);
  s.begin.store(reinterpret_cast<uintptr_t>(area), std::memory_order_relaxed);
  s.end.store(reinterpret_cast<uintptr_t>(area) + file_length, std::memory_order_release);
  InstallHandler();
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<char*>(area), size, length, slot));
}

MappedFile::~MappedFile() {
  Slot& s = slots[slot_];
  s.end.store(0, std::memory_order_release);
  ::munmap(data_, length_);
  s.used.store(false, std::memory_order_release);
}

void MappedFile::Drop(const char* p, size_t bytes) {
  const size_t page = PageSize();
  const auto from = static_cast<size_t>(p - data_);
  const size_t begin = (from + page - 1) / page * page;
  const size_t end = std::min(from + bytes, size_) / page * page;
  if (begin >= end) return;
  (void)::madvise(data_ + begin, end - begin, MADV_DONTNEED);
}

}  // namespace isowatch::formats::internal
