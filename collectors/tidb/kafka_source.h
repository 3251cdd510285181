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
  // SASL settings, say.
  std::vector<std::pair<std::string, std::string>> properties;
  // Where to start reading each partition (by partition; KafkaCdcSource::kBeginning for its
  // start): the resume_offsets() a collector saved. Partitions it does not cover (all, when it
  // is empty) start at the offset the consumer group committed, or at their start.
  std::vector<int64_t> start_offsets;
};

// The decoded events of one Kafka message.
struct KafkaMessageEvents {
  int32_t partition = 0;
  int64_t offset = 0;
  std::vector<CdcEvent> events;
};

// Reads one TiCDC topic with librdkafka: every partition of the topic is assigned to this
// consumer (docs/collectors/tidb.md, "Kafka"), which therefore takes no part in its consumer
// group's rebalances: a transaction's rows may be spread over every partition, and only a reader
// of all of them knows when it is complete. Each partition starts at the offset given in
// options.start_offsets, else at the offset the consumer group committed, else at its start.
// Offsets are committed only through Acknowledge(), never automatically.
//
// Where to resume: on each partition, the offset just past the last message that carried a
// watermark at or below the acknowledged release point. Every row in the messages before it has
// a commit ts below that watermark (TiCDC's promise), so its transaction has been released and
// acknowledged; a row after it may not have been. Reading again from there re-reads at most what
// followed the watermark, whose rows the grouper de-duplicates. Acknowledge() moves
// resume_offsets() there and commits them to the consumer group; a collector that saves
// resume_offsets() itself and starts from them needs nothing of the group's offsets, which
// another consumer of the group could move.
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
  const std::string& topic() const { return options_.topic; }

  // The next message, decoded; std::nullopt when none came within `timeout`. A message that
  // does not decode is returned as the decoder's error prefixed with its partition and offset,
  // and counted in rejected_messages(); reading goes on after it.
  absl::StatusOr<std::optional<KafkaMessageEvents>> Poll(std::chrono::milliseconds timeout);

  // The daemon acknowledged every transaction below `release_point`: moves each partition's
  // resume offset past its last watermark at or below it (see the class comment; partitions with
  // no such watermark keep theirs), then commits, synchronously, the resume offsets the group
  // does not hold yet. Errors (the resume offsets have moved all the same, and the next call
  // commits them again): FAILED_PRECONDITION when the group refuses the commit because it has
  // members (another consumer subscribed to it: a consumer outside the group may not commit
  // then); UNAVAILABLE for any other failure of the commit.
  absl::Status Acknowledge(Tso release_point);

  // Per partition, where reading can resume without losing anything acknowledged (an offset, or
  // kBeginning).
  const std::vector<int64_t>& resume_offsets() const { return resume_offsets_; }
  static constexpr int64_t kBeginning = -2;  // RD_KAFKA_OFFSET_BEGINNING

  uint64_t rejected_messages() const { return rejected_messages_; }

 private:
  KafkaCdcSource(KafkaSourceOptions options, rd_kafka_s* consumer, std::vector<int64_t> start,
                 std::vector<int64_t> committed);

  absl::StatusOr<std::vector<CdcEvent>> Decode(std::string_view key, std::string_view value);

  KafkaSourceOptions options_;
  rd_kafka_s* consumer_;  // owned
  int32_t partitions_;
  SimpleProtocolDecoder simple_;
  // Per partition: (offset, watermark) of the messages with a watermark not yet acknowledged.
  std::vector<std::deque<std::pair<int64_t, Tso>>> watermarks_;
  std::vector<int64_t> resume_offsets_;
  // The offsets the group holds as far as this source knows (RD_KAFKA_OFFSET_INVALID: unknown).
  std::vector<int64_t> committed_;
  uint64_t rejected_messages_ = 0;
};

}  // namespace isowatch::tidb
