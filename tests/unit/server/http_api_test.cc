// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/http_api.h"

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "absl/synchronization/mutex.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "isowatch/server/http_server.h"
#include "isowatch/server/metrics.h"

#include "tests/unit/server/http_test_client.h"

namespace isowatch::server {
namespace {

using testing::ClientResponse;
using ::testing::HasSubstr;
using testing::HttpTestClient;

// Keeps records in the order they became final and pages through them with the index of the
// next record as the token. Remembers the last query it was asked.
class FakeViolationSource : public ViolationSource {
 public:
  explicit FakeViolationSource(std::vector<store::ViolationRecord> records)
      : records_(std::move(records)) {}

  absl::StatusOr<store::ViolationPage> Query(const store::ViolationFilter& filter, size_t limit,
                                             std::string_view page_token) override {
    absl::MutexLock lock(&mu_);
    last_filter_ = filter;
    last_limit_ = limit;
    last_token_ = std::string(page_token);
    ++queries_;
    if (unavailable_) return absl::UnavailableError("store is closed");
    size_t start = 0;
    if (!page_token.empty()) {
      auto [ptr, ec] =
          std::from_chars(page_token.data(), page_token.data() + page_token.size(), start);
      if (ec != std::errc() || ptr != page_token.data() + page_token.size() ||
          start > records_.size()) {
        return absl::InvalidArgumentError("unknown page token");
      }
    }
    store::ViolationPage page;
    size_t i = start;
    for (; i < records_.size() && page.violations.size() < limit; ++i) {
      if (Matches(filter, records_[i])) page.violations.push_back(records_[i]);
    }
    // Skip non-matching records so that the last page has an empty token.
    while (i < records_.size() && !Matches(filter, records_[i])) ++i;
    if (i < records_.size()) page.next_page_token = std::to_string(i);
    return page;
  }

  // Two summaries, one per page; the token is the index of the next.
  absl::StatusOr<store::SummaryPage> QuerySummaries(const store::SummaryFilter& filter,
                                                    size_t limit,
                                                    std::string_view page_token) override {
    absl::MutexLock lock(&mu_);
    last_summary_filter_ = filter;
    if (page_token != "" && page_token != "1") {
      return absl::InvalidArgumentError("unknown page token");
    }
    store::ViolationSummary key{
        .scope = store::SummaryScope::kKey,
        .checker = "online",
        .level = "si",
        .anomaly = "NOCONFLICT",
        .subject = "7",
        .kept = 10,
        .summarised = 3123740,
        .first = {.id = "a1", .finalised_unix_ms = 1704067200000, .txns = {"11", "12"}},
        .last = {.id = "a2", .finalised_unix_ms = 1704067201000, .txns = {"2499", "2500"}},
        .streams = {"replay"}};
    store::ViolationSummary txn = key;
    txn.scope = store::SummaryScope::kTxn;
    txn.subject = "long";
    txn.stream = "s1";
    store::SummaryPage page;
    page.summaries.push_back(page_token.empty() ? key : txn);
    if (page_token.empty() && limit == 1) page.next_page_token = "1";
    if (page_token.empty() && limit > 1) page.summaries.push_back(txn);
    return page;
  }
  store::SummaryFilter last_summary_filter() {
    absl::MutexLock lock(&mu_);
    return last_summary_filter_;
  }

  static bool Matches(const store::ViolationFilter& f, const store::ViolationRecord& r) {
    if (f.level && *f.level != r.level) return false;
    if (f.anomaly && *f.anomaly != r.anomaly) return false;
    if (f.stream && std::find(r.streams.begin(), r.streams.end(), *f.stream) == r.streams.end()) {
      return false;
    }
    if (f.since_unix_ms && r.finalised_unix_ms < *f.since_unix_ms) return false;
    if (f.until_unix_ms && r.finalised_unix_ms >= *f.until_unix_ms) return false;
    return true;
  }

  void set_unavailable(bool v) {
    absl::MutexLock lock(&mu_);
    unavailable_ = v;
  }
  store::ViolationFilter last_filter() {
    absl::MutexLock lock(&mu_);
    return last_filter_;
  }
  size_t last_limit() {
    absl::MutexLock lock(&mu_);
    return last_limit_;
  }
  int queries() {
    absl::MutexLock lock(&mu_);
    return queries_;
  }

