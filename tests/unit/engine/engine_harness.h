// SPDX-License-Identifier: Apache-2.0
// Harness, for the engine tests that deliver hand-written arrival orders: one engine over a small
// history, one stream, a clock that moves only when told.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/history.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"

namespace isowatch::engine {

inline constexpr int64_t kX = 0;
inline constexpr int64_t kY = 1;

inline std::vector<TxnId> Ids(const history::History& h,
                              std::initializer_list<std::string_view> names) {
  std::vector<TxnId> out;
  for (std::string_view n : names) {
    const TxnId id = h.FindTxn(n);
    if (!id.valid()) std::abort();
    out.push_back(id);
  }
  return out;
}

inline history::Timestamp Ts(int64_t t) { return {t, 0}; }

// One engine over a small history, one stream, a clock that moves only when told.
class Harness {
 public:
  explicit Harness(const ::isowatch::testing::TestHistory& t,
                   verdict::IsolationLevel level = verdict::IsolationLevel::kSnapshotIsolation,
                   int64_t timeout_ms = 5000, int64_t retention = 0, VersionSpill* spill = nullptr,
                   bool spill_collected = true, uint64_t memory_budget = 0,
                   int64_t spill_retention = 0)
      : h_(t.Build()),
        engine_(h_, {.level = level,
                     .finality_timeout_ms = timeout_ms,
                     .clock = &clock_,
                     .retention = retention,
                     .spill = spill,
                     .spill_collected = spill_collected,
                     .memory_budget = memory_budget,
                     .spill_retention = spill_retention,
                     .on_reload = [this](double seconds) { reload_seconds_.push_back(seconds); }}),
        stream_(engine_.AddStream("test")) {}

  void Deliver(std::initializer_list<std::string_view> names,
               std::optional<int64_t> watermark = std::nullopt) {
    const std::vector<TxnId> ids = Ids(h_, names);
    engine_.Deliver(stream_, ids,
                    watermark ? std::optional<history::Timestamp>(Ts(*watermark)) : std::nullopt);
  }
  // The violations that became final since the last call, summarised.
  std::vector<std::string> Take() {
    return ::isowatch::testing::SummarizeAll(h_, engine_.TakeFinalViolations());
  }
  std::vector<verdict::Violation> TakeFull() { return engine_.TakeFinalViolations(); }

  const history::History& h() const { return h_; }
  // The durations EngineOptions::on_reload reported.
  const std::vector<double>& reload_seconds() const { return reload_seconds_; }
  Engine& engine() { return engine_; }
  common::ManualClock& clock() { return clock_; }
  StreamId stream() const { return stream_; }
  const EngineStats& stats() const { return engine_.stats(); }

 private:
  common::ManualClock clock_{0};
  history::History h_;
  Engine engine_;
  StreamId stream_;
  std::vector<double> reload_seconds_;
};

}  // namespace isowatch::engine
