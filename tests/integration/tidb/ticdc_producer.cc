// SPDX-License-Identifier: Apache-2.0
//
// ticdc_producer (tests only): writes a history as TiCDC and its client would show it, for
// tidb_test.py. From a native history (`isowatch gen --format native-json`):
//  - the client log: every transaction with its start ts, reads, writes and outcome; a share of
//    the transactions with writes get an unknown outcome (commit ts dropped), as a client whose
//    COMMIT timed out records them;
//  - the changefeed: one canal-json message (with the TiDB extension) per row of the workload's
//    table (k, v, t = the writer's id) per committed transaction, the rows of each chunk of
//    transactions shuffled and spread over partitions by key, some sent twice (also after the
//    watermark that covers them, as a restarted TiCDC does), and after each chunk a watermark to
//    every partition. Into librdkafka's mock cluster (kept up until SIGTERM, its address written
//    to --brokers-file), or as a storage sink's directory (one data file per chunk, then the
//    `metadata` checkpoint).
// With --wall-clock, the history's timestamps are mapped (linearly, so in the same order) onto
// TiDB TSOs of the time the producer sends them: their physical part runs from the producer's
// start over the time its paced chunks take (--interval-ms each), and each chunk is sent when its
// time is over, so that the collector's lags (from a row's commit to its being durable in
// isowatchd) mean what they mean with a live TiDB.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "isowatch/formats/native.h"
#include "isowatch/v1/history.pb.h"

namespace {

namespace fs = std::filesystem;
using isowatch::v1::Operation;
using isowatch::v1::Transaction;

std::atomic<bool> g_stop{false};

struct Flags {
  std::string history;
  std::string client_log;
  std::string storage_dir;
  std::string brokers_file;
  std::string topic = "ticdc";
  int partitions = 3;
  std::string schema = "test";
  std::string table = "isowatch_kv";
  bool list = false;
  double unknown_rate = 0.05;
  double duplicate_rate = 0.05;
  size_t chunk = 100;
  int interval_ms = 0;
  bool wall_clock = false;
  int start_delay_ms = 0;
  // Kafka: the broker taken down after this chunk (-1: never) for broker_down_ms, and back up.
  int broker_down_after = -1;
  int broker_down_ms = 0;
  // With wall_clock: when the timestamps start (the TSO of timestamp 0).
  std::chrono::system_clock::time_point start;
  uint64_t seed = 1;
};

// Before chunk i: with --wall-clock, waits for the end of its time, as TiCDC sends rows after
// their commit.
void WaitForChunk(const Flags& f, size_t i) {
  if (f.wall_clock && f.interval_ms > 0) {
    std::this_thread::sleep_until(f.start + std::chrono::milliseconds(f.interval_ms) *
                                                static_cast<int64_t>(i + 1));
  }
}

// After a chunk, without --wall-clock: a pause of --interval-ms.
void PauseAfterChunk(const Flags& f) {
  if (!f.wall_clock && f.interval_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(f.interval_ms));
  }
}

std::string Id(const Transaction& t) {
  return t.id_case() == Transaction::kIdStr ? t.id_str() : std::to_string(t.id_int());
}

std::string Session(const Transaction& t) {
  return t.session_case() == Transaction::kSessionStr ? t.session_str()
                                                      : std::to_string(t.session_int());
}

bool Writes(const Transaction& t) {
  return std::any_of(t.ops().begin(), t.ops().end(), [](const Operation& op) {
    return op.kind() == Operation::WRITE || op.kind() == Operation::APPEND;
  });
}

uint64_t Commit(const Transaction& t) { return static_cast<uint64_t>(t.commit().physical()); }

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Message {
  int partition = 0;
  std::string key;
  std::string value;
};

