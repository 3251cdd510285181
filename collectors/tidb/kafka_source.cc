// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/kafka_source.h"

#include <chrono>
#include <cstdint>
#include <librdkafka/rdkafka.h>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>

#include "isowatch/common/string_view.h"

#include "collectors/tidb/canal_json.h"
#include "collectors/tidb/open_protocol.h"

namespace isowatch::tidb {
namespace {

constexpr int kMetadataTimeoutMs = 10000;

// Sets `name` in `conf`; INVALID_ARGUMENT with librdkafka's reason otherwise.
absl::Status Set(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char error[512];
  if (rd_kafka_conf_set(conf, name, value.c_str(), error, sizeof(error)) != RD_KAFKA_CONF_OK) {
    return absl::InvalidArgumentError(fmt::format("kafka: {}={}: {}", name, value, error));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<KafkaCdcSource>> KafkaCdcSource::Create(KafkaSourceOptions options) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] :
       {std::pair<const char*, std::string>{"bootstrap.servers", options.brokers},
        {"group.id", options.group_id},
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"auto.offset.reset", "earliest"}}) {
    if (absl::Status status = Set(conf, name, value); !status.ok()) {
      rd_kafka_conf_destroy(conf);
      return status;
    }
  }
  for (const auto& [name, value] : options.properties) {
    if (name == "enable.auto.commit" || name == "enable.auto.offset.store") {
      rd_kafka_conf_destroy(conf);
      return absl::InvalidArgumentError(fmt::format(
          "kafka: {} is the collector's own: offsets are committed only once isowatchd has "
          "acknowledged what they carried",
          name));
    }
    if (absl::Status status = Set(conf, name.c_str(), value); !status.ok()) {
      rd_kafka_conf_destroy(conf);
      return status;
    }
  }
  char error[512];
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof(error));
  if (consumer == nullptr) {
    rd_kafka_conf_destroy(conf);
    return absl::InvalidArgumentError(fmt::format("kafka: cannot create a consumer: {}", error));
  }
  rd_kafka_poll_set_consumer(consumer);
  // All topics' metadata: asking for one topic by name would make a broker that creates
  // topics on demand create a missing one.
  const rd_kafka_metadata_t* metadata = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(consumer, /*all_topics=*/1, nullptr, &metadata, kMetadataTimeoutMs);
  int32_t partitions = 0;
  std::string reason =
      err == RD_KAFKA_RESP_ERR_NO_ERROR ? "the cluster has no such topic" : rd_kafka_err2str(err);
  for (int i = 0; err == RD_KAFKA_RESP_ERR_NO_ERROR && i < metadata->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& topic = metadata->topics[i];
    if (options.topic != topic.topic) continue;
    reason = rd_kafka_err2str(topic.err);
    if (topic.err == RD_KAFKA_RESP_ERR_NO_ERROR) partitions = topic.partition_cnt;
  }
  if (metadata != nullptr) rd_kafka_metadata_destroy(metadata);
  if (partitions <= 0) {
    rd_kafka_destroy(consumer);
    return absl::UnavailableError(fmt::format("kafka: no partitions of topic {} at {}: {}",
                                              options.topic, options.brokers, reason));
  }
  rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(partitions);
  for (int32_t p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(assignment, options.topic.c_str(), p)->offset =
        RD_KAFKA_OFFSET_STORED;
  }
  const rd_kafka_resp_err_t assigned = rd_kafka_assign(consumer, assignment);
  rd_kafka_topic_partition_list_destroy(assignment);
  if (assigned != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_destroy(consumer);
    return absl::UnavailableError(
        fmt::format("kafka: cannot assign {}: {}", options.topic, rd_kafka_err2str(assigned)));
  }
  return std::unique_ptr<KafkaCdcSource>(
      new KafkaCdcSource(std::move(options), consumer, partitions));
}

KafkaCdcSource::KafkaCdcSource(KafkaSourceOptions options, rd_kafka_s* consumer, int32_t partitions)
    : options_(std::move(options)),
      consumer_(consumer),
      partitions_(partitions),
      watermarks_(partitions) {}

KafkaCdcSource::~KafkaCdcSource() {
  rd_kafka_consumer_close(consumer_);
  rd_kafka_destroy(consumer_);
}

absl::StatusOr<std::vector<CdcEvent>> KafkaCdcSource::Decode(std::string_view key,
                                                             std::string_view value) {
  switch (options_.protocol) {
    case KafkaProtocol::kCanalJson:
      return DecodeCanalJson(value);
    case KafkaProtocol::kOpenProtocol:
      return DecodeOpenProtocol(key, value);
    case KafkaProtocol::kSimple:
      return simple_.Decode(value);
  }
  return absl::InvalidArgumentError("kafka: unknown protocol");
}

absl::StatusOr<std::optional<KafkaMessageEvents>> KafkaCdcSource::Poll(
    std::chrono::milliseconds timeout) {
  rd_kafka_message_t* message =
      rd_kafka_consumer_poll(consumer_, static_cast<int>(timeout.count()));
  if (message == nullptr) return std::nullopt;
  std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> owned(
      message, rd_kafka_message_destroy);
  if (message->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return std::nullopt;
  if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        fmt::format("kafka: {}: {}", options_.topic, rd_kafka_message_errstr(message)));
  }
  KafkaMessageEvents out{message->partition, message->offset, {}};
  if (out.partition < 0 || out.partition >= partitions_) {
    return absl::InternalError(
        fmt::format("kafka: a message of unassigned partition {}", out.partition));
  }
  const std::string_view key(static_cast<const char*>(message->key), message->key_len);
  const std::string_view value(static_cast<const char*>(message->payload), message->len);
  absl::StatusOr<std::vector<CdcEvent>> events = Decode(key, value);
  if (!events.ok()) {
    ++rejected_messages_;
    return absl::Status(
        events.status().code(),
        fmt::format("kafka: {} partition {} offset {}: {}", options_.topic, out.partition,
                    out.offset, common::StdView(events.status().message())));
  }
  for (const CdcEvent& event : *events) {
    if (const auto* watermark = std::get_if<Watermark>(&event)) {
      watermarks_[out.partition].emplace_back(out.offset, watermark->ts);
    }
  }
  out.events = *std::move(events);
  return out;
}

absl::Status KafkaCdcSource::Acknowledge(Tso release_point) {
  rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(partitions_);
  std::vector<size_t> covered(partitions_, 0);
  for (int32_t p = 0; p < partitions_; ++p) {
    const auto& pending = watermarks_[p];
    while (covered[p] < pending.size() && pending[covered[p]].second <= release_point) ++covered[p];
    if (covered[p] > 0) {
      rd_kafka_topic_partition_list_add(offsets, options_.topic.c_str(), p)->offset =
          pending[covered[p] - 1].first + 1;
    }
  }
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (offsets->cnt > 0) err = rd_kafka_commit(consumer_, offsets, /*async=*/0);
  rd_kafka_topic_partition_list_destroy(offsets);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(fmt::format("kafka: cannot commit offsets of {}: {}",
                                              options_.topic, rd_kafka_err2str(err)));
  }
  for (int32_t p = 0; p < partitions_; ++p) {
    watermarks_[p].erase(watermarks_[p].begin(), watermarks_[p].begin() + covered[p]);
  }
  return absl::OkStatus();
}

}  // namespace isowatch::tidb