 private:
  const std::vector<store::ViolationRecord> records_;
  absl::Mutex mu_;
  bool unavailable_ ABSL_GUARDED_BY(mu_) = false;
  store::ViolationFilter last_filter_ ABSL_GUARDED_BY(mu_);
  size_t last_limit_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_token_ ABSL_GUARDED_BY(mu_);
  int queries_ ABSL_GUARDED_BY(mu_) = 0;
  store::SummaryFilter last_summary_filter_ ABSL_GUARDED_BY(mu_);
};

class FakeStatusSource : public StatusSource {
 public:
  absl::StatusOr<DaemonStatus> GetStatus() override {
    DaemonStatus status;
    status.version = "1.2.3-test";
    status.start_unix_ms = 1714564800000;  // 2024-05-01T12:00:00Z
    status.uptime_seconds = 42.5;
    StreamStatus open;
    open.name = "orders";
    open.watermark = history::Timestamp{455000614796787712, 0};
    open.lag_seconds = 1.25;
    open.pending_transactions = 17;
    open.ingested_transactions = 1000;
    open.committed_transactions = 990;
    open.acked_sequence = 9;
    StreamStatus closed;
    closed.name = "replay-1";
    closed.closed = true;
    status.streams = {open, closed};
    status.counts.ingested_transactions = 1000;
    status.counts.refused_transactions = 3;
    status.counts.violations = 2;
    status.counts.violations_stored = 1;
    status.counts.violations_summarised = 1;
    status.findings = FindingsStatus{.state = "summarising",
                                     .summaries = 1,
                                     .store_bytes = 700,
                                     .max_store_bytes = 1 << 20,
                                     .log_state = "rate_limited",
                                     .logged = 1,
                                     .unlogged = 5,
                                     .log_bytes = 300,
                                     .max_log_bytes = 1 << 10};
    status.memory.resident_bytes = 123456789;
    status.memory.engine_bytes = 4567;
    status.memory.history_bytes = 5678;
    status.memory.spill_bytes = 6789;
    status.memory.retained_versions = 11;
    status.memory.rocksdb = {
        RocksDbMemoryStatus{.db = "store", .memtables = 100, .table_readers = 20, .block_cache = 3},
        RocksDbMemoryStatus{
            .db = "spill", .memtables = 400, .table_readers = 50, .block_cache = 6}};
    status.memory.rocksdb_bytes = 579;
    status.windows = WindowsStatus{
        .enabled = true,
        .sealed = 12,
        .done = 10,
        .dropped = 1,
        .queued = 2,
        .running = 1,
        .late_transactions = 4,
        .checkers = {
            {.name = "adya", .checked = 9, .unknown = 1, .violations = 3, .seconds = 0.5}}};
    return status;
  }
};

store::ViolationRecord MakeRecord(int i) {
  store::ViolationRecord r;
  r.id = fmt::format("v{:03}", i);
  r.checker = i % 2 == 0 ? "online" : "chronos";
  r.level = i % 3 == 0 ? "ser" : "si";
  r.anomaly = i % 4 == 0 ? "EXT" : "SESSION";
  r.ext_kind = r.anomaly == "EXT" ? "never" : "";
  r.streams = {i % 5 == 0 ? "s2" : "s1"};
  r.finalised_unix_ms = 1704067200000 + int64_t{i} * 1000;  // 2024-01-01T00:00:00Z + i s
  r.json =
      fmt::format(R"({{"anomaly":"{}","txns":[{},"t{}"],"key":{},"expected":"1","observed":"2",)"
                  R"("explanation":"read of key {} saw 2"}})",
                  r.anomaly, i, i + 1, i, i);
  return r;
}

std::vector<store::ViolationRecord> MakeRecords(int n) {
  std::vector<store::ViolationRecord> records;
  records.reserve(n);
  for (int i = 0; i < n; ++i) records.push_back(MakeRecord(i));
  return records;
}

rapidjson::Document ParseJson(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_ = std::make_unique<DaemonMetrics>("1.2.3-test");
    violations_ = std::make_unique<FakeViolationSource>(MakeRecords(25));
    api_ = std::make_unique<HttpApi>(metrics_.get(), violations_.get(), &status_, [this] {
      absl::MutexLock lock(&ready_mu_);
      return ready_;
    });
    server_ = std::make_unique<HttpServer>(HttpServer::Options{});
    ASSERT_TRUE(api_->RegisterOn(*server_).ok());
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<HttpTestClient>(server_->port());
    ASSERT_TRUE(client_->connected());
  }

  void TearDown() override { server_->Stop(); }

  void SetReady(absl::Status status) {
    absl::MutexLock lock(&ready_mu_);
    ready_ = std::move(status);
  }

  ClientResponse Get(const std::string& target) {
    auto r = client_->Get(target);
    EXPECT_TRUE(r.has_value()) << target;
    return r.value_or(ClientResponse{});
  }

