// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/cdc_input.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::tidb {

absl::StatusOr<std::unique_ptr<CdcInput>> KafkaCdcInput::Create(KafkaSourceOptions options,
                                                                const std::string& resume) {
  // "kafka TOPIC OFFSET,OFFSET,...": a position of another topic (the collector was pointed at
  // a new one) is not used.
  const std::vector<std::string> words = absl::StrSplit(resume, ' ');
  if (words.size() == 3 && words[0] == "kafka" && words[1] == options.topic) {
    std::vector<int64_t> offsets;
    for (const std::string& o : std::vector<std::string>(absl::StrSplit(words[2], ','))) {
      int64_t offset = 0;
      if (!absl::SimpleAtoi(o, &offset) || offset < KafkaCdcSource::kBeginning) {
        return absl::DataLossError(fmt::format("bad Kafka resume position \"{}\"", resume));
      }
      offsets.push_back(offset);
    }
    options.start_offsets = std::move(offsets);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<KafkaCdcSource> source,
                   KafkaCdcSource::Create(std::move(options)));
  return std::unique_ptr<CdcInput>(new KafkaCdcInput(std::move(source)));
}

std::string KafkaCdcInput::ResumePosition() const {
  return fmt::format("kafka {} {}", source_->topic(), fmt::join(source_->resume_offsets(), ","));
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
