// SPDX-License-Identifier: Apache-2.0
// DaemonTest, for the daemon tests: isowatchd in-process (monitor::Daemon on free ports, a
// temporary store), the transactions and batches they push and the HTTP API they read.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <fmt/format.h>
#include <grpcpp/channel.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "isowatch/config/config.h"
#include "isowatch/ingest/client.h"
#include "isowatch/monitor/daemon.h"
#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.grpc.pb.h"
#include "isowatch/v1/ingest.pb.h"

#include "tests/testing/fake_clock.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/server/http_test_client.h"

namespace isowatch::monitor {

inline constexpr absl::Duration kWait = absl::Seconds(60);
inline constexpr char kVersion[] = "0.0.0-test";

// A fresh data directory, removed at the end.
class TempDir : public isowatch::testing::TempDir {
 public:
  TempDir() : isowatch::testing::TempDir("isowatch-daemon-test") {}
};

// --- transactions -----------------------------------------------------------------------------
// Every transaction has its own session and the interval [10 id, 10 id + 5]: transactions never
// overlap, so the only anomalies are the reads of values nobody wrote (EXT, kind never).

inline v1::Transaction Txn(int64_t id) {
  v1::Transaction t;
  t.set_id_int(id);
  t.set_session_int(id);
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_start()->set_physical(10 * id);
  t.mutable_commit()->set_physical(10 * id + 5);
  return t;
}

// Transaction `id` with one operation of `kind` on `key` with `value`.
inline v1::Transaction OneOp(int64_t id, v1::Operation::Kind kind, int64_t key, int64_t value) {
  v1::Transaction t = Txn(id);
  v1::Operation* op = t.add_ops();
  op->set_kind(kind);
  op->mutable_key()->set_int_(key);
  op->mutable_value()->set_int_(value);
  return t;
}

inline v1::Transaction Writer(int64_t id, int64_t key, int64_t value) {
  return OneOp(id, v1::Operation::WRITE, key, value);
}

inline v1::Transaction Reader(int64_t id, int64_t key, int64_t value) {
  return OneOp(id, v1::Operation::READ, key, value);
}

inline v1::IngestBatch Batch(std::string_view stream, uint64_t seq,
                             std::vector<v1::Transaction> txns) {
  v1::IngestBatch b;
  b.set_stream(std::string(stream));
  b.set_seq(seq);
  for (v1::Transaction& t : txns) *b.add_txns() = std::move(t);
  return b;
}

// --- the daemon and its HTTP API -----------------------------------------------------------------

inline config::DaemonConfig TestConfig(const std::string& data_dir) {
  config::DaemonConfig c;
  c.data_dir = data_dir;
  c.grpc.port = 0;
  c.http.port = 0;
  return c;
}

// A violation as compared across the daemon and the expectations.
struct Seen {
  std::string id;
  std::string checker;
  std::string anomaly;
  std::string ext_kind;
  std::string txns;  // the JSON array, as text
  std::string key;   // the JSON value, as text
};

inline std::string ToJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  v.Accept(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

inline std::string MemberString(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject() || !v.HasMember(name) || !v[name].IsString()) return "";
  return std::string(v[name].GetString(), v[name].GetStringLength());
}

// A metric's sample in the Prometheus text format: `series` is the name with its labels as
// rendered (`isowatch_refused_transactions_total{reason="missing_id"}`).
inline std::optional<double> Sample(const std::string& text, std::string_view series) {
  std::istringstream in(text);
  std::string line;
  const std::string prefix = std::string(series) + " ";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
  }
  return std::nullopt;
}

class DaemonTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (daemon_ != nullptr) daemon_->Shutdown();
  }

  // Starts a daemon on `config`; with `clock` (clock_), every reading of time the monitor makes
  // is the clock's (the engine thread then ticks only when the clock moves or Tick asks it to).
  void Start(const config::DaemonConfig& config, testing::FakeClock* clock = nullptr) {
    auto d = Daemon::Start(config, kVersion, clock);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    ASSERT_GT(daemon_->grpc_port(), 0);
    ASSERT_GT(daemon_->http_port(), 0);
    channel_ = ingest::MakeIngestChannel(fmt::format("127.0.0.1:{}", daemon_->grpc_port()),
                                         ClientOptions());
    stub_ = v1::Ingest::NewStub(channel_);
  }

  // Waits until the engine thread has taken a tick after every batch acknowledged so far: they
  // are applied, what became final is stored, the status and the metrics are refreshed.
  void Tick() { ASSERT_TRUE(daemon_->monitor().AwaitTickForTest(kWait)); }

  void Stop() {
    stub_.reset();
    channel_.reset();
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
  }

  static ingest::ClientOptions ClientOptions() {
    ingest::ClientOptions o;
    o.initial_backoff = absl::Milliseconds(20);
    o.max_backoff = absl::Milliseconds(500);
    o.deadline = kWait;
    return o;
  }

  absl::StatusOr<v1::IngestAck> Push(const v1::IngestBatch& batch) {
    return ingest::PushBatch(*stub_, batch, ClientOptions());
  }

  // Ends `stream` with its second batch: the writer of key 1 (transaction 1, value 100) with
  // watermark 25; waits until the stream is checked and gives its violations.
  void FinishWithWriter(const std::string& stream, std::optional<std::vector<Seen>>* seen) {
    v1::IngestBatch second = Batch(stream, 2, {Writer(1, 1, 100)});
    second.mutable_watermark()->set_physical(25);
    second.set_end_of_stream(true);
    absl::StatusOr<v1::IngestAck> ack = Push(second);
    ASSERT_TRUE(ack.ok()) << ack.status();
    ASSERT_TRUE(WaitChecked(stream));
    *seen = Violations();
  }

  // Pushes each batch, expecting it accepted whole, then waits until `stream` is checked.
  void PushAllAndWait(std::initializer_list<v1::IngestBatch> batches, const std::string& stream) {
    for (const v1::IngestBatch& b : batches) {
      absl::StatusOr<v1::IngestAck> ack = Push(b);
      ASSERT_TRUE(ack.ok()) << ack.status();
      EXPECT_EQ(ack->refusals_size(), 0);
    }
    ASSERT_TRUE(WaitChecked(stream));
  }

  std::optional<server::testing::ClientResponse> Get(std::string_view target) {
    server::testing::HttpTestClient http(static_cast<uint16_t>(daemon_->http_port()));
    if (!http.connected()) return std::nullopt;
    return http.Get(target, /*keep_alive=*/false);
  }

  std::string Metrics() {
    auto r = Get("/metrics");
    return r && r->status == 200 ? r->body : "";
  }

  // /api/v1/status, parsed; an empty document when it cannot be had.
  std::unique_ptr<rapidjson::Document> Status() {
    auto doc = std::make_unique<rapidjson::Document>();
    auto r = Get("/api/v1/status");
    if (!r || r->status != 200) return doc;
    doc->Parse(r->body.data(), r->body.size());
    if (doc->HasParseError()) doc->SetNull();
    return doc;
  }

  // The stream's entry in /api/v1/status: each member as JSON text; nullopt when absent.
  std::optional<std::map<std::string, std::string>> StreamStatus(std::string_view name) {
    std::unique_ptr<rapidjson::Document> doc = Status();
    if (!doc->IsObject() || !doc->HasMember("streams") || !(*doc)["streams"].IsArray()) {
      return std::nullopt;
    }
    for (const rapidjson::Value& s : (*doc)["streams"].GetArray()) {
      if (MemberString(s, "name") != name) continue;
      std::map<std::string, std::string> out;
      for (auto it = s.MemberBegin(); it != s.MemberEnd(); ++it) {
        out[std::string(it->name.GetString(), it->name.GetStringLength())] = ToJson(it->value);
      }
      return out;
    }
    return std::nullopt;
  }

  // Waits until /api/v1/status says at least `n` windows are done.
  bool WindowsDone(uint64_t n) {
    return WaitFor([&] {
      std::unique_ptr<rapidjson::Document> d = Status();
      return d->IsObject() && d->HasMember("windows") && (*d)["windows"]["done"].GetUint64() >= n;
    });
  }

  // Waits until the stream is closed and nothing of it is pending.
  bool WaitChecked(std::string_view stream) {
    return WaitFor([&] {
      auto s = StreamStatus(stream);
      return s && (*s)["closed"] == "true" && (*s)["pending_transactions"] == "0";
    });
  }

  // Tries `done` until it holds or kWait passes, and returns its last answer. Each try after the
  // first follows one more tick of the engine thread, after which the status and the metrics are
  // refreshed (a fake clock, which does not move by itself, does not hold the ticks back).
  template <typename F>
  bool WaitFor(F done) {
    const absl::Time deadline = absl::Now() + kWait;
    while (!done()) {
      if (absl::Now() > deadline || !daemon_->monitor().AwaitTickForTest(kWait)) return done();
    }
    return true;
  }

  // Every page of /api/v1/violations (pages of `limit`), or nullopt on any error.
  std::optional<std::vector<Seen>> Violations(int limit = 2, std::string_view filter = "") {
    std::vector<Seen> out;
    std::string token;
    for (int page = 0; page < 10'000; ++page) {
      std::string target = fmt::format("/api/v1/violations?limit={}{}", limit, filter);
      if (!token.empty()) target += "&page_token=" + token;
      auto r = Get(target);
      if (!r || r->status != 200) {
        ADD_FAILURE() << target << ": " << (r ? r->body : "no answer");
        return std::nullopt;
      }
      rapidjson::Document doc;
      doc.Parse(r->body.data(), r->body.size());
      if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("violations") ||
          !doc["violations"].IsArray()) {
        ADD_FAILURE() << "bad answer: " << r->body;
        return std::nullopt;
      }
      for (const rapidjson::Value& v : doc["violations"].GetArray()) {
        Seen s;
        s.id = MemberString(v, "id");
        s.checker = MemberString(v, "checker");
        s.anomaly = MemberString(v, "anomaly");
        s.ext_kind = MemberString(v, "ext_kind");
        if (v.HasMember("txns")) s.txns = ToJson(v["txns"]);
        if (v.HasMember("key")) s.key = ToJson(v["key"]);
        out.push_back(std::move(s));
      }
      token = MemberString(doc, "next_page_token");
      if (token.empty()) return out;
    }
    ADD_FAILURE() << "too many pages";
    return std::nullopt;
  }

  testing::FakeClock clock_;  // for tests that give it to the daemon; outlives it
  std::unique_ptr<Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

// A violation as (anomaly, ext_kind, txns, key), the last two as JSON text.
using Brief = std::tuple<std::string, std::string, std::string, std::string>;

// The brief of each violation; checks that no id is served twice.
inline std::multiset<Brief> Summary(const std::vector<Seen>& seen) {
  std::multiset<Brief> out;
  std::set<std::string> ids;
  for (const Seen& s : seen) {
    EXPECT_FALSE(s.id.empty());
    EXPECT_TRUE(ids.insert(s.id).second) << "violation " << s.id << " served twice";
    out.emplace(s.anomaly, s.ext_kind, s.txns, s.key);
  }
  return out;
}

// The violation of reader `id` that read an unwritten value of `key`.
inline Brief ExtNever(int64_t id, int64_t key) {
  return {"EXT", "never", fmt::format("[{}]", id), fmt::format("{}", key)};
}

}  // namespace isowatch::monitor
