// SPDX-License-Identifier: Apache-2.0
#pragma once

// The interface of a plug-in checker (docs/checkers/plugins.md): a checker of whole histories
// that the daemon runs on sealed windows in its worker pool and `isowatch check --checker` runs
// on a file. A plug-in is one directory under src/isowatch/checkers/ and one line in
// registry.cc.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/history/history.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers {

// What a checker needs of a history, so that a caller can tell a user why a history cannot be
// judged by it, and a window knows which findings it may trust.
struct Requirements {
  // Orders versions or replays transactions by commit timestamp; transactions without one are
  // skipped (and counted).
  bool commit_timestamps = true;
  // Judges a read against the state at its transaction's start (snapshot isolation). A window
  // then trusts such a judgement only for transactions that started at or after its base.
  bool start_snapshots = false;
  // Kinds of data it handles.
  bool registers = true;
  bool lists = true;
  // Decides every register history without commit timestamps it judges. False for a checker
  // that infers register version orders where the reads fix them and leaves the rest UNKNOWN
  // (adya): `isowatch check` then prefers one that decides (checkers::CheckersFor).
  bool decides_black_box_registers = true;
};

// The part of a history a checker judges when the history is a window of a longer stream
// (windows/window_cutter.h): transactions before `first_proper` are lead-in, there only so that
// the window's own transactions are judged against the right state; the window's initial state
// is the state after every commit before `base`. Whole histories have no scope.
struct WindowScope {
  uint64_t index = 0;
  uint32_t first_proper = 0;
  history::Timestamp base;
  // PostgreSQL snapshots: every committed writer whose writes the initial state holds has an xid
  // below base_xid_end, unless base_without_xid (one has none).
  uint64_t base_xid_end = 0;
  bool base_without_xid = false;
};

// When a check must stop. Checkers poll `expired()` at least every few milliseconds of work and
// then return an incomplete result.
class CheckLimits {
 public:
  using Clock = std::chrono::steady_clock;
  CheckLimits() = default;
  explicit CheckLimits(Clock::time_point deadline, const std::atomic<bool>* cancel = nullptr)
      : deadline_(deadline), cancel_(cancel) {}
  // Out of time, or cancelled (the daemon is stopping).
  bool expired() const {
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) return true;
    return deadline_ != Clock::time_point::max() && Clock::now() >= deadline_;
  }

 private:
  Clock::time_point deadline_ = Clock::time_point::max();
  const std::atomic<bool>* cancel_ = nullptr;
};

// Asks a CheckLimits (which reads the clock) only every `every` calls of Expired(), so that a
// checker's inner loop can call it on every step. Once expired, stays expired. Does not own the
// limits; nullptr means no limits. Thread-compatible: one per check.
class LimitPoller {
 public:
  explicit LimitPoller(const CheckLimits* limits, uint32_t every = 1024)
      : limits_(limits), every_(every == 0 ? 1 : every) {}
  bool Expired() {
    if (limits_ == nullptr || expired_) return expired_;
    if (++calls_ < every_) return false;
    calls_ = 0;
    expired_ = limits_->expired();
    return expired_;
  }
  // Polls now, whatever the count.
  bool ExpiredNow() {
    if (limits_ != nullptr && !expired_) expired_ = limits_->expired();
    return expired_;
  }
  // What the last poll found, without polling.
  bool expired() const { return expired_; }

 private:
  const CheckLimits* limits_;
  uint32_t every_;
  uint32_t calls_ = 0;
  bool expired_ = false;
};

// What a check found. A checker that did not finish (out of time) reports `complete = false`
// and no violations: UNKNOWN, never a verdict it did not reach. One that finished but could not
// decide everything the history holds also reports `complete = false`, says what in
// `undecided`, and keeps the violations it found (they stand).
struct CheckerResult {
  bool complete = true;
  std::string undecided;  // what it could not decide, in a sentence; empty if out of time
  std::vector<verdict::Violation> violations;  // each with Violation::checker set to its name
  size_t transactions_checked = 0;
  size_t transactions_skipped = 0;  // lacking what Requirements names, or lead-in
  // Findings a window could not trust (lead-in only, or judged against a state the window does
  // not hold) and left out.
  size_t findings_out_of_scope = 0;
  // Checker-specific counts for reports, e.g. {"sccs", 3}.
  std::vector<std::pair<std::string, uint64_t>> stats;
};

// A configured checker. Check is const and thread-safe: the worker pool runs one instance on
// several windows at once.
class Checker {
 public:
  virtual ~Checker() = default;
  virtual std::string_view name() const = 0;
  // The levels this instance judges (a subset of its CheckerInfo::levels).
  virtual const std::vector<verdict::IsolationLevel>& levels() const = 0;
  // Checks `h`. With a scope, reports only the findings the window can trust
  // (KeepInScope below does the common part).
  virtual CheckerResult Check(const history::History& h, const WindowScope* scope,
                              const CheckLimits& limits) const = 0;
};

// One option of a plug-in, as `checkers.NAME.OPTION` in the daemon's YAML.
struct OptionSpec {
  std::string name;
  std::string type;  // what a value looks like, for help: "integer", "duration", ...
  std::string default_value;
  std::string help;
};

// Option values by name, as text (from the YAML or the command line).
using CheckerOptions = std::map<std::string, std::string, std::less<>>;

// A plug-in as registered.
struct CheckerInfo {
  std::string name;
  std::string help;                             // one sentence
  std::vector<verdict::IsolationLevel> levels;  // it can judge, in canonical order
  // The anomalies it can report (at any of the levels it judges), e.g. for metrics that exist
  // before the first finding.
  std::vector<verdict::Anomaly> anomalies;
  Requirements requirements;
  // Options besides "levels", which every plug-in takes (a subset of `levels`; default all).
  std::vector<OptionSpec> options;
  // Builds a checker for `levels` (non-empty, a subset of `levels` above) from option values
  // (only names from `options`, checked). Errors: InvalidArgument naming the option.
  std::function<absl::StatusOr<std::unique_ptr<Checker>>(
      std::vector<verdict::IsolationLevel> levels, const CheckerOptions& options)>
      create;
};

// The value of integer option `option` of checker `checker` from its text: a decimal integer in
// [min, max]. Errors: InvalidArgument "checker.option: 'text' is not an integer from min to
// max" (or "...a positive integer" when that is the range).
absl::StatusOr<uint64_t> ParseIntegerOption(std::string_view checker, std::string_view option,
                                            std::string_view text, uint64_t min, uint64_t max);

// The common part of a window's trust rule: drops findings none of whose transactions is the
// window's own (all lead-in: every transaction index below `scope->first_proper`), counting
// them in `result->findings_out_of_scope`. A finding that names no transaction is kept. No-op
// without a scope.
void KeepInScope(const WindowScope* scope, CheckerResult* result);

// For a checker that judges point and list reads only: the history's range reads are evidence
// it did not weigh, so a finished result becomes undecided (what it found stands), says how many
// in `undecided` and counts them in the stat "range_reads_unjudged". A result out of time stays
// as it is. No-op for a history without range reads.
void LeaveRangeReadsUndecided(const history::History& h, CheckerResult* result);

}  // namespace isowatch::checkers