// One canal-json row message, as TiCDC writes it with enable-tidb-extension.
std::string RowMessage(const Flags& f, const char* type, int64_t k, const std::string& v,
                       const std::string& id, uint64_t commit) {
  return fmt::format(
      R"({{"id":0,"database":{},"table":{},"pkNames":["k"],"isDdl":false,"type":"{}",)"
      R"("es":0,"ts":0,"sql":"","sqlType":{{"k":-5,"v":12,"t":12}},)"
      R"("mysqlType":{{"k":"bigint","v":"text","t":"varchar"}},"old":null,)"
      R"("data":[{{"k":"{}","v":{},"t":{}}}],"_tidb":{{"commitTs":{}}}}})",
      JsonString(f.schema), JsonString(f.table), type, k, JsonString(v), JsonString(id), commit);
}

std::string WatermarkMessage(uint64_t ts) {
  return fmt::format(
      R"({{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,)"
      R"("type":"TIDB_WATERMARK","es":0,"ts":0,"sql":"","sqlType":null,"mysqlType":null,)"
      R"("data":null,"old":null,"_tidb":{{"watermarkTs":{}}}}})",
      ts);
}

// The changefeed's messages, chunk by chunk: rows, then (Kafka) a watermark per partition.
struct Chunk {
  std::vector<Message> rows;
  uint64_t watermark = 0;
};

std::vector<Chunk> Encode(const Flags& f, std::vector<const Transaction*> committed,
                          uint64_t final_watermark, std::mt19937_64& rng) {
  std::sort(committed.begin(), committed.end(),
            [](const Transaction* a, const Transaction* b) { return Commit(*a) < Commit(*b); });
  std::map<int64_t, std::string> rows;  // key -> v as the table holds it
  std::vector<Chunk> chunks;
  std::bernoulli_distribution dup(f.duplicate_rate);
  std::vector<Message> previous;
  for (size_t i = 0; i < committed.size(); i += f.chunk) {
    Chunk c;
    const size_t end = std::min(committed.size(), i + f.chunk);
    for (size_t j = i; j < end; ++j) {
      const Transaction& t = *committed[j];
      std::map<int64_t, std::string> written;
      for (const Operation& op : t.ops()) {
        if (op.kind() != Operation::WRITE && op.kind() != Operation::APPEND) continue;
        const int64_t k = op.key().int_();
        const std::string v = std::to_string(op.value().int_());
        if (f.list) {
          std::string& list = rows[k];
          list = list.empty() ? v : list + "," + v;
          written[k] = list;
        } else {
          written[k] = v;
        }
      }
      for (const auto& [k, v] : written) {
        const bool update = !f.list ? rows.contains(k) : rows[k] != v;
        if (!f.list) rows[k] = v;
        Message m{.partition = static_cast<int>(static_cast<uint64_t>(k) % f.partitions),
                  .key = std::to_string(k),
                  .value = RowMessage(f, update ? "UPDATE" : "INSERT", k, v, Id(t), Commit(t))};
        if (dup(rng)) c.rows.push_back(m);
        c.rows.push_back(std::move(m));
      }
    }
    // A restarted TiCDC sends again what followed its last checkpoint: a few rows of the chunk
    // before, already covered by a watermark.
    for (const Message& m : previous) {
      if (dup(rng)) c.rows.push_back(m);
    }
    std::shuffle(c.rows.begin(), c.rows.end(), rng);
    previous = c.rows;
    c.watermark = end < committed.size() ? Commit(*committed[end]) : final_watermark;
    chunks.push_back(std::move(c));
  }
  if (chunks.empty()) chunks.push_back(Chunk{.watermark = final_watermark});
  return chunks;
}

int WriteClientLog(const Flags& f, std::vector<Transaction>& txns) {
  std::ofstream out(f.client_log);
  google::protobuf::util::JsonPrintOptions json;
  std::string line;
  isowatch::v1::HistoryRecord header;
  header.mutable_header()->set_version(isowatch::formats::kNativeFormatVersion);
  (*header.mutable_header()->mutable_metadata())["producer"] = "ticdc_producer";
  if (!google::protobuf::util::MessageToJsonString(header, &line, json).ok()) return 1;
  out << line << "\n";
  for (const Transaction& t : txns) {
    isowatch::v1::HistoryRecord r;
    *r.mutable_txn() = t;
    line.clear();
    if (!google::protobuf::util::MessageToJsonString(r, &line, json).ok()) return 1;
    out << line << "\n";
  }
  return out.good() ? 0 : 1;
}

void WriteFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp, std::ios::binary) << content;
  fs::rename(tmp, path);
}

int ToStorage(const Flags& f, const std::vector<Chunk>& chunks) {
  const fs::path root(f.storage_dir);
  const uint64_t version = 1;
  WriteFile(root / f.schema / f.table / "meta" / "schema_1_0000000000.json",
            fmt::format(R"({{"Table":{},"Schema":{},"Version":1,"TableVersion":{},"Query":"",)"
                        R"("TableColumns":[{{"ColumnName":"k","ColumnType":"BIGINT",)"
                        R"("ColumnIsPk":"true"}},{{"ColumnName":"v","ColumnType":"TEXT"}},)"
                        R"({{"ColumnName":"t","ColumnType":"VARCHAR"}}],"TableColumnsTotal":"3"}})",
                        JsonString(f.table), JsonString(f.schema), version));
  for (size_t i = 0; i < chunks.size() && !g_stop.load(); ++i) {
    WaitForChunk(f, i);
    std::string content;
    for (const Message& m : chunks[i].rows) content += m.value + "\n";
    WriteFile(
        root / f.schema / f.table / std::to_string(version) / fmt::format("CDC{:020}.json", i + 1),
        content);
    WriteFile(root / "metadata", fmt::format(R"({{"checkpoint-ts":{}}})", chunks[i].watermark));
    PauseAfterChunk(f);
  }
  return 0;
}

