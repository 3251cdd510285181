// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/cdc_input.h"

#include <chrono>

#include "absl/time/clock.h"

#include "isowatch/common/status_macros.h"

namespace isowatch::tidb {

absl::StatusOr<std::unique_ptr<CdcInput>> KafkaCdcInput::Create(KafkaSourceOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<KafkaCdcSource> source,
                   KafkaCdcSource::Create(std::move(options)));
  return std::unique_ptr<CdcInput>(new KafkaCdcInput(std::move(source)));
}

absl::StatusOr<CdcInput::Polled> KafkaCdcInput::Poll(absl::Duration timeout) {
  Polled out;
  const absl::Time deadline = absl::Now() + timeout;
  // Up to a few thousand messages per call, so the loop sends and acknowledges between them.
  for (int i = 0; i < 4096; ++i) {
    const absl::Duration left =
        i == 0 ? timeout : std::max(absl::ZeroDuration(), deadline - absl::Now());
    absl::StatusOr<std::optional<KafkaMessageEvents>> m =
        source_->Poll(std::chrono::milliseconds(absl::ToInt64Milliseconds(left)));
    if (!m.ok()) {
      if (absl::IsUnavailable(m.status())) return m.status();
      out.rejected.push_back(std::string(m.status().message()));
      continue;
    }
    if (!m->has_value()) break;
    for (CdcEvent& e : (*m)->events) {
      out.events.emplace_back(static_cast<size_t>((*m)->partition), std::move(e));
    }
  }
  return out;
}

absl::StatusOr<CdcInput::Polled> StorageCdcInput::Poll(absl::Duration timeout) {
  Polled out;
  absl::StatusOr<std::vector<CdcEvent>> events = reader_.Poll();
  if (!events.ok()) {
    // A file half written, or broken: reported once, tried again at the next poll.
    std::string error(events.status().message());
    if (error != last_error_) out.rejected.push_back(error);
    last_error_ = std::move(error);
    absl::SleepFor(timeout);
    return out;
  }
  last_error_.clear();
  if (events->empty()) absl::SleepFor(timeout);
  for (CdcEvent& e : *events) out.events.emplace_back(0, std::move(e));
  return out;
}

}  // namespace isowatch::tidb
