// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string_view>

#include "isowatch/common/clock.h"
#include "isowatch/common/rate_limiter.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/ingest/service.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::monitor {

// The daemon's log lines for what ingest refuses or ignores (docs/operations.md, "Logs"): one
// line per batch with refused transactions (how many, by reason, and the first one's detail),
// one per watermark below its stream's, one per batch of a fenced writer and one per batch sent
// under a (stream, seq) durable with other content, all at warn. Each kind is limited to kBurst
// lines every kIntervalMs; the next line let through says how many were not logged.
//
// Thread-safe. Owns its rate limiters; the clock belongs to the caller and outlives it.
class IngestLog {
 public:
  static constexpr int64_t kIntervalMs = 10'000;
  static constexpr uint64_t kBurst = 10;

  explicit IngestLog(const common::Clock* clock) : clock_(clock) {}
  IngestLog(const IngestLog&) = delete;
  IngestLog& operator=(const IngestLog&) = delete;

  // The ingest service's events, logged here. REQUIRES: this outlives every copy.
  ingest::IngestEvents Events();

  void Refused(const v1::IngestAck& ack, uint64_t transactions);
  void WatermarkRegressed(std::string_view stream, uint64_t seq, const history::Timestamp& sent,
                          const history::Timestamp& held);
  void Fenced(std::string_view stream, uint64_t sent, uint64_t current);
  void Conflicting(std::string_view stream, uint64_t seq);

 private:
  const common::Clock* const clock_;
  RateLimiter refusals_{kIntervalMs, kBurst};
  RateLimiter watermarks_{kIntervalMs, kBurst};
  RateLimiter writers_{kIntervalMs, kBurst};  // fenced and conflicting batches
};

}  // namespace isowatch::monitor
