// SPDX-License-Identifier: Apache-2.0
#include <chrono>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/kafka_source.h"
#include "collectors/tidb/txn_grouper.h"
#include "tests/unit/collectors/tidb/open_protocol_frames.h"

namespace isowatch::tidb {
namespace {

using ::testing::HasSubstr;
using testing::OpenProtocolKey;
using testing::OpenProtocolValue;

constexpr char kTopic[] = "ticdc";

// An in-process Kafka cluster (librdkafka's mock cluster) with one two-partition topic, and a
// producer to write TiCDC messages into it.
class MockKafka {
 public:
  MockKafka() {
    char error[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", error, sizeof(error));
    producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
    cluster_ = rd_kafka_mock_cluster_new(producer_, 1);
    rd_kafka_mock_topic_create(cluster_, kTopic, 2, 1);
    brokers_ = rd_kafka_mock_cluster_bootstraps(cluster_);
    rd_kafka_conf_t* producer_conf = rd_kafka_conf_new();
    rd_kafka_conf_set(producer_conf, "bootstrap.servers", brokers_.c_str(), error, sizeof(error));
    writer_ = rd_kafka_new(RD_KAFKA_PRODUCER, producer_conf, error, sizeof(error));
  }
  ~MockKafka() {
    rd_kafka_destroy(writer_);
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(producer_);
  }

  bool ok() const { return producer_ != nullptr && cluster_ != nullptr && writer_ != nullptr; }
  const std::string& brokers() const { return brokers_; }

  // Writes one message to `partition` and waits until the cluster has it.
  void Send(int32_t partition, const std::string& key, const std::string& value) {
    const rd_kafka_resp_err_t err =
        rd_kafka_producev(writer_, RD_KAFKA_V_TOPIC(kTopic), RD_KAFKA_V_PARTITION(partition),
                          RD_KAFKA_V_KEY(key.data(), key.size()),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    ASSERT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
    ASSERT_EQ(rd_kafka_flush(writer_, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  }

  // An open-protocol row message: table d.t, key column k.
  void SendRow(int32_t partition, Tso ts, int k, int v) {
    Send(partition, OpenProtocolKey({fmt::format(R"({{"ts":{},"scm":"d","tbl":"t","t":1}})", ts)}),
         OpenProtocolValue({fmt::format(
             R"({{"u":{{"k":{{"t":3,"h":true,"v":{}}},"v":{{"t":3,"v":{}}}}}}})", k, v)}));
  }
  // An open-protocol resolved event.
  void SendResolved(int32_t partition, Tso ts) {
    Send(partition, OpenProtocolKey({fmt::format(R"({{"ts":{},"t":3}})", ts)}),
         OpenProtocolValue({""}));
  }

 private:
  rd_kafka_t* producer_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  rd_kafka_t* writer_ = nullptr;
  std::string brokers_;
};

// Reads until `expected` messages (decoded or refused) have come, or 30 s have passed, then
// once more for half a second to see that nothing else comes; feeds `grouper`. Returns the
// number of messages decoded.
size_t Drain(KafkaCdcSource& source, TxnGrouper& grouper, size_t expected,
             std::vector<std::string>* errors) {
  size_t messages = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool settling = false;
  while (true) {
    if (!settling &&
        (messages + errors->size() >= expected || std::chrono::steady_clock::now() > deadline)) {
      settling = true;
    }
    auto polled = source.Poll(std::chrono::milliseconds(settling ? 500 : 100));
    if (!polled.ok()) {
      errors->push_back(std::string(polled.status().message()));
      continue;
    }
    if (!polled->has_value()) {
      if (settling) return messages;
      continue;
    }
    ++messages;
    for (CdcEvent& event : (*polled)->events) {
      EXPECT_TRUE(grouper.Add((*polled)->partition, std::move(event)).ok());
    }
  }
}

// Starts a source with `options`, reads `expected` messages (none refused) and returns what a
// two-stream grouper releases of them.
std::vector<CdcTxn> ReadAndRelease(const KafkaSourceOptions& options, size_t expected,
                                   size_t* pending) {
  auto source = KafkaCdcSource::Create(options);
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return {};
  TxnGrouper grouper(2);
  std::vector<std::string> errors;
  EXPECT_EQ(Drain(**source, grouper, expected, &errors), expected);
  EXPECT_TRUE(errors.empty());
  std::vector<CdcTxn> released = grouper.Release();
  *pending = grouper.pending_txns();
  return released;
}

// Transaction 100 with a row on each partition, then watermark 150; transaction 200 with a row on
// partition 1 only, then watermark 250: 3 messages on partition 0, 4 on partition 1.
void SendTwoTransactions(MockKafka& kafka) {
  kafka.SendRow(0, 100, 1, 10);
  kafka.SendRow(1, 100, 2, 20);
  kafka.SendResolved(0, 150);
  kafka.SendResolved(1, 150);
  kafka.SendRow(1, 200, 3, 30);
  kafka.SendResolved(0, 250);
  kafka.SendResolved(1, 250);
}

TEST(KafkaCdcSourceTest, ReadsEveryPartitionAndResumesAfterTheAcknowledgedWatermark) {
  MockKafka kafka;
  ASSERT_TRUE(kafka.ok());
  SendTwoTransactions(kafka);
  kafka.SendRow(0, 300, 4, 40);  // no watermark above it yet

  KafkaSourceOptions options{kafka.brokers(), kTopic, "isowatch-test",
                             KafkaProtocol::kOpenProtocol};
  {
    auto source = KafkaCdcSource::Create(options);
    ASSERT_TRUE(source.ok()) << source.status();
    ASSERT_EQ((*source)->partitions(), 2);
    TxnGrouper grouper(2);
    std::vector<std::string> errors;
    EXPECT_EQ(Drain(**source, grouper, 8, &errors), 8u);
    EXPECT_TRUE(errors.empty());
    const std::vector<CdcTxn> released = grouper.Release();
    ASSERT_EQ(released.size(), 2u);
    EXPECT_EQ(released[0].commit_ts, 100u);
    EXPECT_EQ(released[0].rows.size(), 2u);
    EXPECT_EQ(released[1].commit_ts, 200u);
    EXPECT_EQ(grouper.pending_txns(), 1u);
    // The daemon has acknowledged only what is below 150: the offsets move past the first
    // watermark of each partition, not past the second.
    ASSERT_TRUE((*source)->Acknowledge(150).ok());
  }
  // A restart re-reads from there: transaction 200 again (its rows follow the acknowledged
  // watermark), and 300.
  // Row 200 and watermark 250 on partition 1; watermark 250 and row 300 on partition 0.
  size_t pending = 0;
  const std::vector<CdcTxn> released = ReadAndRelease(options, 4, &pending);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].commit_ts, 200u);
  EXPECT_EQ(pending, 1u);
}

// Where a collector saved resume_offsets() it starts there, whatever another consumer of the
// group committed meanwhile.
TEST(KafkaCdcSourceTest, StartsAtTheGivenOffsetsRatherThanTheGroups) {
  MockKafka kafka;
  ASSERT_TRUE(kafka.ok());
  SendTwoTransactions(kafka);

  KafkaSourceOptions options{kafka.brokers(), kTopic, "isowatch-test",
                             KafkaProtocol::kOpenProtocol};
  std::vector<int64_t> saved;
  {
    auto source = KafkaCdcSource::Create(options);
    ASSERT_TRUE(source.ok()) << source.status();
    // Nothing committed yet: every partition from its start.
    EXPECT_THAT((*source)->resume_offsets(),
                ::testing::ElementsAre(KafkaCdcSource::kBeginning, KafkaCdcSource::kBeginning));
    TxnGrouper grouper(2);
    std::vector<std::string> errors;
    EXPECT_EQ(Drain(**source, grouper, 7, &errors), 7u);
    ASSERT_TRUE((*source)->Acknowledge(150).ok());
    // Past the first watermark of each partition.
    EXPECT_THAT((*source)->resume_offsets(), ::testing::ElementsAre(2, 2));
    saved = (*source)->resume_offsets();
  }
  {
    // Another consumer of the group moves its offsets to the ends.
    auto other = KafkaCdcSource::Create(options);
    ASSERT_TRUE(other.ok()) << other.status();
    TxnGrouper grouper(2);
    std::vector<std::string> errors;
    EXPECT_EQ(Drain(**other, grouper, 3, &errors), 3u);
    ASSERT_TRUE((*other)->Acknowledge(300).ok());
    EXPECT_THAT((*other)->resume_offsets(), ::testing::ElementsAre(3, 4));
  }
  // From the saved offsets: transaction 200 again, and both watermarks 250.
  options.start_offsets = saved;
  size_t pending = 0;
  const std::vector<CdcTxn> released = ReadAndRelease(options, 3, &pending);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].commit_ts, 200u);
  // Without them, from the group's offsets: nothing.
  options.start_offsets.clear();
  EXPECT_THAT(ReadAndRelease(options, 0, &pending), ::testing::IsEmpty());
}

TEST(KafkaCdcSourceTest, DecodesCanalJsonAndSimpleProtocolTopics) {
  for (const KafkaProtocol protocol : {KafkaProtocol::kCanalJson, KafkaProtocol::kSimple}) {
    MockKafka kafka;
    ASSERT_TRUE(kafka.ok());
    const bool canal = protocol == KafkaProtocol::kCanalJson;
    for (int32_t partition = 0; partition < 2; ++partition) {
      kafka.Send(partition, "",
                 canal ? fmt::format(R"({{"database":"d","table":"t","pkNames":["k"],)"
                                     R"("isDdl":false,"type":"INSERT","data":[{{"k":"{}"}}],)"
                                     R"("_tidb":{{"commitTs":100}}}})",
                                     partition)
                       : fmt::format(R"({{"version":1,"database":"d","table":"t","type":"INSERT",)"
                                     R"("commitTs":100,"data":{{"k":"{}"}}}})",
                                     partition));
      kafka.Send(partition, "",
                 canal ? R"({"type":"TIDB_WATERMARK","_tidb":{"watermarkTs":101}})"
                       : R"({"version":1,"type":"WATERMARK","commitTs":101})");
    }
    size_t pending = 0;
    const std::vector<CdcTxn> released = ReadAndRelease(
        KafkaSourceOptions{kafka.brokers(), kTopic, "isowatch-test", protocol}, 4, &pending);
    ASSERT_EQ(released.size(), 1u) << (canal ? "canal-json" : "simple");
    EXPECT_EQ(released[0].rows.size(), 2u);
    EXPECT_EQ(pending, 0u);
  }
}

TEST(KafkaCdcSourceTest, CountsAndReportsAMessageThatDoesNotDecode) {
  MockKafka kafka;
  ASSERT_TRUE(kafka.ok());
  kafka.Send(0, "not a key", "");
  kafka.SendResolved(0, 50);
  KafkaSourceOptions options{kafka.brokers(), kTopic, "isowatch-test",
                             KafkaProtocol::kOpenProtocol};
  auto source = KafkaCdcSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status();
  TxnGrouper grouper(2);
  std::vector<std::string> errors;
  EXPECT_EQ(Drain(**source, grouper, 2, &errors), 1u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("kafka: ticdc partition 0 offset 0: open-protocol"));
  EXPECT_EQ((*source)->rejected_messages(), 1u);
  EXPECT_EQ(grouper.stats().watermarks, 1u);
}

// A resume point past what a partition holds (the topic created again) or below its first
// offset (retention dropped messages) is refused with DATA_LOSS, not skipped.
TEST(KafkaCdcSourceTest, RefusesToResumeWhereMessagesAreGone) {
  MockKafka kafka;
  ASSERT_TRUE(kafka.ok());
  SendTwoTransactions(kafka);
  KafkaSourceOptions options{kafka.brokers(), kTopic, "isowatch-test",
                             KafkaProtocol::kOpenProtocol};
  options.start_offsets = {2, 2};
  ASSERT_TRUE(KafkaCdcSource::Create(options).ok());
  options.start_offsets = {2, 100};
  auto beyond = KafkaCdcSource::Create(options);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(beyond.status().message(), HasSubstr("partition 1 of ticdc resumes at offset 100"));
  // The mock cluster keeps a few MiB per partition and drops the oldest messages beyond.
  const std::string big(64 << 10, 'x');
  for (int i = 0; i < 200; ++i) kafka.Send(0, "", big);
  options.start_offsets = {0, 0};
  auto dropped = KafkaCdcSource::Create(options);
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dropped.status().message(), HasSubstr("were dropped (retention)"));
}

TEST(KafkaCdcSourceTest, RefusesATopicThatDoesNotExist) {
  MockKafka kafka;
  ASSERT_TRUE(kafka.ok());
  KafkaSourceOptions options{kafka.brokers(), "missing", "isowatch-test",
                             KafkaProtocol::kOpenProtocol};
  const auto source = KafkaCdcSource::Create(options);
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(source.status().message(), HasSubstr("no partitions of topic missing"));
}

}  // namespace
}  // namespace isowatch::tidb
