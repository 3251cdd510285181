// SPDX-License-Identifier: Apache-2.0
// isowatchd in-process (monitor::Daemon on free ports, a temporary store): malformed batches sent
// with the unary Push are refused with the expected reasons while the rest of each batch is kept;
// the counters, the status and the violations say so over HTTP; a restart keeps the violations,
// the ids of the transactions and recognises re-sent batches; a shutdown applies every batch
// already acknowledged; a stream's first watermark, not the timeout, makes its verdicts final.
#include "isowatch/monitor/daemon.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdlib.h>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "isowatch/config/config.h"
#include "isowatch/ingest/client.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/store/violation_record.h"

#include "tests/testing/fake_clock.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/server/http_test_client.h"

namespace isowatch::monitor {
namespace {

using server::testing::HttpTestClient;

constexpr absl::Duration kWait = absl::Seconds(60);
constexpr char kVersion[] = "0.0.0-test";

// A fresh data directory, removed at the end.
class TempDir : public isowatch::testing::TempDir {
 public:
  TempDir() : isowatch::testing::TempDir("isowatch-daemon-test") {}
};

// --- transactions -----------------------------------------------------------------------------
// Every transaction has its own session and the interval [10 id, 10 id + 5]: transactions never
// overlap, so the only anomalies are the reads of values nobody wrote (EXT, kind never).

v1::Transaction Txn(int64_t id) {
  v1::Transaction t;
  t.set_id_int(id);
  t.set_session_int(id);
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_start()->set_physical(10 * id);
  t.mutable_commit()->set_physical(10 * id + 5);
  return t;
}

// Transaction `id` with one operation of `kind` on `key` with `value`.
v1::Transaction OneOp(int64_t id, v1::Operation::Kind kind, int64_t key, int64_t value) {
  v1::Transaction t = Txn(id);
  v1::Operation* op = t.add_ops();
  op->set_kind(kind);
  op->mutable_key()->set_int_(key);
  op->mutable_value()->set_int_(value);
  return t;
}

v1::Transaction Writer(int64_t id, int64_t key, int64_t value) {
  return OneOp(id, v1::Operation::WRITE, key, value);
}

v1::Transaction Appender(int64_t id, int64_t key, int64_t value) {
  return OneOp(id, v1::Operation::APPEND, key, value);
}

v1::Transaction Reader(int64_t id, int64_t key, int64_t value) {
  return OneOp(id, v1::Operation::READ, key, value);
}

// `t` moved to the interval [start, commit].
v1::Transaction At(v1::Transaction t, int64_t start, int64_t commit) {
  t.mutable_start()->set_physical(start);
  t.mutable_commit()->set_physical(commit);
  return t;
}

// A value no transaction of these tests writes.
int64_t Unwritten(int64_t id) { return 1'000'000 + id; }

v1::IngestBatch Batch(std::string_view stream, uint64_t seq, std::vector<v1::Transaction> txns) {
  v1::IngestBatch b;
  b.set_stream(std::string(stream));
  b.set_seq(seq);
  for (v1::Transaction& t : txns) *b.add_txns() = std::move(t);
  return b;
}

// --- the daemon and its HTTP API -----------------------------------------------------------------

config::DaemonConfig TestConfig(const std::string& data_dir) {
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

std::string ToJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  v.Accept(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string MemberString(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject() || !v.HasMember(name) || !v[name].IsString()) return "";
  return std::string(v[name].GetString(), v[name].GetStringLength());
}

// A metric's sample in the Prometheus text format: `series` is the name with its labels as
// rendered (`isowatch_refused_transactions_total{reason="missing_id"}`).
std::optional<double> Sample(const std::string& text, std::string_view series) {
  std::istringstream in(text);
  std::string line;
  const std::string prefix = std::string(series) + " ";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
  }
  return std::nullopt;
}

// The sum of every sample of the metric `name`, whatever its labels.
double Total(const std::string& text, std::string_view name) {
  std::istringstream in(text);
  std::string line;
  double total = 0;
  while (std::getline(in, line)) {
    if (line.rfind(std::string(name) + "{", 0) == 0 ||
        line.rfind(std::string(name) + " ", 0) == 0) {
      total += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
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
    HttpTestClient http(static_cast<uint16_t>(daemon_->http_port()));
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

  // Waits until the stream is closed and nothing of it is pending.
  // Waits until /api/v1/status says at least `n` windows are done.
  bool WindowsDone(uint64_t n) {
    return WaitFor([&] {
      std::unique_ptr<rapidjson::Document> d = Status();
      return d->IsObject() && d->HasMember("windows") && (*d)["windows"]["done"].GetUint64() >= n;
    });
  }

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
std::multiset<Brief> Summary(const std::vector<Seen>& seen) {
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
Brief ExtNever(int64_t id, int64_t key) {
  return {"EXT", "never", fmt::format("[{}]", id), fmt::format("{}", key)};
}

struct ExpectedRefusal {
  uint32_t index;
  v1::RefusalReason reason;
  bool whole_batch = false;
};

TEST_F(DaemonTest, RefusesMalformedTransactionsAndKeepsTheRest) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.ingest.max_batch_transactions = 8;
  ASSERT_NO_FATAL_FAILURE(Start(config));
  const std::string s = "bad-input";

  struct Step {
    v1::IngestBatch batch;
    std::vector<ExpectedRefusal> refusals;
    uint64_t durable_seq;
  };
  std::vector<Step> steps;
  // The good transactions: writers of key 1 and 2, readers of what they wrote (no violation)
  // and readers of values nobody wrote (one EXT violation each).
  std::multiset<Brief> want;
  uint64_t good = 0;

  {  // 1: a transaction without an id.
    v1::Transaction no_id = Reader(900, 1, Unwritten(900));
    no_id.clear_id_int();
    steps.push_back({Batch(s, 1, {Writer(1, 1, 100), std::move(no_id), Reader(2, 1, Unwritten(2))}),
                     {{1, v1::MISSING_ID}},
                     1});
    want.insert(ExtNever(2, 1));
    good += 2;
  }
  {  // 2: committed without a commit timestamp.
    v1::Transaction no_commit = Reader(901, 1, Unwritten(901));
    no_commit.clear_commit();
    steps.push_back({Batch(s, 2, {Reader(3, 1, 100), std::move(no_commit)}),
                     {{1, v1::MISSING_COMMIT_TIMESTAMP}},
                     2});
    good += 1;
  }
  {  // 3: start after commit.
    v1::Transaction backwards = Reader(902, 1, Unwritten(902));
    backwards.mutable_start()->set_physical(backwards.commit().physical() + 1);
    steps.push_back({Batch(s, 3, {std::move(backwards), Reader(4, 1, Unwritten(4))}),
                     {{0, v1::START_AFTER_COMMIT}},
                     3});
    want.insert(ExtNever(4, 1));
    good += 1;
  }
  {  // 4: an operation without a kind.
    v1::Transaction no_kind = Reader(903, 1, Unwritten(903));
    no_kind.mutable_ops(0)->clear_kind();
    steps.push_back({Batch(s, 4, {Writer(5, 2, 200), Reader(6, 2, 200), std::move(no_kind)}),
                     {{2, v1::UNKNOWN_OPERATION_KIND}},
                     4});
    good += 2;
  }
  {  // 5: a write without a value.
    v1::Transaction no_value = Writer(904, 2, 999);
    no_value.mutable_ops(0)->clear_value();
    steps.push_back({Batch(s, 5, {std::move(no_value), Reader(7, 2, Unwritten(7))}),
                     {{0, v1::MISSING_VALUE}},
                     5});
    want.insert(ExtNever(7, 2));
    good += 1;
  }
  {  // 6: more transactions than max_batch_transactions: refused whole, its seq consumed. Had any
     // of them been applied, its unwritten read would show as a violation.
    std::vector<v1::Transaction> txns;
    for (int64_t id = 910; id < 919; ++id) txns.push_back(Reader(id, 1, Unwritten(id)));
    steps.push_back({Batch(s, 6, std::move(txns)), {{0, v1::BATCH_TOO_LARGE, true}}, 6});
  }
  {  // 7: id 1 again with other content (refused), id 2 again unchanged (a silent duplicate).
    steps.push_back({Batch(s, 7,
                           {Writer(1, 1, 101), Reader(2, 1, Unwritten(2)), Reader(8, 1, 100),
                            Reader(9, 2, Unwritten(9))}),
                     {{0, v1::ID_REUSED}},
                     7});
    want.insert(ExtNever(9, 2));
    good += 2;
  }
  {  // 8: key 1 is a register; an append to it is well formed, and refused in the ack: the
     // daemon knows, before it logs the batch, that the live history could not take it.
    steps.push_back({Batch(s, 8, {Appender(10, 1, 5), Reader(11, 1, Unwritten(11))}),
                     {{0, v1::KEY_KIND_CONFLICT}},
                     8});
    want.insert(ExtNever(11, 1));
    good += 1;
  }
  // 10 before 9: a gap, refused whole without taking the seq.
  steps.push_back(
      {Batch(s, 10, {Reader(920, 1, Unwritten(920))}), {{0, v1::SEQUENCE_GAP, true}}, 8});
  {  // 9: the last batch, closing the stream.
    v1::IngestBatch last = Batch(s, 9, {Reader(12, 2, 200), Reader(13, 1, Unwritten(13))});
    last.set_end_of_stream(true);
    steps.push_back({std::move(last), {}, 9});
    want.insert(ExtNever(13, 1));
    good += 2;
  }

  for (const Step& step : steps) {
    SCOPED_TRACE(fmt::format("batch {}", step.batch.seq()));
    absl::StatusOr<v1::IngestAck> ack = Push(step.batch);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->stream(), s);
    EXPECT_EQ(ack->durable_seq(), step.durable_seq);
    EXPECT_FALSE(ack->duplicate());
    ASSERT_EQ(ack->refusals_size(), static_cast<int>(step.refusals.size()))
        << ack->ShortDebugString();
    for (size_t i = 0; i < step.refusals.size(); ++i) {
      const v1::Refusal& got = ack->refusals(static_cast<int>(i));
      EXPECT_EQ(got.seq(), step.batch.seq());
      EXPECT_EQ(got.index(), step.refusals[i].index);
      EXPECT_EQ(got.reason(), step.refusals[i].reason)
          << ingest::RefusalReasonName(got.reason()) << ": " << got.detail();
      EXPECT_EQ(got.whole_batch(), step.refusals[i].whole_batch);
      EXPECT_FALSE(got.detail().empty());
    }
  }

  ASSERT_TRUE(WaitChecked(s)) << "the stream was not checked completely";

  // Every reason counted once, all at ingest: none is left for the live history to refuse.
  const std::vector<std::string> reasons = {"missing_id",         "missing_commit_timestamp",
                                            "start_after_commit", "unknown_operation_kind",
                                            "missing_value",      "batch_too_large",
                                            "id_reused",          "sequence_gap",
                                            "key_kind_conflict"};
  std::string metrics;
  const bool counted = WaitFor([&] {
    metrics = Metrics();
    for (const std::string& reason : reasons) {
      auto v = Sample(metrics,
                      fmt::format("isowatch_refused_transactions_total{{reason=\"{}\"}}", reason));
      if (!v || *v != 1) return false;
    }
    return true;
  });
  EXPECT_TRUE(counted) << metrics;
  for (const std::string& reason : reasons) {
    EXPECT_EQ(Sample(metrics,
                     fmt::format("isowatch_refused_transactions_total{{reason=\"{}\"}}", reason)),
              1.0)
        << reason;
  }
  // Nothing else refused.
  EXPECT_EQ(Total(metrics, "isowatch_refused_transactions_total"),
            static_cast<double>(reasons.size()))
      << metrics;
  EXPECT_EQ(
      Sample(metrics, fmt::format("isowatch_ingested_transactions_total{{stream=\"{}\"}}", s)),
      static_cast<double>(good));

  // The status agrees.
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], std::to_string(good));
  EXPECT_EQ((*stream)["acked_sequence"], "9");
  std::unique_ptr<rapidjson::Document> status = Status();
  ASSERT_TRUE(status->IsObject() && status->HasMember("counts"));
  const rapidjson::Value& counts = (*status)["counts"];
  ASSERT_TRUE(counts.HasMember("refused_transactions"));
  EXPECT_EQ(ToJson(counts["refused_transactions"]), std::to_string(reasons.size()));
  EXPECT_EQ(ToJson(counts["violations"]), std::to_string(want.size()));

  // Still alive and ready, and the good transactions gave exactly the expected violations.
  auto ready = Get("/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200) << ready->body;
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), want);
  EXPECT_EQ(Total(metrics, "isowatch_violations_total"), static_cast<double>(want.size()))
      << metrics;

