// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/ingest_log.h"

#include <map>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/ingest/validate.h"

namespace isowatch::monitor {
namespace {

std::string HeldBack(uint64_t n, std::string_view what) {
  if (n == 0) return "";
  return fmt::format(" ({} more {} not logged in the last {} s)", n, what,
                     IngestLog::kIntervalMs / 1000);
}

}  // namespace

ingest::IngestEvents IngestLog::Events() {
  return ingest::IngestEvents{
      .refused = [this](const v1::IngestAck& ack,
                        uint64_t transactions) { Refused(ack, transactions); },
      .watermark_regressed =
          [this](std::string_view stream, uint64_t seq, const history::Timestamp& sent,
                 const history::Timestamp& held) { WatermarkRegressed(stream, seq, sent, held); },
  };
}

void IngestLog::Refused(const v1::IngestAck& ack, uint64_t transactions) {
  if (ack.refusals_size() == 0) return;
  uint64_t held_back = 0;
  if (!refusals_.Allow(clock_->NowMicros() / 1000, &held_back)) return;
  const v1::Refusal& first = ack.refusals(0);
  const std::string_view first_reason = ingest::RefusalReasonName(first.reason());
  const std::string more = HeldBack(held_back, "batches with refusals");
  if (first.whole_batch()) {
    spdlog::warn("stream {}: batch {} refused whole ({} transactions): {}: {}{}", ack.stream(),
                 first.seq(), transactions, first_reason, first.detail(), more);
    return;
  }
  std::map<std::string_view, uint64_t> by_reason;
  for (const v1::Refusal& r : ack.refusals()) ++by_reason[ingest::RefusalReasonName(r.reason())];
  std::string reasons;
  for (const auto& [reason, n] : by_reason) {
    reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", n, reason);
  }
  spdlog::warn("stream {}: batch {}: {} of {} transactions refused ({}); transaction {}: {}: {}{}",
               ack.stream(), first.seq(), ack.refusals_size(), transactions, reasons,
               first.txn_id().empty() ? fmt::format("#{}", first.index()) : first.txn_id(),
               first_reason, first.detail(), more);
}

void IngestLog::WatermarkRegressed(std::string_view stream, uint64_t seq,
                                   const history::Timestamp& sent, const history::Timestamp& held) {
  uint64_t held_back = 0;
  if (!watermarks_.Allow(clock_->NowMicros() / 1000, &held_back)) return;
  spdlog::warn(
      "stream {}: batch {}: watermark ({}, {}) is below the stream's ({}, {}): ignored (a "
      "collector that went back, or two collectors on one stream){}",
      stream, seq, sent.physical, sent.logical, held.physical, held.logical,
      HeldBack(held_back, "backward watermarks"));
}

}  // namespace isowatch::monitor