  // Walks all pages of /api/v1/violations with the given query and returns the ids in order.
  std::vector<std::string> WalkPages(const std::string& query, int* pages) {
    std::vector<std::string> ids;
    std::string token;
    *pages = 0;
    do {
      std::string target = "/api/v1/violations?" + query;
      if (!token.empty()) target += "&page_token=" + token;
      ClientResponse r = Get(target);
      EXPECT_EQ(r.status, 200) << r.body;
      if (r.status != 200) break;
      rapidjson::Document d = ParseJson(r.body);
      for (const auto& v : d["violations"].GetArray()) ids.push_back(v["id"].GetString());
      token = d["next_page_token"].GetString();
      if (++*pages > 100) break;
    } while (!token.empty());
    return ids;
  }

  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<FakeViolationSource> violations_;
  FakeStatusSource status_;
  absl::Mutex ready_mu_;
  absl::Status ready_ ABSL_GUARDED_BY(ready_mu_) = absl::OkStatus();
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<HttpTestClient> client_;
};

TEST_F(HttpApiTest, HealthIsOkWhileServing) {
  SetReady(absl::UnavailableError("recovering the store"));  // liveness does not depend on it
  for (const char* path : {"/healthz", "/livez"}) {
    ClientResponse r = Get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body, "ok\n") << path;
  }
}

TEST_F(HttpApiTest, ReadyzFollowsTheReadinessCheck) {
  ClientResponse ready = Get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok\n");
  SetReady(absl::UnavailableError("draining"));
  ClientResponse draining = Get("/readyz");
  EXPECT_EQ(draining.status, 503);
  EXPECT_EQ(draining.body, "not ready: draining\n");
  SetReady(absl::OkStatus());
  EXPECT_EQ(Get("/readyz").status, 200);
}

TEST_F(HttpApiTest, MetricsHaveTheExpositionContentTypeAndCurrentValues) {
  metrics_->IngestedTransactions("orders").Increment(5);
  metrics_->Violations("online", "si", "EXT").Increment();
  ClientResponse r = Get("/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(r.body, HasSubstr("isowatch_ingested_transactions_total{stream=\"orders\"} 5\n"));
  EXPECT_THAT(r.body, HasSubstr("isowatch_violations_total{anomaly=\"EXT\",checker=\"online\","
                                "level=\"si\"} 1\n"));
  EXPECT_THAT(r.body, HasSubstr("isowatch_build_info{version=\"1.2.3-test\"} 1\n"));
  metrics_->IngestedTransactions("orders").Increment(2);
  EXPECT_THAT(Get("/metrics").body,
              HasSubstr("isowatch_ingested_transactions_total{stream=\"orders\"} 7\n"));
}

TEST_F(HttpApiTest, ReadyGaugeFollowsTheReadinessCheckAtScrapeTime) {
  EXPECT_THAT(Get("/metrics").body, HasSubstr("\nisowatch_ready 1\n"));
  SetReady(absl::UnavailableError("draining"));
  EXPECT_THAT(Get("/metrics").body, HasSubstr("\nisowatch_ready 0\n"));
  SetReady(absl::OkStatus());
  EXPECT_THAT(Get("/metrics").body, HasSubstr("\nisowatch_ready 1\n"));
}

// Runs `promtool check metrics` on `text` (on stdin); returns its exit code and output.
std::pair<int, std::string> Promtool(const std::string& text) {
  const std::filesystem::path dir = ::testing::TempDir();
  const std::string in = (dir / fmt::format("promtool_in_{}.txt", getpid())).string();
  const std::string out = (dir / fmt::format("promtool_out_{}.txt", getpid())).string();
  std::ofstream(in) << text;
  int rc = std::system(
      fmt::format("/usr/bin/promtool check metrics < '{}' > '{}' 2>&1", in, out).c_str());
  std::stringstream output;
  output << std::ifstream(out).rdbuf();
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, output.str()};
}

// Gives every family at least one series, including a label value that needs escaping.
void PopulateAll(DaemonMetrics& metrics) {
  metrics.IngestedTransactions("orders").Increment(3);
  metrics.IngestedTransactions("we\"ird\\stream\nname").Increment();
  metrics.RefusedTransactions("missing_commit_ts").Increment(2);
  metrics.duplicate_batches().Increment();
  metrics.queue_depth().Set(4);
  metrics.ingest_batch_latency().Observe(0.003);
  metrics.StreamWatermark("orders").Set(1.7e12);
  metrics.StreamLagSeconds("orders").Set(0.4);
  metrics.StreamPendingTransactions("orders").Set(12);
  metrics.Violations("online", "ser", "G-single").Increment();
  metrics.ViolationsSummarised("online", "ser", "G-single").Increment();
  metrics.provisional_verdicts().Set(2);
  metrics.flip_flops().Increment();
  metrics.late_arrivals().Increment(9);
  metrics.horizon_misses().Increment();
  metrics.check_latency().Observe(0.2);
  metrics.check_latency().Observe(75);
  metrics.retained_versions().Set(100);
  metrics.retained_transactions().Set(50);
  metrics.retained_provisional_reads().Set(5);
  metrics.engine_memory_bytes().Set(1 << 20);
  metrics.engine_memory_budget_bytes().Set(1 << 30);
  metrics.byte_collection().Observe(0.02);
  metrics.byte_strings_forgotten().Increment(70000);
}