  // A later stream on the same daemon is checked as usual.
  v1::IngestBatch more =
      Batch("after-bad-input", 1, {Writer(20, 3, 300), Reader(21, 3, Unwritten(21))});
  more.set_end_of_stream(true);
  absl::StatusOr<v1::IngestAck> ack = Push(more);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  ASSERT_TRUE(WaitChecked("after-bad-input"));
  want.insert(ExtNever(21, 3));
  seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), want);
}

// The refusals of `ack`, as (index, reason) and in order, are `want`; each names the batch.
void ExpectRefusalList(const v1::IngestAck& ack, uint64_t seq,
                       const std::vector<ExpectedRefusal>& want) {
  ASSERT_EQ(ack.refusals_size(), static_cast<int>(want.size())) << ack.ShortDebugString();
  for (size_t i = 0; i < want.size(); ++i) {
    const v1::Refusal& got = ack.refusals(static_cast<int>(i));
    EXPECT_EQ(got.seq(), seq);
    EXPECT_EQ(got.index(), want[i].index);
    EXPECT_EQ(got.reason(), want[i].reason)
        << ingest::RefusalReasonName(got.reason()) << ": " << got.detail();
    EXPECT_FALSE(got.detail().empty());
  }
}

void ExpectRefusals(const absl::StatusOr<v1::IngestAck>& ack, uint64_t seq,
                    const std::vector<ExpectedRefusal>& want) {
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_FALSE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), seq);
  ExpectRefusalList(*ack, seq, want);
}

