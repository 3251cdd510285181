// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/violation_reporter.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/config/units.h"

namespace isowatch::monitor {
namespace {

constexpr int64_t kMinuteMs = 60'000;

// "si NOCONFLICT", with the checker first when it is not the online engine's.
std::string KindLabel(std::string_view checker, std::string_view level, std::string_view anomaly) {
  if (checker == store::Store::kOnlineChecker) return fmt::format("{} {}", level, anomaly);
  return fmt::format("{} {} {}", checker, level, anomaly);
}

// What the summary groups, for a log line: "on key 7", "of transaction 12 (stream s)", ...
std::string GroupLabel(const store::ViolationSummary& s) {
  switch (s.scope) {
    case store::SummaryScope::kKey:
      return fmt::format("on key {}", s.subject);
    case store::SummaryScope::kTxn:
      return s.stream.empty() ? fmt::format("of transaction {}", s.subject)
                              : fmt::format("of transaction {} (stream {})", s.subject, s.stream);
    case store::SummaryScope::kKind:
      return "past the store's limit (findings.max_store_bytes)";
  }
  return {};
}

}  // namespace

ViolationReporter::ViolationReporter(store::Store* store, server::DaemonMetrics* metrics,
                                     const common::Clock* clock, FindingsLogOptions options)
    : store_(store), metrics_(metrics), clock_(clock), options_(options) {
  absl::MutexLock l(&mu_);
  last_summary_ms_ = clock_->NowMicros() / 1000;
}

absl::StatusOr<uint64_t> ViolationReporter::Report(std::span<const store::ViolationRecord> records,
                                                   std::string_view where) {
  if (records.empty()) return 0;
  ASSIGN_OR_RETURN(store::AddedViolations added, store_->AddViolations(records));
  uint64_t fresh = 0;
  const int64_t now_ms = clock_->NowMicros() / 1000;
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < records.size(); ++i) {
    const store::ViolationRecord& r = records[i];
    if (added.fates[i] == store::ViolationFate::kDuplicate) continue;
    ++fresh;
    metrics_->Violations(r.checker, r.level, r.anomaly).Increment();
    if (added.fates[i] == store::ViolationFate::kStored) {
      LogInFull(r, where, now_ms);
    } else {
      metrics_->ViolationsSummarised(r.checker, r.level, r.anomaly).Increment();
    }
  }
  for (store::AddedViolations::Summarised& s : added.summarised) {
    if (s.summary.scope == store::SummaryScope::kKind && !store_limit_said_) {
      store_limit_said_ = true;
      spdlog::warn(
          "the store's limit for violations (findings.max_store_bytes) is reached: violations "
          "are no longer stored in full, only counted by kind (GET /api/v1/summaries?scope=kind); "
          "the checks go on");
    }
    std::string key = fmt::format(
        "{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", static_cast<int>(s.summary.scope), s.summary.checker,
        s.summary.level, s.summary.anomaly, s.summary.stream, s.summary.subject);
    auto it = grown_.find(key);
    if (it == grown_.end() && grown_.size() >= kMaxGrown) {
      grown_elsewhere_ += s.count;
      continue;
    }
    if (it == grown_.end()) it = grown_.emplace(std::move(key), Grown()).first;
    it->second.summary = std::move(s.summary);
    it->second.grown += s.count;
  }
  return fresh;
}

void ViolationReporter::LogInFull(const store::ViolationRecord& r, std::string_view where,
                                  int64_t now_ms) {
  if (now_ms - minute_start_ms_ >= kMinuteMs || now_ms < minute_start_ms_) {
    minute_start_ms_ = now_ms;
    lines_this_minute_ = 0;
  }
  const std::string line = fmt::format(
      "violation {} ({}{}{}): {}", r.id, KindLabel(r.checker, r.level, r.anomaly),
      r.ext_kind.empty() ? std::string() : fmt::format("/{}", r.ext_kind), where, r.json);
  const bool over_budget =
      options_.max_log_bytes > 0 && status_.log_bytes + line.size() > options_.max_log_bytes;
  if (over_budget && !status_.budget_spent) {
    status_.budget_spent = true;
    spdlog::warn(
        "the log's budget for violations (findings.max_log_bytes = {}) is spent: violations are no "
        "longer logged in full until the daemon restarts, only said in the summary lines; "
        "GET /api/v1/violations lists them",
        config::FormatByteSize(options_.max_log_bytes));
  }
  if (over_budget || lines_this_minute_ >= options_.lines_per_minute) {
    ++status_.unlogged;
    ++unlogged_since_summary_;
    return;
  }
  ++lines_this_minute_;
  ++status_.logged;
  status_.log_bytes += line.size();
  spdlog::warn("{}", line);
}

void ViolationReporter::Tick(bool now) {
  const int64_t now_ms = clock_->NowMicros() / 1000;
  absl::MutexLock l(&mu_);
  if (!now && now_ms - last_summary_ms_ < options_.summary_interval_ms) return;
  LogSummaries(now_ms);
}

void ViolationReporter::LogSummaries(int64_t now_ms) {
  const int64_t seconds = std::max<int64_t>((now_ms - last_summary_ms_ + 500) / 1000, 0);
  last_summary_ms_ = now_ms;
  if (unlogged_since_summary_ > 0) {
    spdlog::warn(
        "{} violations stored in full were not logged in the last {} s (findings.log_per_minute = "
        "{}{}); GET /api/v1/violations lists them",
        unlogged_since_summary_, seconds, options_.lines_per_minute,
        status_.budget_spent ? ", and the log's budget findings.max_log_bytes is spent" : "");
    unlogged_since_summary_ = 0;
  }
  if (grown_.empty() && grown_elsewhere_ == 0) return;
  std::vector<Grown*> order;
  order.reserve(grown_.size());
  for (auto& [key, g] : grown_) order.push_back(&g);
  // The largest growth first; ties in a stable order.
  std::sort(order.begin(), order.end(), [](const Grown* a, const Grown* b) {
    if (a->grown != b->grown) return a->grown > b->grown;
    return std::tie(a->summary.scope, a->summary.anomaly, a->summary.subject) <
           std::tie(b->summary.scope, b->summary.anomaly, b->summary.subject);
  });
  uint64_t rest = grown_elsewhere_;
  uint64_t rest_summaries = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const Grown& g = *order[i];
    if (i >= options_.summary_lines) {
      rest += g.grown;
      ++rest_summaries;
      continue;
    }
    const store::ViolationSummary& s = g.summary;
    spdlog::warn(
        "{} more violations of {} {} summarised in the last {} s ({} summarised in all, {} kept in "
        "full; the last: {}, transactions [{}]); GET /api/v1/summaries",
        g.grown, KindLabel(s.checker, s.level, s.anomaly), GroupLabel(s), seconds, s.summarised,
        s.kept, s.last.id, fmt::join(s.last.txns, ", "));
  }
  if (rest > 0) {
    spdlog::warn(
        "{} more violations summarised in the last {} s in {} other summaries; GET "
        "/api/v1/summaries",
        rest, seconds,
        grown_elsewhere_ > 0 ? fmt::format("{} or more", rest_summaries + 1)
                             : fmt::format("{}", rest_summaries));
  }
  grown_.clear();
  grown_elsewhere_ = 0;
}

FindingsLogStatus ViolationReporter::log_status() const {
  absl::MutexLock l(&mu_);
  return status_;
}

}  // namespace isowatch::monitor
