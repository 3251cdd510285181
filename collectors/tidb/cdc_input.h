// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/kafka_source.h"
#include "collectors/tidb/storage_sink_reader.h"

namespace isowatch::tidb {

// The TiCDC events of one changefeed, from Kafka or a storage sink, behind one interface so the
// collector's loop is the same for both (and testable with either).
class CdcInput {
 public:
  virtual ~CdcInput() = default;

  // The number of streams whose watermarks all must pass a commit ts (TxnGrouper's streams).
  virtual size_t streams() const = 0;

  struct Polled {
    // (stream, event), in arrival order.
    std::vector<std::pair<size_t, CdcEvent>> events;
    // Messages or files that did not decode since the last call: each named with its error.
    std::vector<std::string> rejected;
  };
  // What arrived within about `timeout`. Errors: UNAVAILABLE (try again later), anything else is
  // fatal.
  virtual absl::StatusOr<Polled> Poll(absl::Duration timeout) = 0;

  // Every transaction below `point` is durable downstream: the source may forget it. An error
  // is for the caller to report; the input goes on (and retries what failed at the next call).
  virtual absl::Status Acknowledge(Tso point) = 0;

  // Where reading can resume without losing anything acknowledged, as one line of text for the
  // collector's state file, to be given to the input's factory after a restart. Empty: the
  // input resumes by itself.
  virtual std::string ResumePosition() const { return ""; }
};

// Kafka: one stream per partition. Owns its consumer. Its resume position is the source's
// resume offsets, "kafka TOPIC OFFSET,OFFSET,..." (an offset per partition; -2: its start).
class KafkaCdcInput : public CdcInput {
 public:
  // Starts each partition where `resume` (a ResumePosition() of this topic) says; without one,
  // where the consumer group's offsets say.
  static absl::StatusOr<std::unique_ptr<CdcInput>> Create(KafkaSourceOptions options,
                                                          const std::string& resume);
  size_t streams() const override { return static_cast<size_t>(source_->partitions()); }
  absl::StatusOr<Polled> Poll(absl::Duration timeout) override;
  absl::Status Acknowledge(Tso point) override { return source_->Acknowledge(point); }
  std::string ResumePosition() const override;

 private:
  explicit KafkaCdcInput(std::unique_ptr<KafkaCdcSource> source) : source_(std::move(source)) {}
  std::unique_ptr<KafkaCdcSource> source_;
};

// A storage sink's directory: one stream (its checkpoint is the watermark). Re-reads everything
// after a restart (the joiner drops what it sent before); nothing to acknowledge.
class StorageCdcInput : public CdcInput {
 public:
  StorageCdcInput(std::string root, StorageSinkReader::Format format, StorageCsvOptions csv_options)
      : reader_(std::move(root), format, std::move(csv_options)) {}
  size_t streams() const override { return 1; }
  absl::StatusOr<Polled> Poll(absl::Duration timeout) override;
  absl::Status Acknowledge(Tso) override { return absl::OkStatus(); }

 private:
  StorageSinkReader reader_;
  std::string last_error_;
};

}  // namespace isowatch::tidb