// The ack of batch `seq` sent again while the stream's durable seq is `durable_seq`: a duplicate
// that repeats the refusals of the batch's first ack.
void ExpectRepeatedRefusals(const absl::StatusOr<v1::IngestAck>& ack, uint64_t durable_seq,
                            uint64_t seq, const std::vector<ExpectedRefusal>& want) {
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), durable_seq);
  ExpectRefusalList(*ack, seq, want);
}

// A transaction of session `session` with session position `seq` (none if negative) that writes
// `value` to `key`.
v1::Transaction SessionWriter(int64_t id, int64_t key, const std::string& session, int64_t seq) {
  v1::Transaction t = Writer(id, key, 10 * id);
  t.set_session_str(session);
  if (seq >= 0) t.set_seq(seq);
  return t;
}

// Keys and sessions are shared by all streams: a transaction the live history could not take (a
// key used both as a register and as a list, a session that numbers only some of its
// transactions) is refused in its batch's ack, whichever stream used the key or the session
// first, and the rest of the batch is kept. The decisions survive a restart (they are rebuilt
// from the log), and a batch sent again is a duplicate, applied and counted once, whose ack
// repeats the refusals, before and after a restart.
TEST_F(DaemonTest, RefusesHistoryConflictsInTheAck) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  const config::DaemonConfig config = TestConfig(dir.Path());
  ASSERT_NO_FATAL_FAILURE(Start(config));

  // Key 1 becomes a register, key 2 a list; session "s" numbers its transactions.
  ExpectRefusals(
      Push(Batch("a", 1, {Writer(1, 1, 100), Appender(2, 2, 200), SessionWriter(7, 7, "s", 0)})), 1,
      {});
  // The same stream, a later batch: the append to register 1 is refused, the reader after it
  // kept.
  const v1::IngestBatch a2 = Batch("a", 2, {Appender(3, 1, 300), Reader(4, 1, 100)});
  ExpectRefusals(Push(a2), 2, {{0, v1::KEY_KIND_CONFLICT}});
  // Another stream meets the same keys.
  ExpectRefusals(
      Push(Batch("b", 1, {Writer(5, 2, 500), Reader(6, 1, Unwritten(6)), Appender(8, 1, 800)})), 1,
      {{0, v1::KEY_KIND_CONFLICT}, {2, v1::KEY_KIND_CONFLICT}});
  // Within one batch: key 3 is made a list, then written; transaction 10 uses key 4 both ways
  // itself, and being refused it leaves key 4 free for transaction 12.
  v1::Transaction both = Writer(10, 4, 1000);
  *both.add_ops() = Appender(10, 4, 1001).ops(0);
  ExpectRefusals(
      Push(Batch("b", 2, {Appender(9, 3, 900), Writer(11, 3, 1100), both, Writer(12, 4, 1200)})), 2,
      {{1, v1::KEY_KIND_CONFLICT}, {2, v1::KEY_KIND_CONFLICT}});
  // Session "s", numbered on stream a, gets a transaction without a seq on stream b; a session
  // position out of range is malformed.
  const v1::IngestBatch b3 = Batch("b", 3,
                                   {SessionWriter(13, 5, "s", -1), SessionWriter(14, 5, "s", 1),
                                    SessionWriter(15, 6, "t", 4294967295)});
  const std::vector<ExpectedRefusal> b3_refused = {{0, v1::SESSION_SEQ_CONFLICT},
                                                   {2, v1::MALFORMED_TRANSACTION}};
  ExpectRefusals(Push(b3), 3, b3_refused);
  // Batches a2 and b3 again, as after an ack lost with a connection: duplicates, whose acks
  // repeat the refusals of the first ones (the registry's and the validation's, in batch order)
  // without counting them again.
  ExpectRepeatedRefusals(Push(a2), 2, 2, {{0, v1::KEY_KIND_CONFLICT}});
  ExpectRepeatedRefusals(Push(b3), 3, 3, b3_refused);

  auto counted = [&](double key_kind, double session_seq) {
    std::string metrics;
    const bool ok = WaitFor([&] {
      metrics = Metrics();
      return Sample(metrics,
                    R"(isowatch_refused_transactions_total{reason="key_kind_conflict"})") ==
                 key_kind &&
             Sample(metrics,
                    R"(isowatch_refused_transactions_total{reason="session_seq_conflict"})") ==
                 session_seq &&
             Sample(metrics, "isowatch_duplicate_batches_total") >= 1.0;
    });
    EXPECT_TRUE(ok) << metrics;
    // The live history, which checks the same again, finds nothing to refuse.
    EXPECT_EQ(Sample(metrics, R"(isowatch_refused_transactions_total{reason="history_conflict"})")
                  .value_or(0),
              0.0)
        << metrics;
  };
  counted(5, 1);
  Stop();

  // After a restart the registry, rebuilt from the log, decides the same.
  ASSERT_NO_FATAL_FAILURE(Start(config));
  v1::IngestBatch c1 =
      Batch("c", 1,
            {Appender(16, 1, 1600), Writer(17, 2, 1700), SessionWriter(18, 8, "s", -1),
             Appender(19, 3, 1900), Writer(20, 4, 2000)});
  c1.set_end_of_stream(true);
  ExpectRefusals(
      Push(c1), 1,
      {{0, v1::KEY_KIND_CONFLICT}, {1, v1::KEY_KIND_CONFLICT}, {2, v1::SESSION_SEQ_CONFLICT}});
  ExpectRepeatedRefusals(Push(a2), 2, 2, {{0, v1::KEY_KIND_CONFLICT}});
  ExpectRepeatedRefusals(Push(b3), 3, 3, b3_refused);
  v1::IngestBatch a3 = Batch("a", 3, {});
  a3.set_end_of_stream(true);
  ExpectRefusals(Push(a3), 3, {});
  v1::IngestBatch b4 = Batch("b", 4, {});
  b4.set_end_of_stream(true);
  ExpectRefusals(Push(b4), 4, {});
  for (const char* stream : {"a", "b", "c"}) ASSERT_TRUE(WaitChecked(stream)) << stream;
  counted(2, 1);

  // Exactly the kept transactions were checked: 1, 2, 7 and 4; 6, 9, 12 and 14; 19 and 20.
  for (const auto& [stream, delivered] :
       std::vector<std::pair<std::string, std::string>>{{"a", "4"}, {"b", "4"}, {"c", "2"}}) {
    auto st = StreamStatus(stream);
    ASSERT_TRUE(st.has_value()) << stream;
    EXPECT_EQ((*st)["ingested_transactions"], delivered) << stream;
  }
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), (std::multiset<Brief>{ExtNever(6, 1)}));
}