TEST_F(HttpApiTest, PromtoolAcceptsTheMetrics) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/promtool")) << "Debian package prometheus";
  PopulateAll(*metrics_);
  ClientResponse r = Get("/metrics");
  ASSERT_EQ(r.status, 200);
  auto [rc, output] = Promtool(r.body);
  EXPECT_EQ(rc, 0) << output << "\n--- input ---\n" << r.body;

  // The check can fail: a malformed exposition and a counter without _total are rejected.
  EXPECT_NE(Promtool("isowatch_broken{ 1\n").first, 0);
  EXPECT_NE(Promtool("# HELP isowatch_things Things.\n# TYPE isowatch_things counter\n"
                     "isowatch_things 1\n")
                .first,
            0);
}

TEST_F(HttpApiTest, MetricsCoverEveryDocumentedFamily) {
  PopulateAll(*metrics_);
  std::string text = metrics_->Serialize();
  for (const char* name : {"isowatch_ingested_transactions_total",
                           "isowatch_refused_transactions_total",
                           "isowatch_duplicate_batches_total",
                           "isowatch_ingest_queue_batches",
                           "isowatch_ingest_batch_latency_seconds",
                           "isowatch_ingest_remembered_ids",
                           "isowatch_stream_watermark",
                           "isowatch_stream_lag_seconds",
                           "isowatch_stream_pending_transactions",
                           "isowatch_violations_total",
                           "isowatch_violations_summarised_total",
                           "isowatch_violations_unlogged_total",
                           "isowatch_violation_summaries",
                           "isowatch_violation_store_bytes",
                           "isowatch_findings_limit_reached",
                           "isowatch_provisional_verdicts",
                           "isowatch_flip_flops_total",
                           "isowatch_late_arrivals_total",
                           "isowatch_horizon_misses_total",
                           "isowatch_check_latency_seconds",
                           "isowatch_engine_retained_versions",
                           "isowatch_engine_retained_transactions",
                           "isowatch_engine_retained_provisional_reads",
                           "isowatch_engine_memory_bytes",
                           "isowatch_engine_memory_budget_bytes",
                           "isowatch_ready",
                           "isowatch_http_connections",
                           "isowatch_http_connections_dropped_total",
                           "isowatch_http_requests_rejected_total",
                           "isowatch_internal_bugs_total",
                           "isowatch_build_info",
                           "isowatch_uptime_seconds",
                           "process_start_time_seconds",
                           "process_resident_memory_bytes"}) {
    EXPECT_THAT(text, HasSubstr(fmt::format("# TYPE {} ", name))) << name;
  }
}

TEST_F(HttpApiTest, ViolationPagesVisitEveryViolationOnce) {
  int pages = 0;
  std::vector<std::string> ids = WalkPages("limit=10", &pages);
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(ids.size(), 25u);
  for (int i = 0; i < 25; ++i) EXPECT_EQ(ids[i], fmt::format("v{:03}", i));
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  // Filtered walk: only the matching ones, each once.
  std::vector<std::string> ext = WalkPages("anomaly=EXT&limit=2", &pages);
  std::vector<std::string> expected;
  for (int i = 0; i < 25; i += 4) expected.push_back(fmt::format("v{:03}", i));
  EXPECT_EQ(ext, expected);
  EXPECT_EQ(pages, 4);
}

