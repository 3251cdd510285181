// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/common/clock.h"
#include "isowatch/server/metrics.h"
#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

namespace isowatch::monitor {

// How much of the violations the daemon logs (docs/operations.md, "Bounded findings").
struct FindingsLogOptions {
  // Violations stored in full that are logged in full, at most, per minute; the others are
  // counted and said in the next summary lines. 0: none.
  uint64_t lines_per_minute = 600;
  // Bytes of those lines, at most, while the process runs; past it no violation is logged in
  // full any more (the summary lines go on). 0: no limit.
  uint64_t max_log_bytes = uint64_t{64} << 20;
  // How often the summaries that grew, and the violations not logged, are said.
  int64_t summary_interval_ms = 60'000;
  // Most summaries named each time; the others are said in one line.
  size_t summary_lines = 10;
};

// What ViolationReporter logged and held back.
struct FindingsLogStatus {
  uint64_t logged = 0;        // violations logged in full since the process started
  uint64_t unlogged = 0;      // stored in full but not logged in full, since the process started
  uint64_t log_bytes = 0;     // of the lines of violations logged in full
  bool budget_spent = false;  // max_log_bytes is reached: violations are no longer logged in full
};

// Reports the violations the checkers find (docs/operations.md, "Bounded findings"): adds each to
// the store, which stores it in full or counts it in a summary; counts it in
// isowatch_violations_total (and isowatch_violations_summarised_total); logs it in full at a
// bounded rate and within a byte budget; and every summary interval logs the summaries that grew
// ("N more violations of KIND on key X summarised") and how many violations were not logged,
// within a bounded number of lines.
//
// Thread-safe: the engine thread and the window workers report at once. Owns its bookkeeping;
// the store, the metrics and the clock belong to the caller and outlive it.
class ViolationReporter {
 public:
  ViolationReporter(store::Store* store, server::DaemonMetrics* metrics, const common::Clock* clock,
                    FindingsLogOptions options);
  ViolationReporter(const ViolationReporter&) = delete;
  ViolationReporter& operator=(const ViolationReporter&) = delete;

  // Adds `records` to the store (in one write), and counts and logs them as the class comment
  // says. `where` is added to their log lines (", window 3"). Returns how many were new (stored
  // or summarised; those found before are neither counted nor logged). Errors: the store's
  // (nothing is counted).
  absl::StatusOr<uint64_t> Report(std::span<const store::ViolationRecord> records,
                                  std::string_view where = {});

  // Logs the summaries that grew and the violations not logged since the last time, if the
  // summary interval has passed since then or `now` is set. Call periodically.
  void Tick(bool now = false);

  FindingsLogStatus log_status() const;

 private:
  // A summary that grew since the last summary lines.
  struct Grown {
    store::ViolationSummary summary;  // as of its last growth
    uint64_t grown = 0;
  };
  // Most summaries remembered between summary lines; the growth of others is only counted.
  static constexpr size_t kMaxGrown = 1024;

  // Logs `record` in full if the rate and the budget allow.
  void LogInFull(const store::ViolationRecord& record, std::string_view where, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogSummaries(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  server::DaemonMetrics* const metrics_;
  const common::Clock* const clock_;
  const FindingsLogOptions options_;

  mutable absl::Mutex mu_;
  int64_t minute_start_ms_ ABSL_GUARDED_BY(mu_) = INT64_MIN / 2;
  uint64_t lines_this_minute_ ABSL_GUARDED_BY(mu_) = 0;
  FindingsLogStatus status_ ABSL_GUARDED_BY(mu_);
  int64_t last_summary_ms_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unlogged_since_summary_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, Grown> grown_ ABSL_GUARDED_BY(mu_);
  uint64_t grown_elsewhere_ ABSL_GUARDED_BY(mu_) = 0;  // in summaries past kMaxGrown
  bool store_limit_said_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace isowatch::monitor