TEST_F(DaemonTest, RestartKeepsViolationsAndRecognisesResentBatches) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  const config::DaemonConfig config = TestConfig(dir.Path());
  const std::string s = "restart";
  const v1::IngestBatch first =
      Batch(s, 1, {Writer(1, 1, 100), Reader(2, 1, Unwritten(2)), Reader(3, 1, 100)});
  v1::IngestBatch second = Batch(s, 2, {Reader(4, 1, Unwritten(4)), Reader(5, 1, Unwritten(5))});
  second.set_end_of_stream(true);
  const std::multiset<Brief> want = {ExtNever(2, 1), ExtNever(4, 1), ExtNever(5, 1)};

  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(Summary(*before), want);
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  auto ready = Get("/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200) << ready->body;
  // Served once each, with the same ids.
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(Summary(*after), want);
  std::set<std::string> ids_before, ids_after;
  for (const Seen& v : *before) ids_before.insert(v.id);
  for (const Seen& v : *after) ids_after.insert(v.id);
  EXPECT_EQ(ids_after, ids_before);

  // The first batch again: a duplicate, not applied again.
  absl::StatusOr<v1::IngestAck> ack = Push(first);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), 2u);
  EXPECT_EQ(ack->refusals_size(), 0);
  // A batch on another stream is applied after anything the duplicate could have caused, since
  // the engine applies batches in the order of the log: once it is checked, the first stream's
  // state is final.
  v1::IngestBatch barrier = Batch("barrier", 1, {Reader(30, 1, Unwritten(30))});
  barrier.set_end_of_stream(true);
  ack = Push(barrier);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_TRUE(WaitChecked("barrier"));
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "5");
  EXPECT_EQ((*stream)["acked_sequence"], "2");
  auto all = Violations();
  ASSERT_TRUE(all.has_value());
  auto want_all = want;
  want_all.insert(ExtNever(30, 1));
  EXPECT_EQ(Summary(*all), want_all);
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_duplicate_batches_total") == 1.0;
  })) << metrics;
}

// With a memory budget every collection is cut at the final point: a later transaction whose
// snapshot lies below what memory keeps is checked against the versions in <data_dir>/spill,
// the same as with everything in memory, and after a restart (the spill is rebuilt from the
// log) the violations are the same, once each.
TEST_F(DaemonTest, MemoryBudgetSpillsAndReloadsVersions) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.memory_budget = 1;  // always over: everything at or below F leaves memory
  config.engine.retention = 20;     // transactions may start 20 below the final point
  const std::string s = "budget";
  v1::IngestBatch first = Batch(s, 1,
                                {At(Writer(1, 1, 100), 10, 15), At(Writer(2, 1, 200), 20, 25),
                                 At(Writer(3, 1, 300), 30, 35)});
  first.mutable_watermark()->set_physical(35);
  // Both start at 22, when 100 (committed at 15) was the newest value; 200 came at 25.
  v1::IngestBatch second =
      Batch(s, 2, {At(Reader(4, 1, 200), 22, 45), At(Reader(5, 1, 100), 22, 46)});
  second.mutable_watermark()->set_physical(46);
  second.set_end_of_stream(true);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].anomaly, "EXT");
  EXPECT_EQ((*before)[0].txns, "[4,2]");
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_engine_spill_reloads_total") >= 2.0;
  })) << metrics;
  EXPECT_GE(Sample(metrics, "isowatch_engine_spilled_versions_total"), 2.0) << metrics;
  EXPECT_GE(Sample(metrics, "isowatch_engine_budget_collections_total"), 1.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_engine_spill_errors_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_horizon_misses_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_engine_memory_budget_bytes"), 1.0) << metrics;
  // Each reload is timed at once; the counter follows at the next refresh.
  EXPECT_GE(Sample(metrics, "isowatch_engine_spill_reload_seconds_count"),
            Sample(metrics, "isowatch_engine_spill_reloads_total"))
      << metrics;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir.Path()) / "spill"));
  // RocksDB's memory: both databases hold what was written in their memtables.
  EXPECT_GT(Sample(metrics, R"(isowatch_rocksdb_memory_bytes{db="store",kind="memtables"})"), 0.0)
      << metrics;
  EXPECT_GT(Sample(metrics, R"(isowatch_rocksdb_memory_bytes{db="spill",kind="memtables"})"), 0.0)
      << metrics;
  std::unique_ptr<rapidjson::Document> status = Status();
  ASSERT_TRUE(status->IsObject() && status->HasMember("memory"));
  const rapidjson::Value& memory = (*status)["memory"];
  ASSERT_TRUE(memory.HasMember("rocksdb_bytes") && memory.HasMember("rocksdb"));
  EXPECT_GT(memory["rocksdb_bytes"].GetUint64(), 0u);
  EXPECT_TRUE(memory["rocksdb"].HasMember("store"));
  EXPECT_TRUE(memory["rocksdb"].HasMember("spill"));
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(Summary(*after), Summary(*before));
}

