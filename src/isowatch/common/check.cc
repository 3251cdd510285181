// SPDX-License-Identifier: Apache-2.0
#include "isowatch/common/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace isowatch::common {
namespace {

// Relaxed: a count read at scrape time, ordering nothing.
std::atomic<uint64_t> bug_count{0};
// Release on store, acquire on load: a reporter set is seen whole.
std::atomic<BugReporter> reporter{nullptr};

}  // namespace

void CheckFailed(const char* file, int line, const char* cond, const char* msg) {
  std::fprintf(stderr, "isowatch: check failed at %s:%d: %s (%s)\n", file, line, cond, msg);
  std::fflush(stderr);
  std::abort();
}

void BugDetected(const char* file, int line, const char* cond, const char* msg) {
  bug_count.fetch_add(1, std::memory_order_relaxed);
  char report[1024];
  std::snprintf(report, sizeof(report), "internal bug at %s:%d: %s (%s)%s", file, line, cond, msg,
                kDebugChecks ? "" : "; continuing");
  if (const BugReporter r = reporter.load(std::memory_order_acquire); r != nullptr) {
    r(report);
  } else {
    std::fprintf(stderr, "isowatch: %s\n", report);
    std::fflush(stderr);
  }
  if constexpr (kDebugChecks) std::abort();
}

void SetBugReporter(BugReporter r) { reporter.store(r, std::memory_order_release); }

void AddInternalBugsForTest(uint64_t n) { bug_count.fetch_add(n, std::memory_order_relaxed); }

uint64_t InternalBugCount() { return bug_count.load(std::memory_order_relaxed); }

}  // namespace isowatch::common
