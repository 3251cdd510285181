// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/simple_protocol.h"

struct rd_kafka_s;

namespace isowatch::tidb {

// The TiCDC protocols a Kafka topic may carry.
enum class KafkaProtocol : uint8_t { kCanalJson, kOpenProtocol, kSimple };

struct KafkaSourceOptions {
  std::string brokers;  // bootstrap.servers
  std::string topic;
  std::string group_id;  // whose committed offsets say where to resume
  KafkaProtocol protocol = KafkaProtocol::kCanalJson;
  // Further librdkafka consumer properties (name, value), set after the collector's own: TLS and
  // SASL settings, or session.timeout.ms (how long a killed member holds its partitions).
  std::vector<std::pair<std::string, std::string>> properties;
};

// The decoded events of one Kafka message.
struct KafkaMessageEvents {
  int32_t partition = 0;
  int64_t offset = 0;
  std::vector<CdcEvent> events;
};

// Reads one TiCDC topic with librdkafka: every partition of the topic is assigned to this
// consumer (docs/collectors/tidb.md, "Kafka"), starting at the offsets the consumer group
// committed (the earliest offset when it committed none). Offsets are committed only through
// Acknowledge(), never automatically.
//
// Which offsets Acknowledge() commits: on each partition, the offset just past the last
// message that carried a watermark at or below the acknowledged release point. Every row in
// the messages before it has a commit ts below that watermark (TiCDC's promise), so its
// transaction has been released and acknowledged; a row after it may not have been. After a
// restart, reading resumes there and re-reads at most what followed the watermark, whose rows
// the grouper de-duplicates.
//
// Thread-compatible.
class KafkaCdcSource {
 public:
  // Connects the consumer and assigns the topic's partitions. UNAVAILABLE if the topic's
  // metadata cannot be had; INVALID_ARGUMENT for a rejected configuration.
  static absl::StatusOr<std::unique_ptr<KafkaCdcSource>> Create(KafkaSourceOptions options);
  ~KafkaCdcSource();
  KafkaCdcSource(const KafkaCdcSource&) = delete;
  KafkaCdcSource& operator=(const KafkaCdcSource&) = delete;

  // The number of partitions (streams for a TxnGrouper: partition i is stream i).
  int32_t partitions() const { return partitions_; }

  // The next message, decoded; std::nullopt when none came within `timeout`. A message that
  // does not decode is returned as the decoder's error prefixed with its partition and offset,
  // and counted in rejected_messages(); reading goes on after it.
  absl::StatusOr<std::optional<KafkaMessageEvents>> Poll(std::chrono::milliseconds timeout);

  // The daemon acknowledged every transaction below `release_point`: commits, synchronously,
  // each partition's offset past its last watermark at or below it (see the class comment).
  // Partitions with no such watermark are left as they are. UNAVAILABLE if the commit fails.
  absl::Status Acknowledge(Tso release_point);

  uint64_t rejected_messages() const { return rejected_messages_; }

 private:
  KafkaCdcSource(KafkaSourceOptions options, rd_kafka_s* consumer, int32_t partitions);

  absl::StatusOr<std::vector<CdcEvent>> Decode(std::string_view key, std::string_view value);

  KafkaSourceOptions options_;
  rd_kafka_s* consumer_;  // owned
  int32_t partitions_;
  SimpleProtocolDecoder simple_;
  // Per partition: (offset, watermark) of the messages with a watermark not yet committed.
  std::vector<std::deque<std::pair<int64_t, Tso>>> watermarks_;
  uint64_t rejected_messages_ = 0;
};

}  // namespace isowatch::tidb