// Under a memory budget, keys that stay idle give their last version to the spill: reads of
// them are checked against it (right and wrong ones alike), the count shows in the metrics, and
// a restart (which rebuilds engine and spill from the log) finds the same violations.
TEST_F(DaemonTest, MemoryBudgetEvictsColdKeys) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.memory_budget = 1;  // always over
  const std::string s = "evict";
  // Key k is written at 10k + 5; each batch passes a watermark, and the keys then stay idle for
  // the many advances of the final point that follow.
  constexpr int kKeys = 80;
  std::vector<v1::IngestBatch> batches;
  for (int k = 1; k <= kKeys; ++k) {
    v1::IngestBatch b =
        Batch(s, static_cast<uint64_t>(k), {At(Writer(k, k, 100 * k), 10 * k, 10 * k + 5)});
    b.mutable_watermark()->set_physical(10 * k + 5);
    batches.push_back(std::move(b));
  }
  // Reads of the first keys long after: key 1 as written, key 2 with a value nobody wrote.
  v1::IngestBatch last = Batch(s, kKeys + 1,
                               {At(Reader(1001, 1, 100), 10 * kKeys + 10, 10 * kKeys + 11),
                                At(Reader(1002, 2, 999), 10 * kKeys + 10, 10 * kKeys + 12)});
  last.set_end_of_stream(true);
  batches.push_back(last);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  for (const v1::IngestBatch& b : batches) {
    absl::StatusOr<v1::IngestAck> ack = Push(b);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->refusals_size(), 0);
  }
  ASSERT_TRUE(WaitChecked(s));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].anomaly, "EXT");
  EXPECT_EQ((*before)[0].txns, "[1002]");  // 999 was never written
  // Each key's state is either in memory or evicted with its version (checked on a scrape taken
  // between two updates of the metrics, which a scrape taken during one could miss).
  auto states = [](const std::string& text) {
    return Sample(text, "isowatch_engine_resident_keys").value_or(0) +
           Sample(text, "isowatch_engine_evicted_keys_total").value_or(0) -
           Sample(text, "isowatch_engine_restored_keys_total").value_or(0);
  };
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_engine_evicted_keys_total") >= 1.0 &&
           Sample(metrics, "isowatch_engine_spill_reloads_total") >= 2.0 &&
           Sample(metrics, "isowatch_engine_restored_keys_total") >= 2.0 &&
           states(metrics) == kKeys;
  })) << metrics;
  EXPECT_EQ(states(metrics), kKeys) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_horizon_misses_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_engine_spill_errors_total"), 0.0) << metrics;
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(Summary(*after), Summary(*before));
}

// Checkpoints drop the log, and a daemon restarted from one goes on as if it had never stopped:
// a read left pending at the checkpoint is judged after the restart, and a writer that arrives
// after it is checked against one long evicted before it. The same batches, pushed to a daemon
// without checkpoints that is never stopped, give the same violations with the same ids.
TEST_F(DaemonTest, CheckpointsDropTheLogAndARestartGoesOn) {
  const std::string s = "checkpointed";
  std::vector<v1::IngestBatch> before_stop;
  v1::IngestBatch b1 = Batch(s, 1,
                             {At(Writer(1, 1, 100), 10, 15), At(Writer(2, 2, 200), 20, 25),
                              At(Writer(3, 3, 300), 30, 35)});
  b1.mutable_watermark()->set_physical(35);
  v1::IngestBatch b2 = Batch(s, 2, {At(Reader(4, 1, 100), 40, 45)});
  b2.mutable_watermark()->set_physical(45);
  // No watermark: the wrong read of key 2 is still pending when the daemon stops.
  const v1::IngestBatch b3 = Batch(s, 3, {At(Reader(5, 2, 999), 50, 55)});
  // After the restart: a writer of key 3 that started before transaction 3 committed.
  v1::IngestBatch b4 = Batch(s, 4, {At(Writer(6, 3, 600), 33, 65)});
  b4.mutable_watermark()->set_physical(65);
  b4.set_end_of_stream(true);

  TempDir plain_dir;
  ASSERT_FALSE(plain_dir.Path().empty());
  config::DaemonConfig plain = TestConfig(plain_dir.Path());
  plain.engine.memory_budget = 1;
  plain.store.checkpoint_interval = std::chrono::milliseconds(0);
  ASSERT_NO_FATAL_FAILURE(Start(plain));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({b1, b2, b3, b4}, s));
  auto want = Violations();
  ASSERT_TRUE(want.has_value());
  std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_checkpoints_total"), 0.0) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_store_log_batches"), 4.0) << metrics;
  Stop();
  const std::multiset<Brief> expected = Summary(*want);
  ASSERT_EQ(expected.size(), 2u);  // EXT of 5, NoConflict of 3 and 6

  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.memory_budget = 1;
  config.store.checkpoint_interval = std::chrono::milliseconds(10);
  ASSERT_NO_FATAL_FAILURE(Start(config));
  for (const v1::IngestBatch& b : {b1, b2, b3}) {
    absl::StatusOr<v1::IngestAck> ack = Push(b);
    ASSERT_TRUE(ack.ok()) << ack.status();
  }
  // Checkpoints were taken and the log before the last one dropped.
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_checkpoints_total") >= 1.0 &&
           Sample(metrics, "isowatch_store_log_batches") == 0.0;
  })) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_checkpoint_failures_total"), 0.0) << metrics;
  EXPECT_GT(Sample(metrics, "isowatch_checkpoint_bytes").value_or(0), 0.0) << metrics;
  Stop();
  // One spill snapshot is kept, the one of the last checkpoint.
  size_t snapshots = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.Path())) {
    if (e.path().filename().string().starts_with("spill-checkpoint-")) ++snapshots;
  }
  EXPECT_EQ(snapshots, 1u);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_store_log_batches"), 0.0) << metrics;
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({b4}, s));
  auto got = Violations();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(Summary(*got), expected);
  std::set<std::string> want_ids, got_ids;
  for (const Seen& v : *want) want_ids.insert(v.id);
  for (const Seen& v : *got) got_ids.insert(v.id);
  EXPECT_EQ(got_ids, want_ids);
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "6");
  EXPECT_EQ((*stream)["acked_sequence"], "4");
  metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_horizon_misses_total"), 0.0) << metrics;
}

