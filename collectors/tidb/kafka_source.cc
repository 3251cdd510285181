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
  // Where each partition starts: as given, else where the group's committed offset says, else
  // at its start.
  std::vector<int64_t> start(partitions, RD_KAFKA_OFFSET_INVALID);
  std::vector<int64_t> committed(partitions, RD_KAFKA_OFFSET_INVALID);
  rd_kafka_topic_partition_list_t* stored = rd_kafka_topic_partition_list_new(partitions);
  for (int32_t p = 0; p < partitions; ++p) {
    if (static_cast<size_t>(p) < options.start_offsets.size()) {
      start[p] = options.start_offsets[p];
    } else {
      rd_kafka_topic_partition_list_add(stored, options.topic.c_str(), p);
    }
  }
  if (stored->cnt > 0) {
    const rd_kafka_resp_err_t fetched = rd_kafka_committed(consumer, stored, kMetadataTimeoutMs);
    for (int i = 0; fetched == RD_KAFKA_RESP_ERR_NO_ERROR && i < stored->cnt; ++i) {
      const rd_kafka_topic_partition_t& e = stored->elems[i];
      if (e.err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
      committed[e.partition] = e.offset;
      if (e.offset >= 0) start[e.partition] = e.offset;
    }
    if (fetched != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_topic_partition_list_destroy(stored);
      rd_kafka_destroy(consumer);
      return absl::UnavailableError(
          fmt::format("kafka: cannot read the offsets group {} committed on {}: {}",
                      options.group_id, options.topic, rd_kafka_err2str(fetched)));
    }
  }
  rd_kafka_topic_partition_list_destroy(stored);
  // A resume point outside what its partition holds means that messages nobody acknowledged to
  // the daemon are gone (retention, or the topic created again): refused, never skipped.
  for (int32_t p = 0; p < partitions; ++p) {
    if (start[p] < 0) continue;
    int64_t low = 0;
    int64_t high = 0;
    const rd_kafka_resp_err_t queried = rd_kafka_query_watermark_offsets(
        consumer, options.topic.c_str(), p, &low, &high, kMetadataTimeoutMs);
    if (queried != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_destroy(consumer);
      return absl::UnavailableError(
          fmt::format("kafka: cannot read the offsets {} partition {} holds: {}", options.topic, p,
                      rd_kafka_err2str(queried)));
    }
    if (start[p] < low || start[p] > high) {
      rd_kafka_destroy(consumer);
      return absl::DataLossError(fmt::format(
          "kafka: partition {} of {} resumes at offset {}, but it holds offsets {} to {}: {}; "
          "what the collector had not made durable in isowatchd is lost, so start a new stream "
          "(--stream) with a new state directory",
          p, options.topic, start[p], low, high,
          start[p] < low ? fmt::format("{} messages were dropped (retention)", low - start[p])
                         : std::string("the topic is not the one read before (created again?)")));
    }
  }
  rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(partitions);
  for (int32_t p = 0; p < partitions; ++p) {
    if (start[p] < 0) start[p] = kBeginning;
    rd_kafka_topic_partition_list_add(assignment, options.topic.c_str(), p)->offset = start[p];
  }
  const rd_kafka_resp_err_t assigned = rd_kafka_assign(consumer, assignment);
  rd_kafka_topic_partition_list_destroy(assignment);
  if (assigned != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_destroy(consumer);
    return absl::UnavailableError(
        fmt::format("kafka: cannot assign {}: {}", options.topic, rd_kafka_err2str(assigned)));
  }
  return std::unique_ptr<KafkaCdcSource>(
      new KafkaCdcSource(std::move(options), consumer, std::move(start), std::move(committed)));
}

KafkaCdcSource::KafkaCdcSource(KafkaSourceOptions options, rd_kafka_s* consumer,
                               std::vector<int64_t> start, std::vector<int64_t> committed)
    : options_(std::move(options)),
      consumer_(consumer),
      partitions_(static_cast<int32_t>(start.size())),
      watermarks_(start.size()),
      resume_offsets_(std::move(start)),
      committed_(std::move(committed)) {}

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
  for (int32_t p = 0; p < partitions_; ++p) {
    auto& pending = watermarks_[p];
    size_t covered = 0;
    while (covered < pending.size() && pending[covered].second <= release_point) ++covered;
    if (covered == 0) continue;
    resume_offsets_[p] = pending[covered - 1].first + 1;
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(covered));
  }
  rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(partitions_);
  for (int32_t p = 0; p < partitions_; ++p) {
    if (resume_offsets_[p] >= 0 && resume_offsets_[p] != committed_[p]) {
      rd_kafka_topic_partition_list_add(offsets, options_.topic.c_str(), p)->offset =
          resume_offsets_[p];
    }
  }
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (offsets->cnt > 0) err = rd_kafka_commit(consumer_, offsets, /*async=*/0);
  for (int i = 0; i < offsets->cnt; ++i) {
    const rd_kafka_topic_partition_t& e = offsets->elems[i];
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = e.err;
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) committed_[e.partition] = e.offset;
  }
  rd_kafka_topic_partition_list_destroy(offsets);
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return absl::OkStatus();
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
      return absl::FailedPreconditionError(fmt::format(
          "kafka: group {} refuses the offsets of {} ({}): the group has members, another "
          "consumer subscribed to it; give the collector a group of its own",
          options_.group_id, options_.topic, rd_kafka_err2str(err)));
    default:
      return absl::UnavailableError(fmt::format("kafka: cannot commit offsets of {}: {}",
                                                options_.topic, rd_kafka_err2str(err)));
  }
}

}  // namespace isowatch::tidb
