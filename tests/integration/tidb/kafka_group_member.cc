// SPDX-License-Identifier: Apache-2.0
//
// kafka_group_member (tests only): a second consumer of a consumer group, for tidb_test.py's
// `rebalance` case. It joins the group (subscribes to the topic, so the group rebalances and
// assigns it partitions), reads every assigned partition to its end, commits the end offsets
// (moving the group's offsets past whatever another consumer of the group has acknowledged),
// stays a while, and leaves the group (another rebalance). It prints one JSON line: the
// partitions it was assigned, the offsets it committed and the commit's error, if any.
#include <chrono>
#include <cstdio>
#include <librdkafka/rdkafka.h>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace {

struct Flags {
  std::string brokers;
  std::string topic;
  std::string group;
  int linger_ms = 1000;
  int timeout_s = 60;
};

bool Set(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char error[512];
  if (rd_kafka_conf_set(conf, name, value.c_str(), error, sizeof(error)) != RD_KAFKA_CONF_OK) {
    fmt::print(stderr, "kafka_group_member: {}={}: {}\n", name, value, error);
    return false;
  }
  return true;
}

int Run(const Flags& f) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] :
       std::map<std::string, std::string>{{"bootstrap.servers", f.brokers},
                                          {"group.id", f.group},
                                          {"enable.auto.commit", "false"},
                                          {"enable.partition.eof", "true"},
                                          {"auto.offset.reset", "earliest"},
                                          {"session.timeout.ms", "6000"},
                                          {"log_level", "3"}}) {
    if (!Set(conf, name.c_str(), value)) return 2;
  }
  char error[512];
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof(error));
  if (consumer == nullptr) {
    fmt::print(stderr, "kafka_group_member: {}\n", error);
    return 1;
  }
  rd_kafka_poll_set_consumer(consumer);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, f.topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t err = rd_kafka_subscribe(consumer, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    fmt::print(stderr, "kafka_group_member: subscribe: {}\n", rd_kafka_err2str(err));
    rd_kafka_destroy(consumer);
    return 1;
  }
  // Read until the group has assigned partitions and each of them reached its end.
  std::set<int32_t> assigned;
  std::set<int32_t> at_end;
  size_t messages = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.timeout_s);
  while (std::chrono::steady_clock::now() < deadline &&
         (assigned.empty() || at_end.size() < assigned.size())) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 100);
    rd_kafka_topic_partition_list_t* a = nullptr;
    if (rd_kafka_assignment(consumer, &a) == RD_KAFKA_RESP_ERR_NO_ERROR && a != nullptr) {
      for (int i = 0; i < a->cnt; ++i) assigned.insert(a->elems[i].partition);
      rd_kafka_topic_partition_list_destroy(a);
    }
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      at_end.insert(m->partition);
    } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++messages;
    }
    rd_kafka_message_destroy(m);
  }
  // Commit each assigned partition's end.
  rd_kafka_topic_partition_list_t* offsets =
      rd_kafka_topic_partition_list_new(static_cast<int>(assigned.size()));
  std::string committed;
  for (int32_t p : assigned) {
    int64_t low = 0;
    int64_t high = 0;
    if (rd_kafka_query_watermark_offsets(consumer, f.topic.c_str(), p, &low, &high, 10000) !=
        RD_KAFKA_RESP_ERR_NO_ERROR) {
      continue;
    }
    rd_kafka_topic_partition_list_add(offsets, f.topic.c_str(), p)->offset = high;
    committed += fmt::format("{}\"{}\":{}", committed.empty() ? "" : ",", p, high);
  }
  err =
      offsets->cnt > 0 ? rd_kafka_commit(consumer, offsets, /*async=*/0) : RD_KAFKA_RESP_ERR__STATE;
  rd_kafka_topic_partition_list_destroy(offsets);
  std::string partitions;
  for (int32_t p : assigned) partitions += fmt::format("{}{}", partitions.empty() ? "" : ",", p);
  fmt::print("{{\"assigned\":[{}],\"messages\":{},\"committed\":{{{}}},\"commit_error\":\"{}\"}}\n",
             partitions, messages, committed,
             err == RD_KAFKA_RESP_ERR_NO_ERROR ? "" : rd_kafka_err2str(err));
  std::fflush(stdout);
  // Stay a member a while, then leave the group.
  const auto leave = std::chrono::steady_clock::now() + std::chrono::milliseconds(f.linger_ms);
  while (std::chrono::steady_clock::now() < leave) {
    if (rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 50)) rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  return assigned.empty() || err != RD_KAFKA_RESP_ERR_NO_ERROR ? 1 : 0;
}

}  // namespace

// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  CLI::App app("kafka_group_member: joins a consumer group, commits the ends, leaves (tests only)");
  Flags f;
  app.add_option("--brokers", f.brokers, "Bootstrap servers")->required();
  app.add_option("--topic", f.topic, "Topic to subscribe to")->required();
  app.add_option("--group", f.group, "Consumer group to join")->required();
  app.add_option("--linger-ms", f.linger_ms, "How long to stay in the group after committing");
  app.add_option("--timeout-s", f.timeout_s, "Longest wait for an assignment and the ends");
  CLI11_PARSE(app, argc, argv);
  return Run(f);
}