// engine.spill_retention reaches the engine: a transaction that starts far below the final
// point, whose snapshot the spill could have answered, is a horizon miss once the spill may
// have pruned it, and is reloaded (and found right) when the spill keeps everything.
TEST_F(DaemonTest, SpillRetentionPrunesOldSnapshots) {
  for (int64_t spill_retention : {0, 5}) {
    SCOPED_TRACE(spill_retention);
    TempDir dir;
    ASSERT_FALSE(dir.Path().empty());
    config::DaemonConfig config = TestConfig(dir.Path());
    config.engine.memory_budget = 1;
    config.engine.spill_collected = true;
    config.engine.spill_retention = spill_retention;
    const std::string s = "pruned";
    v1::IngestBatch first = Batch(s, 1,
                                  {At(Writer(1, 1, 100), 10, 15), At(Writer(2, 1, 200), 20, 25),
                                   At(Writer(3, 1, 300), 30, 35), At(Writer(4, 1, 400), 40, 45)});
    first.mutable_watermark()->set_physical(45);
    // Starts at 16, when 100 was the newest value: right, if anything can tell.
    v1::IngestBatch second = Batch(s, 2, {At(Reader(5, 1, 100), 16, 50)});
    second.mutable_watermark()->set_physical(50);
    second.set_end_of_stream(true);
    ASSERT_NO_FATAL_FAILURE(Start(config));
    ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
    auto seen = Violations();
    ASSERT_TRUE(seen.has_value());
    EXPECT_TRUE(seen->empty());
    std::string metrics;
    const char* outcome = spill_retention == 0 ? "isowatch_engine_spill_reloads_total"
                                               : "isowatch_horizon_misses_total";
    EXPECT_TRUE(WaitFor([&] {
      metrics = Metrics();
      return Sample(metrics, outcome) >= 1.0;
    })) << metrics;
    const char* other = spill_retention == 0 ? "isowatch_horizon_misses_total"
                                             : "isowatch_engine_spill_reloads_total";
    EXPECT_EQ(Sample(metrics, other), 0.0) << metrics;
    EXPECT_EQ(Sample(metrics, "isowatch_engine_spill_errors_total"), 0.0) << metrics;
    Stop();
  }
}

TEST_F(DaemonTest, RestartKeepsTheIdsOfAnOpenStream) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  const config::DaemonConfig config = TestConfig(dir.Path());
  const std::string s = "open";
  ASSERT_NO_FATAL_FAILURE(Start(config));
  absl::StatusOr<v1::IngestAck> ack =
      Push(Batch(s, 1, {Writer(1, 1, 100), Reader(2, 1, Unwritten(2))}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  // Batch 1 again: a duplicate. Batch 2 reuses id 1 with other content and resends id 2.
  ack = Push(Batch(s, 1, {Writer(1, 1, 100), Reader(2, 1, Unwritten(2))}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), 1u);
  v1::IngestBatch next =
      Batch(s, 2, {Writer(1, 1, 555), Reader(2, 1, Unwritten(2)), Reader(3, 1, Unwritten(3))});
  next.set_end_of_stream(true);
  ack = Push(next);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->durable_seq(), 2u);
  ASSERT_EQ(ack->refusals_size(), 1) << ack->ShortDebugString();
  EXPECT_EQ(ack->refusals(0).index(), 0u);
  EXPECT_EQ(ack->refusals(0).reason(), v1::ID_REUSED);
  ASSERT_TRUE(WaitChecked(s));
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "3");
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), (std::multiset<Brief>{ExtNever(2, 1), ExtNever(3, 1)}));
}

// With ingest.remembered_ids = 2 a stream remembers its newest 2 to 4 ids, in two generations.
// The registry rebuilt from the log at a restart holds the same generations: here {1, 2} and
// {3, 4} before and after; one more id then drops {1, 2}. Id 1 is then new again at ingest (the
// live history, which still holds transaction 1, refuses it after the ack: the one refusal left
// after the ack, history_conflict), id 3 with other content is still refused and id 4 resent is
// still a duplicate.
TEST_F(DaemonTest, RestartRebuildsTheBoundedIdsTheSame) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.ingest.remembered_ids = 2;
  const std::string s = "bounded";
  auto remembered = [&](double want) {
    std::string metrics;
    EXPECT_TRUE(WaitFor([&] {
      metrics = Metrics();
      return Sample(metrics, "isowatch_ingest_remembered_ids") == want;
    })) << metrics;
  };
  ASSERT_NO_FATAL_FAILURE(Start(config));
  absl::StatusOr<v1::IngestAck> ack =
      Push(Batch(s, 1, {Writer(1, 1, 100), Writer(2, 2, 200), Writer(3, 3, 300)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  ack = Push(Batch(s, 2, {Writer(4, 4, 400)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  remembered(4);
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  remembered(4);
  ack = Push(Batch(s, 3, {Writer(5, 5, 500)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  remembered(3);
  v1::IngestBatch last = Batch(s, 4, {Writer(1, 1, 111), Writer(3, 3, 333), Writer(4, 4, 400)});
  last.set_end_of_stream(true);
  ack = Push(last);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_EQ(ack->refusals_size(), 1) << ack->ShortDebugString();
  EXPECT_EQ(ack->refusals(0).index(), 1u);
  EXPECT_EQ(ack->refusals(0).reason(), v1::ID_REUSED);
  ASSERT_TRUE(WaitChecked(s));
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, R"(isowatch_refused_transactions_total{reason="history_conflict"})") ==
           1.0;
  })) << metrics;
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "5");
}

// A stream that sends a watermark with its first batch finalises at its watermarks only, however
// long the wait: docs/operations.md, "Watermarks and the timeout". Here the reader of key 1 arrives
// first, the writer it read from after many timeouts, within the stream's second watermark: the
// read is right.
TEST_F(DaemonTest, StreamWithWatermarkFromItsFirstBatchIsNotFinalisedByTimeout) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.finality_timeout = std::chrono::milliseconds(200);
  ASSERT_NO_FATAL_FAILURE(Start(config, &clock_));
  const std::string s = "first-watermark";

  v1::IngestBatch first = Batch(s, 1, {Reader(2, 1, 100)});
  first.mutable_watermark()->set_physical(9);  // the writer commits at 15
  absl::StatusOr<v1::IngestAck> ack = Push(first);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_NO_FATAL_FAILURE(Tick());
  auto st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["pending_transactions"], "1");
  // Ten timeouts pass, and the engine thread ticks after them: the reader stays pending (only
  // the watermark can make it final).
  clock_.Advance(absl::Seconds(2));
  ASSERT_NO_FATAL_FAILURE(Tick());
  st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["pending_transactions"], "1");
  // The status is the one of the tick after them.
  EXPECT_EQ(std::stod((*st)["lag_seconds"]), 2.0);

  std::optional<std::vector<Seen>> seen;
  ASSERT_NO_FATAL_FAILURE(FinishWithWriter(s, &seen));
  ASSERT_TRUE(seen.has_value());
  EXPECT_TRUE(seen->empty()) << seen->front().anomaly << "/" << seen->front().ext_kind << " "
                             << seen->front().txns;
  std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_late_arrivals_total"), 0.0) << metrics;
}