int ToKafka(const Flags& f, const std::vector<Chunk>& chunks) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "0", error, sizeof(error));
  rd_kafka_t* holder = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
  if (holder == nullptr) {
    fmt::print(stderr, "ticdc_producer: {}\n", error);
    return 1;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(holder, 1);
  rd_kafka_mock_topic_create(cluster, f.topic.c_str(), f.partitions, 1);
  const std::string brokers = rd_kafka_mock_cluster_bootstraps(cluster);
  rd_kafka_conf_t* pconf = rd_kafka_conf_new();
  rd_kafka_conf_set(pconf, "bootstrap.servers", brokers.c_str(), error, sizeof(error));
  rd_kafka_conf_set(pconf, "log_level", "0", error, sizeof(error));
  rd_kafka_t* writer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, error, sizeof(error));
  int status = writer == nullptr ? 1 : 0;
  auto send = [&](int partition, const std::string& key, const std::string& value) {
    rd_kafka_resp_err_t err;
    while ((err = rd_kafka_producev(writer, RD_KAFKA_V_TOPIC(f.topic.c_str()),
                                    RD_KAFKA_V_PARTITION(partition),
                                    RD_KAFKA_V_KEY(key.data(), key.size()),
                                    RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
           RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(writer, 10);
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) status = 1;
  };
  // With --wall-clock the cluster is announced before the first chunk's time, for the collector
  // to be reading when it comes; otherwise once it holds the first chunk.
  bool announced = false;
  auto announce = [&] {
    std::ofstream(f.brokers_file + ".tmp") << brokers << "\n";
    fs::rename(f.brokers_file + ".tmp", f.brokers_file);
    announced = true;
  };
  if (f.wall_clock) announce();
  for (size_t i = 0; status == 0 && i < chunks.size() && !g_stop.load(); ++i) {
    WaitForChunk(f, i);
    for (const Message& m : chunks[i].rows) send(m.partition, m.key, m.value);
    for (int p = 0; p < f.partitions; ++p) send(p, "", WatermarkMessage(chunks[i].watermark));
    if (rd_kafka_flush(writer, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR) status = 1;
    if (!announced) announce();
    if (static_cast<int>(i) == f.broker_down_after) {
      // The broker goes away (connections dropped, none accepted) and comes back with its log.
      rd_kafka_mock_broker_set_down(cluster, 1);
      fmt::print("ticdc_producer: broker down after chunk {} for {} ms\n", i, f.broker_down_ms);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(f.broker_down_ms));
      rd_kafka_mock_broker_set_up(cluster, 1);
    }
    PauseAfterChunk(f);
  }
  // The mock cluster keeps a few MiB per partition and drops the oldest messages beyond: a
  // changefeed with a hole would test nothing.
  for (int p = 0; status == 0 && p < f.partitions; ++p) {
    int64_t low = 0;
    int64_t high = 0;
    if (rd_kafka_query_watermark_offsets(writer, f.topic.c_str(), p, &low, &high, 10000) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        low != 0) {
      fmt::print(stderr,
                 "ticdc_producer: partition {} starts at offset {}: the mock cluster dropped the "
                 "oldest messages; use fewer transactions or more partitions\n",
                 p, low);
      status = 1;
    }
  }
  if (status == 0) {
    fmt::print("ticdc_producer: {} chunks in the mock cluster at {}\n", chunks.size(), brokers);
    std::fflush(stdout);
  }
  // The cluster lives in this process: keep it up for the collector until told to stop.
  while (status == 0 && !g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (writer != nullptr) rd_kafka_destroy(writer);
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(holder);
  return status;
}

// Maps every timestamp of `txns` onto a TSO (physical milliseconds << 18): the timestamps from 0
// to `max_ts` onto the milliseconds from `start` to `duration_ms` later, linearly.
void MapToWallClock(std::vector<Transaction>& txns, uint64_t max_ts,
                    std::chrono::system_clock::time_point start, int64_t duration_ms) {
  const auto base =
      static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(start.time_since_epoch()).count())
      << 18;
  const uint64_t span = (static_cast<uint64_t>(std::max<int64_t>(duration_ms, 1)) << 18);
  const uint64_t scale = std::max<uint64_t>(1, span / std::max<uint64_t>(max_ts, 1));
  auto map = [&](isowatch::v1::Timestamp* ts) {
    ts->set_physical(static_cast<int64_t>(base + static_cast<uint64_t>(ts->physical()) * scale));
  };
  for (Transaction& t : txns) {
    map(t.mutable_start());
    if (t.has_commit()) map(t.mutable_commit());
  }
}

}  // namespace

// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  std::signal(SIGTERM, [](int) { g_stop.store(true); });
  std::signal(SIGINT, [](int) { g_stop.store(true); });
  CLI::App app("ticdc_producer: a history as TiCDC and its client would show it (tests only)");
  Flags f;
  std::string data = "kv";
  app.add_option("--history", f.history, "Native history to encode")->required();
  app.add_option("--client-log", f.client_log, "Client log to write")->required();
  app.add_option("--storage-dir", f.storage_dir, "Write a storage sink's directory here");
  app.add_option("--brokers-file", f.brokers_file, "Kafka: write the mock cluster's address here");
  app.add_option("--topic", f.topic, "Kafka topic");
  app.add_option("--partitions", f.partitions, "Kafka partitions")->check(CLI::Range(1, 64));
  app.add_option("--schema", f.schema, "Database of the table");
  app.add_option("--table", f.table, "Table");
  app.add_option("--data", data, "kv or list")->check(CLI::IsMember({"kv", "list"}));
  app.add_option("--unknown-rate", f.unknown_rate, "Share of writers recorded as unknown");
  app.add_option("--duplicate-rate", f.duplicate_rate, "Share of rows sent twice");
  app.add_option("--chunk", f.chunk, "Transactions between watermarks")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--interval-ms", f.interval_ms, "Pause after each chunk");
  app.add_option("--seed", f.seed, "Random seed");
  app.add_flag("--wall-clock", f.wall_clock,
               "Map the timestamps onto TSOs of the time the chunks are sent");
  app.add_option("--broker-down-after", f.broker_down_after,
                 "Kafka: take the broker down after this chunk, for --broker-down-ms");
  app.add_option("--broker-down-ms", f.broker_down_ms, "How long the broker stays down");
  app.add_option("--start-delay-ms", f.start_delay_ms,
                 "With --wall-clock: announce the cluster at once, send the first chunk this "
                 "much later (for a collector to start meanwhile)");
  CLI11_PARSE(app, argc, argv);
  f.list = data == "list";
  if (f.storage_dir.empty() == f.brokers_file.empty()) {
    fmt::print(stderr, "ticdc_producer: give --storage-dir or --brokers-file\n");
    return 2;
  }
  absl::StatusOr<isowatch::history::History> h = isowatch::formats::ReadNativeFile(f.history, {});
  if (!h.ok()) {
    fmt::print(stderr, "ticdc_producer: {}\n", h.status().ToString());
    return 1;
  }
  std::vector<Transaction> txns(h->size());
  for (size_t i = 0; i < h->size(); ++i) {
    if (!isowatch::formats::EncodeTxn(*h, isowatch::TxnId(i), &txns[i]).ok()) return 1;
  }
  std::mt19937_64 rng(f.seed);
  uint64_t max_ts = 0;
  size_t writers = 0;
  for (const Transaction& t : txns) {
    max_ts = std::max<uint64_t>({max_ts, static_cast<uint64_t>(t.start().physical()), Commit(t)});
    if (t.status() == Transaction::COMMITTED && Writes(t)) ++writers;
  }
  if (f.wall_clock) {
    const size_t chunks = (writers + f.chunk - 1) / f.chunk;
    f.start = std::chrono::system_clock::now() + std::chrono::milliseconds(f.start_delay_ms);
    MapToWallClock(txns, max_ts, f.start, static_cast<int64_t>(chunks) * f.interval_ms);
    max_ts = 0;
    for (const Transaction& t : txns) {
      max_ts = std::max<uint64_t>({max_ts, static_cast<uint64_t>(t.start().physical()), Commit(t)});
    }
  }
  std::vector<const Transaction*> committed;
  for (const Transaction& t : txns) {
    if (t.status() == Transaction::COMMITTED && Writes(t)) committed.push_back(&t);
  }
  const std::vector<Chunk> chunks = Encode(f, committed, max_ts + 2, rng);
  // The client log: some writers' outcomes unknown. Only where the session's next transaction
  // starts after the commit, as a client that gave up on a COMMIT starts its next one later.
  std::map<std::string, std::vector<size_t>> sessions;
  for (size_t i = 0; i < txns.size(); ++i) sessions[Session(txns[i])].push_back(i);
  std::vector<Transaction> log = txns;
  std::bernoulli_distribution unknown(f.unknown_rate);
  size_t unknowns = 0;
  for (const auto& [name, order] : sessions) {
    for (size_t j = 0; j < order.size(); ++j) {
      Transaction& t = log[order[j]];
      if (!Writes(t) || !unknown(rng)) continue;
      const bool later = j + 1 == order.size() ||
                         static_cast<uint64_t>(txns[order[j + 1]].start().physical()) > Commit(t);
      if (t.status() == Transaction::COMMITTED && !later) continue;
      t.set_status(Transaction::UNKNOWN);
      t.clear_commit();
      ++unknowns;
    }
  }
  if (WriteClientLog(f, log) != 0) {
    fmt::print(stderr, "ticdc_producer: cannot write {}\n", f.client_log);
    return 1;
  }
  fmt::print("ticdc_producer: {} transactions, {} committed writers, {} unknown, {} chunks\n",
             txns.size(), committed.size(), unknowns, chunks.size());
  std::fflush(stdout);
  return f.storage_dir.empty() ? ToKafka(f, chunks) : ToStorage(f, chunks);
}