TEST_F(HttpApiTest, ViolationObjectsMergeRecordFieldsAndDetail) {
  ClientResponse r = Get("/api/v1/violations?limit=1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "application/json");
  rapidjson::Document d = ParseJson(r.body);
  ASSERT_EQ(d["violations"].Size(), 1u);
  const auto& v = d["violations"][0];
  EXPECT_STREQ(v["id"].GetString(), "v000");
  EXPECT_STREQ(v["checker"].GetString(), "online");
  EXPECT_STREQ(v["level"].GetString(), "ser");
  EXPECT_STREQ(v["anomaly"].GetString(), "EXT");
  EXPECT_STREQ(v["ext_kind"].GetString(), "never");
  ASSERT_EQ(v["streams"].Size(), 1u);
  EXPECT_STREQ(v["streams"][0].GetString(), "s2");
  EXPECT_STREQ(v["finalised"].GetString(), "2024-01-01T00:00:00.000Z");
  EXPECT_EQ(v["finalised_unix_ms"].GetInt64(), 1704067200000);
  // From the record's own JSON.
  ASSERT_TRUE(v["txns"].IsArray());
  EXPECT_EQ(v["txns"][0].GetInt(), 0);
  EXPECT_STREQ(v["txns"][1].GetString(), "t1");
  EXPECT_EQ(v["key"].GetInt(), 0);
  EXPECT_STREQ(v["explanation"].GetString(), "read of key 0 saw 2");
  EXPECT_STREQ(d["next_page_token"].GetString(), "1");
}

TEST_F(HttpApiTest, FiltersArePassedThrough) {
  ClientResponse r =
      Get("/api/v1/violations?level=si&anomaly=EXT&stream=s1&since=2024-01-01T00:00:03Z"
          "&until=1704067220000&limit=7");
  ASSERT_EQ(r.status, 200) << r.body;
  store::ViolationFilter f = violations_->last_filter();
  EXPECT_EQ(f.level, "si");
  EXPECT_EQ(f.anomaly, "EXT");
  EXPECT_EQ(f.stream, "s1");
  EXPECT_EQ(f.since_unix_ms, 1704067203000);
  EXPECT_EQ(f.until_unix_ms, 1704067220000);
  EXPECT_EQ(violations_->last_limit(), 7u);
  // i in [3, 20), i % 4 == 0, i % 3 != 0, i % 5 != 0: 4, 8, 16.
  rapidjson::Document d = ParseJson(r.body);
  std::vector<std::string> ids;
  for (const auto& v : d["violations"].GetArray()) ids.push_back(v["id"].GetString());
  EXPECT_EQ(ids, (std::vector<std::string>{"v004", "v008", "v016"}));

  // RFC 3339 with an offset and fractional seconds.
  ASSERT_EQ(Get("/api/v1/violations?since=2024-01-01T02:00:01.5%2B02:00").status, 200);
  EXPECT_EQ(violations_->last_filter().since_unix_ms, 1704067201500);
  EXPECT_FALSE(violations_->last_filter().level.has_value());
}

TEST_F(HttpApiTest, LimitDefaultsAndIsCapped) {
  ASSERT_EQ(Get("/api/v1/violations").status, 200);
  EXPECT_EQ(violations_->last_limit(), 100u);
  ASSERT_EQ(Get("/api/v1/violations?limit=5000").status, 200);
  EXPECT_EQ(violations_->last_limit(), 1000u);
  ASSERT_EQ(Get("/api/v1/violations?limit=99999999999999999999999").status, 200);
  EXPECT_EQ(violations_->last_limit(), 1000u);
}

TEST_F(HttpApiTest, BadParametersAre400NamingTheParameter) {
  struct Case {
    const char* query;
    const char* parameter;
  };
  for (const Case& c :
       {Case{"limit=abc", "limit"}, Case{"limit=0", "limit"}, Case{"limit=-1", "limit"},
        Case{"limit=10x", "limit"}, Case{"since=yesterday", "since"},
        Case{"until=2024-13-01T00:00:00Z", "until"}, Case{"since=2024-01-01", "since"},
        Case{"level=", "level"}, Case{"color=red", "color"}, Case{"stream=a&stream=b", "stream"}}) {
    int before = violations_->queries();
    ClientResponse r = Get(fmt::format("/api/v1/violations?{}", c.query));
    EXPECT_EQ(r.status, 400) << c.query;
    EXPECT_EQ(r.headers["content-type"], "application/json");
    rapidjson::Document d = ParseJson(r.body);
    ASSERT_TRUE(d.IsObject() && d.HasMember("parameter")) << r.body;
    EXPECT_STREQ(d["parameter"].GetString(), c.parameter) << c.query;
    EXPECT_THAT(std::string(d["error"].GetString()), HasSubstr(c.parameter)) << c.query;
    EXPECT_EQ(violations_->queries(), before) << "a bad request must not reach the source";
  }
}

TEST_F(HttpApiTest, SourceErrorsMapToStatusCodes) {
  ClientResponse bad_token = Get("/api/v1/violations?page_token=garbage");
  EXPECT_EQ(bad_token.status, 400);
  EXPECT_STREQ(ParseJson(bad_token.body)["parameter"].GetString(), "page_token");
  violations_->set_unavailable(true);
  ClientResponse down = Get("/api/v1/violations");
  EXPECT_EQ(down.status, 503);
  EXPECT_THAT(down.body, HasSubstr("store is closed"));
}

TEST_F(HttpApiTest, StatusReportsStreamsCountsMemoryAndVersion) {
  SetReady(absl::UnavailableError("recovering"));
  ClientResponse r = Get("/api/v1/status");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "application/json");
  rapidjson::Document d = ParseJson(r.body);
  EXPECT_STREQ(d["version"].GetString(), "1.2.3-test");
  EXPECT_STREQ(d["start_time"].GetString(), "2024-05-01T12:00:00.000Z");
  EXPECT_DOUBLE_EQ(d["uptime_seconds"].GetDouble(), 42.5);
  EXPECT_FALSE(d["ready"].GetBool());
  EXPECT_STREQ(d["not_ready_reason"].GetString(), "recovering");
  ASSERT_EQ(d["streams"].Size(), 2u);
  const auto& s0 = d["streams"][0];
  EXPECT_STREQ(s0["name"].GetString(), "orders");
  EXPECT_EQ(s0["watermark"]["physical"].GetInt64(), 455000614796787712);
  EXPECT_EQ(s0["watermark"]["logical"].GetInt64(), 0);
  EXPECT_DOUBLE_EQ(s0["lag_seconds"].GetDouble(), 1.25);
  EXPECT_FALSE(s0["closed"].GetBool());
  EXPECT_EQ(s0["pending_transactions"].GetUint64(), 17u);
  EXPECT_EQ(s0["ingested_transactions"].GetUint64(), 1000u);
  EXPECT_EQ(s0["committed_transactions"].GetUint64(), 990u);
  EXPECT_EQ(s0["acked_sequence"].GetUint64(), 9u);
  const auto& s1 = d["streams"][1];
  EXPECT_STREQ(s1["name"].GetString(), "replay-1");
  EXPECT_TRUE(s1["watermark"].IsNull());
  EXPECT_TRUE(s1["lag_seconds"].IsNull());
  EXPECT_TRUE(s1["closed"].GetBool());
  EXPECT_EQ(s1["pending_transactions"].GetUint64(), 0u);
  EXPECT_EQ(d["counts"]["ingested_transactions"].GetUint64(), 1000u);
  EXPECT_EQ(d["counts"]["refused_transactions"].GetUint64(), 3u);
  EXPECT_EQ(d["counts"]["violations"].GetUint64(), 2u);
  EXPECT_EQ(d["counts"]["violations_stored"].GetUint64(), 1u);
  EXPECT_EQ(d["counts"]["violations_summarised"].GetUint64(), 1u);
  const auto& findings = d["findings"];
  ASSERT_TRUE(findings.IsObject());
  EXPECT_STREQ(findings["state"].GetString(), "summarising");
  EXPECT_EQ(findings["summaries"].GetUint64(), 1u);
  EXPECT_EQ(findings["store_bytes"].GetUint64(), 700u);
  EXPECT_EQ(findings["max_store_bytes"].GetUint64(), 1u << 20);
  EXPECT_STREQ(findings["log_state"].GetString(), "rate_limited");
  EXPECT_EQ(findings["logged"].GetUint64(), 1u);
  EXPECT_EQ(findings["unlogged"].GetUint64(), 5u);
  EXPECT_EQ(findings["log_bytes"].GetUint64(), 300u);
  EXPECT_EQ(findings["max_log_bytes"].GetUint64(), 1024u);
  EXPECT_EQ(d["memory"]["resident_bytes"].GetUint64(), 123456789u);
  EXPECT_EQ(d["memory"]["engine_bytes"].GetUint64(), 4567u);
  EXPECT_EQ(d["memory"]["history_bytes"].GetUint64(), 5678u);
  EXPECT_EQ(d["memory"]["spill_bytes"].GetUint64(), 6789u);
  EXPECT_EQ(d["memory"]["retained_versions"].GetUint64(), 11u);
  EXPECT_EQ(d["memory"]["rocksdb_bytes"].GetUint64(), 579u);
  EXPECT_EQ(d["memory"]["rocksdb"]["store"]["memtables"].GetUint64(), 100u);
  EXPECT_EQ(d["memory"]["rocksdb"]["store"]["table_readers"].GetUint64(), 20u);
  EXPECT_EQ(d["memory"]["rocksdb"]["store"]["block_cache"].GetUint64(), 3u);
  EXPECT_EQ(d["memory"]["rocksdb"]["spill"]["memtables"].GetUint64(), 400u);
  const auto& windows = d["windows"];
  ASSERT_TRUE(windows.IsObject());
  EXPECT_TRUE(windows["enabled"].GetBool());
  EXPECT_EQ(windows["sealed"].GetUint64(), 12u);
  EXPECT_EQ(windows["done"].GetUint64(), 10u);
  EXPECT_EQ(windows["dropped"].GetUint64(), 1u);
  EXPECT_EQ(windows["queued"].GetUint64(), 2u);
  EXPECT_EQ(windows["running"].GetUint64(), 1u);
  EXPECT_EQ(windows["late_transactions"].GetUint64(), 4u);
  ASSERT_EQ(windows["checkers"].Size(), 1u);
  EXPECT_STREQ(windows["checkers"][0]["name"].GetString(), "adya");
  EXPECT_EQ(windows["checkers"][0]["checked"].GetUint64(), 9u);
  EXPECT_EQ(windows["checkers"][0]["unknown"].GetUint64(), 1u);
  EXPECT_EQ(windows["checkers"][0]["violations"].GetUint64(), 3u);
  EXPECT_DOUBLE_EQ(windows["checkers"][0]["seconds"].GetDouble(), 0.5);
  SetReady(absl::OkStatus());
  rapidjson::Document ready = ParseJson(Get("/api/v1/status").body);
  EXPECT_TRUE(ready["ready"].GetBool());
  EXPECT_FALSE(ready.HasMember("not_ready_reason"));
}