// A stream that has sent no watermark yet finalises by timeout (Aion's rule): a transaction that
// arrives later than the timeout after one it should precede is a late arrival, counted, and the
// verdicts made final before it stand. Here the read of key 1 becomes final, as a read of a value
// never written, before its writer arrives.
TEST_F(DaemonTest, StreamWithoutWatermarkYetFinalisesByTimeoutAndCountsLateArrivals) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.engine.finality_timeout = std::chrono::milliseconds(200);
  ASSERT_NO_FATAL_FAILURE(Start(config, &clock_));
  const std::string s = "no-watermark-yet";

  absl::StatusOr<v1::IngestAck> ack = Push(Batch(s, 1, {Reader(2, 1, 100)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_NO_FATAL_FAILURE(Tick());
  auto st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["pending_transactions"], "1");
  // The timeout passes: the read is final.
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_NO_FATAL_FAILURE(Tick());
  st = StreamStatus(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)["ingested_transactions"], "1");
  EXPECT_EQ((*st)["pending_transactions"], "0");
  std::optional<std::vector<Seen>> seen;
  ASSERT_NO_FATAL_FAILURE(FinishWithWriter(s, &seen));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), (std::multiset<Brief>{ExtNever(2, 1)}));
  std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_late_arrivals_total"), 1.0) << metrics;
}

TEST_F(DaemonTest, ShutdownAppliesEveryAcknowledgedBatch) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  // A fast log and a deep queue, so that acknowledged batches are likely still queued when the
  // shutdown starts; verdicts become final only at the end of the stream.
  config.store.sync_writes = false;
  config.ingest.queue_batches = 4096;
  config.engine.finality_timeout = std::chrono::milliseconds(600'000);
  ASSERT_NO_FATAL_FAILURE(Start(config));

  constexpr int kBatches = 200;
  constexpr int kPerBatch = 50;
  ingest::ClientOptions options = ClientOptions();
  options.max_in_flight = 256;
  ingest::IngestClient client(fmt::format("127.0.0.1:{}", daemon_->grpc_port()), "drain", options);
  int64_t id = 0;
  int64_t expected = 0;
  for (int b = 0; b < kBatches; ++b) {
    v1::IngestBatch batch;
    const int64_t key = b;
    const int64_t written = ++id;
    *batch.add_txns() = Writer(written, key, written);
    for (int i = 1; i < kPerBatch; ++i) {
      ++id;
      if (i % 7 == 0) {
        *batch.add_txns() = Reader(id, key, Unwritten(id));
        ++expected;
      } else {
        *batch.add_txns() = Reader(id, key, written);
      }
    }
    ASSERT_TRUE(client.Send(std::move(batch)).ok());
  }
  absl::StatusOr<std::vector<v1::Refusal>> refusals = client.Close();
  ASSERT_TRUE(refusals.ok()) << refusals.status();
  EXPECT_TRUE(refusals->empty());
  EXPECT_EQ(client.durable_seq(), static_cast<uint64_t>(kBatches + 1));

  // Every batch is acknowledged, so durable; the shutdown must apply those still queued.
  Monitor& monitor = daemon_->monitor();
  absl::StatusOr<store::ViolationPage> early = monitor.Query({}, 1'000'000, "");
  ASSERT_TRUE(early.ok()) << early.status();
  daemon_->Shutdown();
  std::cout << "violations stored when the shutdown started: " << early->violations.size() << " of "
            << expected << "\n";

  absl::StatusOr<store::ViolationPage> page = monitor.Query({}, 1'000'000, "");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->violations.size(), static_cast<size_t>(expected));
  std::set<std::string> readers;
  for (const store::ViolationRecord& r : page->violations) {
    EXPECT_EQ(r.anomaly, "EXT");
    EXPECT_EQ(r.ext_kind, "never");
    readers.insert(r.json);
  }
  EXPECT_EQ(readers.size(), static_cast<size_t>(expected));
  absl::StatusOr<server::DaemonStatus> status = monitor.GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->streams.size(), 1u);
  EXPECT_TRUE(status->streams[0].closed);
  EXPECT_EQ(status->streams[0].pending_transactions, 0u);
  EXPECT_EQ(status->streams[0].ingested_transactions, static_cast<uint64_t>(id));
  EXPECT_EQ(status->counts.queued_batches, 0u);
}

// A committed transaction of session `id` over [start, commit] that reads keys 1 and 2 (both
// absent) and writes `value` to `key`.
v1::Transaction SkewTxn(int64_t id, int64_t start, int64_t commit, int64_t key, int64_t value) {
  v1::Transaction t;
  t.set_id_int(id);
  t.set_session_int(id);
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_start()->set_physical(start);
  t.mutable_commit()->set_physical(commit);
  for (int64_t k : {1, 2}) {
    v1::Operation* read = t.add_ops();
    read->set_kind(v1::Operation::READ);
    read->mutable_key()->set_int_(k);
  }
  v1::Operation* write = t.add_ops();
  write->set_kind(v1::Operation::WRITE);
  write->mutable_key()->set_int_(key);
  write->mutable_value()->set_int_(value);
  return t;
}

// Windows of four transactions without overlap, checked by adya (SI and SER) and chronos (SI).
config::DaemonConfig WindowedConfig(const std::string& data_dir) {
  config::DaemonConfig config = TestConfig(data_dir);
  for (const char* assignment :
       {"windows.checkers=adya,chronos", "windows.size=4", "windows.overlap=0",
        "checkers.chronos.levels=si", "checkers.adya.levels=si,ser"}) {
    EXPECT_TRUE(config::ApplyAssignment(&config, assignment).ok()) << assignment;
  }
  return config;
}

