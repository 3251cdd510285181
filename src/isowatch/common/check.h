// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "absl/base/optimization.h"

// The invariant policy (docs/style.md, "Invariants"):
//
// - ISOWATCH_CHECK(cond, msg): unrecoverable state. Logs and aborts in every build.
// - ISOWATCH_DCHECK(cond, msg): a cheap, provable invariant. Checked in debug builds only; in
//   release builds `cond` is not evaluated.
// - ISOWATCH_BUG(cond, msg): "cannot happen, but we can degrade". When `cond` is false it logs,
//   adds one to the process-wide count exported as isowatch_internal_bugs_total, and aborts in
//   debug builds; in release builds execution goes on, and the caller degrades (drops one
//   transaction's analysis, marks a window incomplete). Evaluates to `cond`, so a caller writes
//   `if (!ISOWATCH_BUG(cond, "...")) return ...;`.
//
// `msg` is a string literal. Bad client input must never reach any of these: it is an error
// (absl::Status) or a counted refusal.

namespace isowatch::common {

// Logs the failed check (file, line, condition, message) and aborts.
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const char* msg);

// Logs the bug (through the BugReporter, if one is set; else to standard error), counts it, and
// aborts when built without NDEBUG.
void BugDetected(const char* file, int line, const char* cond, const char* msg);

// Where BugDetected logs: a function given the report as one line of text (without a newline),
// e.g. a program's logger; nullptr: standard error. Thread-safe.
using BugReporter = void (*)(const char* report);
void SetBugReporter(BugReporter reporter);

// Internal bugs detected (and survived) since the process started. Thread-safe.
uint64_t InternalBugCount();

// Counts `n` internal bugs as BugDetected does, without logging or aborting: for tests of what
// exports the count.
void AddInternalBugsForTest(uint64_t n);

// Whether this build aborts on ISOWATCH_DCHECK and ISOWATCH_BUG (a build without NDEBUG).
constexpr bool kDebugChecks =
#ifdef NDEBUG
    false;
#else
    true;
#endif

}  // namespace isowatch::common

#define ISOWATCH_CHECK(cond, msg)                                        \
  do {                                                                   \
    if (ABSL_PREDICT_FALSE(!(cond))) {                                   \
      ::isowatch::common::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
    }                                                                    \
  } while (false)

#ifdef NDEBUG
#define ISOWATCH_DCHECK(cond, msg) \
  do {                             \
    if (false && (cond)) {         \
    }                              \
  } while (false)
#else
#define ISOWATCH_DCHECK(cond, msg) ISOWATCH_CHECK(cond, msg)
#endif

#define ISOWATCH_BUG(cond, msg)               \
  (ABSL_PREDICT_TRUE(static_cast<bool>(cond)) \
       ? true                                 \
       : (::isowatch::common::BugDetected(__FILE__, __LINE__, #cond, (msg)), false))
