// SPDX-License-Identifier: Apache-2.0
// A real Prometheus server (Debian package `prometheus`) scrapes the daemon's /metrics endpoint,
// and the scraped series are read back through Prometheus' query API.

#include <cctype>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "isowatch/server/http_api.h"
#include "isowatch/server/http_server.h"
#include "isowatch/server/metrics.h"

#include "tests/unit/server/http_test_client.h"

extern char** environ;

namespace isowatch::server {
namespace {

using Clock = std::chrono::steady_clock;
using testing::HttpTestClient;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

// A port that was free a moment ago (bind to port 0 and release it). Prometheus takes its
// listen address on the command line, so the test has to choose one.
uint16_t PickFreePort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), 0);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (ec) return 0;
  uint16_t port = acceptor.local_endpoint(ec).port();
  return ec ? 0 : port;
}

std::string UrlEncode(std::string_view in) {
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

// One Prometheus server process in a temporary directory. Stop() (or the destructor) sends
// SIGTERM and waits for it, escalating to SIGKILL after a deadline.
class PrometheusProcess {
 public:
  PrometheusProcess(std::filesystem::path dir, uint16_t target_port) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_ / "data");
    std::ofstream(dir_ / "prometheus.yml") << fmt::format(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: isowatch\n"
        "    static_configs:\n"
        "      - targets: ['127.0.0.1:{}']\n",
        target_port);
  }

  ~PrometheusProcess() { Stop(); }

  // Starts the server listening on 127.0.0.1:port. False when it cannot be spawned.
  bool Start(uint16_t port) {
    port_ = port;
    std::vector<std::string> args = {
        kPrometheus,
        fmt::format("--config.file={}", (dir_ / "prometheus.yml").string()),
        fmt::format("--storage.tsdb.path={}", (dir_ / "data").string()),
        fmt::format("--web.listen-address=127.0.0.1:{}", port),
        "--storage.tsdb.retention.time=1h",
        "--log.level=info",
    };
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = (dir_ / "prometheus.log").string();
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    int rc = posix_spawn(&pid_, kPrometheus, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = -1;
    return pid_ > 0;
  }

  // True while the process has not exited.
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return false;
    }
    return true;
  }

  // Returns the exit status (as from waitpid), or nullopt if it had to be killed.
  std::optional<int> Stop() {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    exit_status_ = std::nullopt;
    return std::nullopt;
  }

  // GET on the Prometheus HTTP API; nullopt when it does not answer (yet).
  std::optional<std::string> Get(const std::string& target) {
    HttpTestClient client(port_, std::chrono::seconds(5));
    if (!client.connected()) return std::nullopt;
    auto response = client.Get(target, /*keep_alive=*/false);
    if (!response || response->status != 200) return std::nullopt;
    return response->body;
  }

  // The value of an instant query that yields one sample, as Prometheus prints it ("1234").
  std::optional<std::string> QueryOne(const std::string& promql) {
    std::optional<std::string> body = Get("/api/v1/query?query=" + UrlEncode(promql));
    if (!body) return std::nullopt;
    rapidjson::Document d;
    d.Parse(body->data(), body->size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("data")) return std::nullopt;
    const auto& result = d["data"]["result"];
    if (!result.IsArray() || result.Size() != 1) return std::nullopt;
    return std::string(result[0]["value"][1].GetString());
  }

  std::string Log() const { return ReadFile(dir_ / "prometheus.log"); }

 private:
  std::filesystem::path dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

class PrometheusScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kPrometheus)) << "needs the Debian package prometheus";
    dir_ = std::filesystem::path(::testing::TempDir()) /
           fmt::format("isowatch_prometheus_{}", getpid());
    std::filesystem::remove_all(dir_);
    metrics_ = std::make_unique<DaemonMetrics>("9.8.7-scrape");
    api_ = std::make_unique<HttpApi>(metrics_.get(), nullptr, nullptr, nullptr);
    server_ = std::make_unique<HttpServer>(HttpServer::Options{});
    ASSERT_TRUE(api_->RegisterOn(*server_).ok());
    ASSERT_TRUE(server_->Start().ok());
  }

  void TearDown() override {
    if (prometheus_) prometheus_->Stop();
    if (server_) server_->Stop();
    std::filesystem::remove_all(dir_);
  }

  // Starts Prometheus on a free port; retries with another port if the chosen one was taken
  // in the meantime (the process then exits at once).
  void StartPrometheus() {
    for (int attempt = 0; attempt < 3; ++attempt) {
      prometheus_ = std::make_unique<PrometheusProcess>(dir_, server_->port());
      uint16_t port = PickFreePort();
      ASSERT_NE(port, 0);
      ASSERT_TRUE(prometheus_->Start(port));
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (Clock::now() < deadline && prometheus_->Running()) {
        if (prometheus_->Get("/-/ready")) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      std::string log = prometheus_->Log();
      prometheus_->Stop();
      ADD_FAILURE() << "Prometheus did not become ready on port " << port << "; log:\n" << log;
    }
    FAIL() << "could not start Prometheus";
  }

  // Polls an instant query until it returns `expected` or 60 s pass.
  void WaitForValue(const std::string& promql, const std::string& expected) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    std::optional<std::string> last;
    while (Clock::now() < deadline) {
      last = prometheus_->QueryOne(promql);
      if (last == expected) return;
      ASSERT_TRUE(prometheus_->Running()) << "Prometheus exited; log:\n" << prometheus_->Log();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    FAIL() << promql << " never returned " << expected << " (last: " << last.value_or("none")
           << "); Prometheus log:\n"
           << prometheus_->Log();
  }

  std::filesystem::path dir_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<PrometheusProcess> prometheus_;
};

TEST_F(PrometheusScrapeTest, ScrapedSeriesCanBeQueriedBack) {
  metrics_->IngestedTransactions("scrape-test").Increment(1234);
  metrics_->Violations("online", "si", "EXT").Increment(3);
  metrics_->check_latency().Observe(0.02);
  metrics_->check_latency().Observe(0.5);
  StartPrometheus();
  if (HasFatalFailure()) return;

  WaitForValue("isowatch_ingested_transactions_total{stream=\"scrape-test\"}", "1234");
  EXPECT_EQ(prometheus_->QueryOne("up{job=\"isowatch\"}"), "1");
  EXPECT_EQ(prometheus_->QueryOne("isowatch_violations_total{level=\"si\",anomaly=\"EXT\"}"), "3");
  EXPECT_EQ(prometheus_->QueryOne("isowatch_build_info{version=\"9.8.7-scrape\"}"), "1");
  EXPECT_EQ(prometheus_->QueryOne("isowatch_check_latency_seconds_count"), "2");
  EXPECT_EQ(prometheus_->QueryOne("isowatch_check_latency_seconds_bucket{le=\"0.025\"}"), "1");

  // Later scrapes see later values.
  metrics_->IngestedTransactions("scrape-test").Increment(766);
  WaitForValue("isowatch_ingested_transactions_total{stream=\"scrape-test\"}", "2000");

  std::optional<int> status = prometheus_->Stop();
  ASSERT_TRUE(status.has_value()) << "Prometheus had to be killed";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "status " << *status << "; log:\n"
                                                               << prometheus_->Log();
}

}  // namespace
}  // namespace isowatch::server