// With windows.checkers set, the stream is cut into windows that the plug-ins check beside the
// online engine: a write skew, valid under snapshot isolation (nothing online), is adya's
// G2-item against serializability, stored with the window it was found in. A restart does not
// check a done window again, and serves the violation once.
TEST_F(DaemonTest, WindowsAreCheckedByThePluginsOnceAcrossRestarts) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = WindowedConfig(dir.Path());
  ASSERT_TRUE(config::Validate(config).ok()) << config::Validate(config);
  const std::string s = "skew";
  // Transactions 1 and 2 overlap and each writes a key the other read: a write skew.
  // Transactions 3 to 6 are harmless; the window of four closes after transaction 4.
  v1::IngestBatch first = Batch(s, 1,
                                {SkewTxn(1, 10, 20, 1, 100), SkewTxn(2, 11, 21, 2, 200),
                                 Writer(3, 3, 300), Writer(4, 4, 400)});
  v1::IngestBatch second = Batch(s, 2, {Writer(5, 5, 500), Writer(6, 6, 600)});
  second.set_end_of_stream(true);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
  ASSERT_TRUE(WindowsDone(2));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].checker, "adya");
  EXPECT_EQ((*before)[0].anomaly, "G2-item");
  EXPECT_EQ((*before)[0].txns, "[1,2]");
  auto by_adya = Violations(10, "&checker=adya");
  ASSERT_TRUE(by_adya.has_value());
  EXPECT_EQ(by_adya->size(), 1u);
  auto online = Violations(10, "&checker=online");
  ASSERT_TRUE(online.has_value());
  EXPECT_TRUE(online->empty());
  // The record names its window and every level the cycle violates.
  absl::StatusOr<store::ViolationPage> page = daemon_->monitor().Query({}, 10, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_EQ(page->violations[0].level, "ser");
  rapidjson::Document record;
  record.Parse(page->violations[0].json.c_str());
  ASSERT_FALSE(record.HasParseError()) << page->violations[0].json;
  ASSERT_TRUE(record.HasMember("window")) << page->violations[0].json;
  EXPECT_EQ(record["window"]["index"].GetUint64(), 0u);
  EXPECT_EQ(record["window"]["transactions"].GetUint64(), 4u);
  std::unique_ptr<rapidjson::Document> status = Status();
  const rapidjson::Value& windows = (*status)["windows"];
  EXPECT_TRUE(windows["enabled"].GetBool());
  EXPECT_EQ(windows["sealed"].GetUint64(), 2u);
  EXPECT_EQ(windows["dropped"].GetUint64(), 0u);
  ASSERT_EQ(windows["checkers"].Size(), 2u);
  EXPECT_STREQ(windows["checkers"][0]["name"].GetString(), "adya");
  EXPECT_EQ(windows["checkers"][0]["checked"].GetUint64(), 2u);
  EXPECT_EQ(windows["checkers"][0]["violations"].GetUint64(), 1u);
  EXPECT_EQ(windows["checkers"][1]["checked"].GetUint64(), 2u);
  EXPECT_EQ(windows["checkers"][1]["violations"].GetUint64(), 0u);
  const std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, R"(isowatch_window_checks_total{checker="adya",outcome="checked"})"),
            2.0)
      << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_windows_sealed_total"), 2.0);
  EXPECT_EQ(
      Sample(metrics, R"(isowatch_violations_total{anomaly="G2-item",checker="adya",level="ser"})"),
      1.0)
      << metrics;
  Stop();

  // After a restart the log is replayed and the windows cut again, but both are done.
  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_TRUE(WaitChecked(s));
  status = Status();
  EXPECT_EQ((*status)["windows"]["done"].GetUint64(), 2u);
  EXPECT_EQ((*status)["windows"]["sealed"].GetUint64(), 2u);
  EXPECT_EQ((*status)["windows"]["checkers"][0]["checked"].GetUint64(), 0u);
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].id, (*before)[0].id);
}

// Checkpoints are taken while windows are cut: the window cutter is saved with them, so that a
// restart from a checkpoint (its log dropped) cuts the next windows with the state the earlier
// ones left. The readers of the second window read what the first window's transactions wrote:
// with a state lost in the restart they would read values never written (chronos's EXT).
TEST_F(DaemonTest, WindowsGoOnFromACheckpointAfterARestart) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = WindowedConfig(dir.Path());
  config.store.checkpoint_interval = std::chrono::milliseconds(10);
  ASSERT_TRUE(config::Validate(config).ok()) << config::Validate(config);
  const std::string s = "windowed";
  v1::IngestBatch first = Batch(s, 1,
                                {SkewTxn(1, 10, 20, 1, 100), SkewTxn(2, 11, 21, 2, 200),
                                 Writer(3, 3, 300), Writer(4, 4, 400)});
  // Past transaction 4's commit (45): the first window is sealed.
  first.mutable_watermark()->set_physical(46);
  v1::IngestBatch second =
      Batch(s, 2, {Reader(5, 1, 100), Reader(6, 2, 200), Reader(7, 3, 300), Reader(8, 4, 400)});
  second.set_end_of_stream(true);

  ASSERT_NO_FATAL_FAILURE(Start(config));
  absl::StatusOr<v1::IngestAck> ack = Push(first);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_TRUE(WindowsDone(1));
  // A checkpoint after the first window, and the log before it dropped: the restart below
  // starts from the checkpoint alone.
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_checkpoints_total") >= 1.0 &&
           Sample(metrics, "isowatch_store_log_batches") == 0.0;
  })) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_checkpoint_failures_total"), 0.0) << metrics;
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].anomaly, "G2-item");
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_store_log_batches"), 0.0) << metrics;
  ack = Push(second);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  ASSERT_TRUE(WaitChecked(s));
  ASSERT_TRUE(WindowsDone(2));
  std::unique_ptr<rapidjson::Document> status = Status();
  EXPECT_EQ((*status)["windows"]["sealed"].GetUint64(), 2u);
  EXPECT_EQ((*status)["windows"]["dropped"].GetUint64(), 0u);
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->size(), 1u) << (*after)[1].anomaly << " " << (*after)[1].txns;
  EXPECT_EQ((*after)[0].id, (*before)[0].id);
  absl::StatusOr<store::ViolationPage> page = daemon_->monitor().Query({}, 10, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_NE(page->violations[0].json.find(R"("window":{"index":0,)"), std::string::npos)
      << page->violations[0].json;
}

// By default a plug-in judges the level the database promises (engine.level): the write skew that
// adya calls G2-item (a violation of repeatable read and serializability) is no violation of
// snapshot isolation, so a database that promises SI is not faulted for it.
TEST_F(DaemonTest, WindowCheckersJudgeThePromisedLevelByDefault) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  ASSERT_TRUE(config::ApplyAssignment(&config, "windows.checkers=adya").ok());
  ASSERT_TRUE(config::ApplyAssignment(&config, "windows.size=4").ok());
  ASSERT_TRUE(config::ApplyAssignment(&config, "windows.overlap=0").ok());
  v1::IngestBatch batch = Batch("skew", 1,
                                {SkewTxn(1, 10, 20, 1, 100), SkewTxn(2, 11, 21, 2, 200),
                                 Writer(3, 3, 300), Writer(4, 4, 400)});
  batch.set_end_of_stream(true);
  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({batch}, "skew"));
  ASSERT_TRUE(WaitFor([&] {
    std::unique_ptr<rapidjson::Document> d = Status();
    return d->IsObject() && d->HasMember("windows") && (*d)["windows"]["done"].GetUint64() >= 1;
  }));
  std::unique_ptr<rapidjson::Document> status = Status();
  EXPECT_EQ((*status)["windows"]["checkers"][0]["checked"].GetUint64(), 1u);
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_TRUE(seen->empty());
}
}  // namespace
}  // namespace isowatch::monitor