TEST_F(HttpApiTest, SummariesShowTheirGroupCountsAndExamples) {
  ClientResponse r = Get("/api/v1/summaries?anomaly=NOCONFLICT&scope=key&limit=1");
  ASSERT_EQ(r.status, 200) << r.body;
  const store::SummaryFilter filter = violations_->last_summary_filter();
  EXPECT_EQ(filter.anomaly, "NOCONFLICT");
  EXPECT_EQ(filter.scope, store::SummaryScope::kKey);
  EXPECT_FALSE(filter.level.has_value());
  rapidjson::Document d = ParseJson(r.body);
  ASSERT_EQ(d["summaries"].Size(), 1u);
  const auto& s = d["summaries"][0];
  EXPECT_STREQ(s["scope"].GetString(), "key");
  EXPECT_STREQ(s["checker"].GetString(), "online");
  EXPECT_STREQ(s["level"].GetString(), "si");
  EXPECT_STREQ(s["anomaly"].GetString(), "NOCONFLICT");
  EXPECT_STREQ(s["key"].GetString(), "7");
  EXPECT_FALSE(s.HasMember("txn"));
  EXPECT_EQ(s["kept"].GetUint64(), 10u);
  EXPECT_EQ(s["summarised"].GetUint64(), 3123740u);
  EXPECT_STREQ(s["first"]["id"].GetString(), "a1");
  EXPECT_STREQ(s["first"]["finalised"].GetString(), "2024-01-01T00:00:00.000Z");
  EXPECT_STREQ(s["last"]["txns"][1].GetString(), "2500");
  EXPECT_STREQ(s["streams"][0].GetString(), "replay");
  EXPECT_STREQ(d["next_page_token"].GetString(), "1");

  rapidjson::Document next = ParseJson(Get("/api/v1/summaries?limit=1&page_token=1").body);
  ASSERT_EQ(next["summaries"].Size(), 1u);
  EXPECT_STREQ(next["summaries"][0]["scope"].GetString(), "txn");
  EXPECT_STREQ(next["summaries"][0]["txn"].GetString(), "long");
  EXPECT_STREQ(next["summaries"][0]["txn_stream"].GetString(), "s1");
  EXPECT_STREQ(next["next_page_token"].GetString(), "");
}

TEST_F(HttpApiTest, BadSummaryParametersAre400NamingTheParameter) {
  for (const auto& [target, parameter] : std::vector<std::pair<std::string, std::string>>{
           {"/api/v1/summaries?scope=row", "scope"},
           {"/api/v1/summaries?stream=s1", "stream"},
           {"/api/v1/summaries?limit=0", "limit"},
           {"/api/v1/summaries?level=", "level"},
           {"/api/v1/summaries?page_token=9", "page_token"}}) {
    ClientResponse r = Get(target);
    EXPECT_EQ(r.status, 400) << target;
    rapidjson::Document d = ParseJson(r.body);
    EXPECT_EQ(std::string(d["parameter"].GetString()), parameter) << target << ": " << r.body;
  }
}

TEST_F(HttpApiTest, OnlyGetAndHeadAreAllowed) {
  auto r = client_->Request("POST", "/api/v1/violations", "{}");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 405);
}

TEST(HttpApiProvidersTest, MissingProvidersAnswer503) {
  HttpApi api(nullptr, nullptr, nullptr, nullptr);
  HttpRequest request;
  request.method = "GET";
  EXPECT_EQ(api.ServeMetrics(request).status, 503);
  EXPECT_EQ(api.ServeViolations(request).status, 503);
  EXPECT_EQ(api.ServeStatus(request).status, 503);
  EXPECT_EQ(api.ServeReady(request).status, 200);  // no check: always ready
  EXPECT_EQ(api.ServeHealth(request).status, 200);
}

// /api/v1/* behind a token, /metrics and the probes open or not as the options say.
class HttpApiTokenTest : public ::testing::Test {
 protected:
  void Start(bool metrics_need_token, bool health_need_token) {
    HttpApi::Options options;
    options.token = "t0ken";
    options.metrics_need_token = metrics_need_token;
    options.health_need_token = health_need_token;
    api_ = std::make_unique<HttpApi>(&metrics_, &violations_, &status_, nullptr, options);
    server_ = std::make_unique<HttpServer>(HttpServer::Options{});
    ASSERT_TRUE(api_->RegisterOn(*server_).ok());
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
  }

  // The status of GET `target` with `authorization` as the Authorization header (none if empty).
  int Status(const std::string& target, const std::string& authorization = "") {
    HttpTestClient client(server_->port());
    std::string request = fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\n", target);
    if (!authorization.empty()) request += fmt::format("Authorization: {}\r\n", authorization);
    auto r = client.SendBytes(request + "\r\n");
    if (!r.has_value()) return 0;
    if (r->status == 401) {
      EXPECT_EQ(r->headers["www-authenticate"], R"(Bearer realm="isowatch")") << target;
    }
    return r->status;
  }

  double Unauthorized() { return metrics_.HttpRequestsRejected("unauthorized").Value(); }

  DaemonMetrics metrics_{"test"};
  FakeViolationSource violations_{MakeRecords(3)};
  FakeStatusSource status_;
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpApiTokenTest, TheApiNeedsTheTokenAndTheRestIsOpenByDefault) {
  Start(/*metrics_need_token=*/false, /*health_need_token=*/false);
  for (const char* target : {"/api/v1/status", "/api/v1/violations"}) {
    EXPECT_EQ(Status(target), 401) << target;
    EXPECT_EQ(Status(target, "Bearer wrong"), 401) << target;
    EXPECT_EQ(Status(target, "Basic dDBrZW4="), 401) << target;
    EXPECT_EQ(Status(target, "Bearer t0ken"), 200) << target;
    EXPECT_EQ(Status(target, "bearer  t0ken "), 200) << target;
  }
  EXPECT_EQ(Unauthorized(), 6);
  for (const char* target : {"/metrics", "/healthz", "/livez", "/readyz"}) {
    EXPECT_EQ(Status(target), 200) << target;
  }
}

TEST_F(HttpApiTokenTest, MetricsAndHealthCanNeedTheTokenEachOnItsOwn) {
  Start(/*metrics_need_token=*/true, /*health_need_token=*/false);
  EXPECT_EQ(Status("/metrics"), 401);
  EXPECT_EQ(Status("/metrics", "Bearer t0ken"), 200);
  EXPECT_EQ(Status("/healthz"), 200);
  server_->Stop();
  Start(/*metrics_need_token=*/false, /*health_need_token=*/true);
  EXPECT_EQ(Status("/metrics"), 200);
  for (const char* target : {"/healthz", "/livez", "/readyz"}) {
    EXPECT_EQ(Status(target), 401) << target;
    EXPECT_EQ(Status(target, "Bearer t0ken"), 200) << target;
  }
}

TEST(HttpApiTokenSetupTest, ATokenForMetricsWithoutATokenIsAnError) {
  HttpApi::Options options;
  options.metrics_need_token = true;
  HttpApi api(nullptr, nullptr, nullptr, nullptr, options);
  HttpServer server(HttpServer::Options{});
  EXPECT_EQ(api.RegisterOn(server).code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpApiProvidersTest, UnreadableRecordDetailStillShowsTheRecord) {
  store::ViolationRecord record = MakeRecord(1);
  record.json = "not json";
  FakeViolationSource source({record});
  HttpApi api(nullptr, &source, nullptr, nullptr);
  HttpRequest request;
  request.method = "GET";
  HttpResponse r = api.ServeViolations(request);
  ASSERT_EQ(r.status, 200);
  rapidjson::Document d = ParseJson(r.body);
  const auto& v = d["violations"][0];
  EXPECT_STREQ(v["id"].GetString(), "v001");
  EXPECT_TRUE(v.HasMember("detail_error"));
}

}  // namespace
}  // namespace isowatch::server
