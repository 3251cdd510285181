// SPDX-License-Identifier: Apache-2.0
// HttpServer against slow, idle and greedy clients: deadlines, the connection limit, and the pool
// that keeps a saturated API from delaying the inline routes (docs/operations.md, "HTTP under
// load").
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <gtest/gtest.h>

#include "isowatch/server/http_server.h"

#include "tests/unit/server/http_test_client.h"

namespace isowatch::server {
namespace {

using std::chrono::milliseconds;
using testing::HttpTestClient;

// What the server reported (HttpServer::Events), with waits. Thread-safe.
class EventLog {
 public:
  HttpServer::Events Events() {
    return {.dropped = [this](HttpDrop d) { Add(dropped_, static_cast<size_t>(d)); },
            .rejected = [this](HttpRejection r) { Add(rejected_, static_cast<size_t>(r)); }};
  }
  // Waits up to 10 s until `drop` was reported `n` times; returns the count then.
  int WaitDropped(HttpDrop drop, int n) {
    const size_t i = static_cast<size_t>(drop);
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return dropped_[i] >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
    return dropped_[i];
  }
  int dropped(HttpDrop drop) {
    absl::MutexLock lock(&mu_);
    return dropped_[static_cast<size_t>(drop)];
  }
  int rejected(HttpRejection rejection) {
    absl::MutexLock lock(&mu_);
    return rejected_[static_cast<size_t>(rejection)];
  }

 private:
  template <size_t N>
  void Add(std::array<int, N>& counts, size_t i) {
    absl::MutexLock lock(&mu_);
    ++counts[i];
  }

  absl::Mutex mu_;
  std::array<int, std::size(kAllHttpDrops)> dropped_ ABSL_GUARDED_BY(mu_){};
  std::array<int, std::size(kAllHttpRejections)> rejected_ ABSL_GUARDED_BY(mu_){};
};

// A gate the handlers of /slow wait at until it opens. Thread-safe.
class Gate {
 public:
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits (at most 10 s) for the gate; counts the waiters meanwhile.
  void Pass() {
    absl::MutexLock lock(&mu_);
    ++waiting_;
    mu_.AwaitWithTimeout(absl::Condition(&open_), absl::Seconds(10));
    --waiting_;
  }
  // Waits (at most 10 s) until `n` handlers wait at the gate.
  bool WaitForWaiters(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return waiting_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

class HttpServerAbuseTest : public ::testing::Test {
 protected:
  void TearDown() override {
    gate_.Open();
    if (server_ != nullptr) server_->Stop();
  }

  // Starts a server with `options` (and events_'s events): GET /fast inline, GET /slow pooled
  // (waits at gate_), GET /big inline (a response of 32 MiB).
  void StartServer(HttpServer::Options options) {
    options.events = events_.Events();
    server_ = std::make_unique<HttpServer>(std::move(options));
    ASSERT_TRUE(server_
                    ->Handle(
                        "GET", "/fast",
                        [](const HttpRequest&) { return HttpResponse::Text(200, "fast\n"); },
                        RouteKind::kInline)
                    .ok());
    ASSERT_TRUE(server_
                    ->Handle("GET", "/slow",
                             [this](const HttpRequest&) {
                               gate_.Pass();
                               return HttpResponse::Text(200, "slow\n");
                             })
                    .ok());
    ASSERT_TRUE(server_
                    ->Handle(
                        "GET", "/big",
                        [](const HttpRequest&) {
                          return HttpResponse::Text(200, std::string(size_t{32} << 20, 'x'));
                        },
                        RouteKind::kInline)
                    .ok());
    ASSERT_TRUE(server_->Start().ok());
  }

  // Waits (at most 10 s) until `n` connections wait for or read a request.
  bool WaitIdle(size_t n) {
    for (int i = 0; i < 1000; ++i) {
      if (server_->idle_connections() >= n) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  // A GET of /fast on a new connection answers 200.
  bool FastAnswers() {
    HttpTestClient client(server_->port());
    std::optional<testing::ClientResponse> r = client.Get("/fast");
    return r.has_value() && r->status == 200;
  }

  EventLog events_;
  Gate gate_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerAbuseTest, ClosesASilentConnectionAtTheHeaderDeadline) {
  HttpServer::Options options;
  options.header_timeout = milliseconds(200);
  StartServer(options);
  HttpTestClient silent(server_->port());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.WaitClosed());  // the client waits up to 10 s
  EXPECT_EQ(events_.WaitDropped(HttpDrop::kHeaderTimeout, 1), 1);
  EXPECT_EQ(events_.dropped(HttpDrop::kIdleTimeout), 0);
}

TEST_F(HttpServerAbuseTest, ClosesAHeaderThatNeverEnds) {
  HttpServer::Options options;
  options.header_timeout = milliseconds(300);
  StartServer(options);
  HttpTestClient slow(server_->port());
  ASSERT_TRUE(slow.Write("GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a"));
  ASSERT_TRUE(slow.Write("aaaa"));
  EXPECT_TRUE(slow.WaitClosed());
  EXPECT_EQ(events_.WaitDropped(HttpDrop::kHeaderTimeout, 1), 1);
  // Meanwhile and afterwards, other clients are served.
  EXPECT_TRUE(FastAnswers());
}

TEST_F(HttpServerAbuseTest, ClosesABodyThatNeverEnds) {
  HttpServer::Options options;
  options.body_timeout = milliseconds(200);
  StartServer(options);
  HttpTestClient slow(server_->port());
  ASSERT_TRUE(slow.Write("GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\nabc"));
  EXPECT_TRUE(slow.WaitClosed());
  EXPECT_EQ(events_.WaitDropped(HttpDrop::kBodyTimeout, 1), 1);
  EXPECT_EQ(events_.dropped(HttpDrop::kHeaderTimeout), 0);
}

TEST_F(HttpServerAbuseTest, AKeptAliveConnectionHasTheIdleTimeoutBetweenRequests) {
  HttpServer::Options options;
  options.header_timeout = milliseconds(300);
  options.idle_timeout = std::chrono::seconds(5);
  StartServer(options);
  HttpTestClient client(server_->port());
  ASSERT_TRUE(client.Get("/fast").has_value());
  // Longer than the header deadline, shorter than the idle one: the connection stays.
  std::this_thread::sleep_for(milliseconds(1000));
  std::optional<testing::ClientResponse> again = client.Get("/fast");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(events_.dropped(HttpDrop::kHeaderTimeout), 0);
  EXPECT_EQ(events_.dropped(HttpDrop::kIdleTimeout), 0);
}

TEST_F(HttpServerAbuseTest, ClosesAKeptAliveConnectionAtTheIdleDeadline) {
  HttpServer::Options options;
  options.idle_timeout = milliseconds(200);
  StartServer(options);
  HttpTestClient client(server_->port());
  ASSERT_TRUE(client.Get("/fast").has_value());
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_EQ(events_.WaitDropped(HttpDrop::kIdleTimeout, 1), 1);
}

TEST_F(HttpServerAbuseTest, ClosesAConnectionThatDoesNotTakeItsResponse) {
  HttpServer::Options options;
  options.write_timeout = milliseconds(300);
  StartServer(options);
  // 32 MiB is more than the socket buffers hold, and the client never reads.
  HttpTestClient client(server_->port());
  ASSERT_TRUE(client.Write("GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  EXPECT_EQ(events_.WaitDropped(HttpDrop::kWriteTimeout, 1), 1);
  EXPECT_TRUE(FastAnswers());
}

TEST_F(HttpServerAbuseTest, ANewConnectionEvictsTheConnectionIdleTheLongest) {
  HttpServer::Options options;
  options.max_connections = 2;
  StartServer(options);
  HttpTestClient first(server_->port());
  ASSERT_TRUE(first.Get("/fast").has_value());
  HttpTestClient second(server_->port());
  ASSERT_TRUE(second.Get("/fast").has_value());
  // Both wait for their next request; `first` has waited longer.
  ASSERT_TRUE(WaitIdle(2));
  HttpTestClient third(server_->port());
  std::optional<testing::ClientResponse> r = third.Get("/fast");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(first.WaitClosed());
  EXPECT_EQ(events_.WaitDropped(HttpDrop::kEvicted, 1), 1);
  std::optional<testing::ClientResponse> kept = second.Get("/fast");
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->status, 200);
}

TEST_F(HttpServerAbuseTest, ManySilentConnectionsDoNotLockOutAProbe) {
  HttpServer::Options options;
  options.max_connections = 8;
  StartServer(options);
  std::vector<std::unique_ptr<HttpTestClient>> silent;
  for (int i = 0; i < 40; ++i) {
    silent.push_back(std::make_unique<HttpTestClient>(server_->port()));
    ASSERT_TRUE(silent.back()->connected());
  }
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(FastAnswers()) << "probe " << i;
  EXPECT_GE(events_.WaitDropped(HttpDrop::kEvicted, 40 - 8), 40 - 8);
  EXPECT_LE(server_->open_connections(), 8u);
}

TEST_F(HttpServerAbuseTest, RefusesANewConnectionWhenEveryConnectionIsBusy) {
  HttpServer::Options options;
  options.max_connections = 1;
  StartServer(options);
  std::optional<testing::ClientResponse> slow_answer;
  std::thread slow_client([&] {
    HttpTestClient client(server_->port());
    slow_answer = client.Get("/slow");
  });
  ASSERT_TRUE(gate_.WaitForWaiters(1));
  HttpTestClient refused(server_->port());
  EXPECT_FALSE(refused.Get("/fast").has_value());
  EXPECT_EQ(events_.WaitDropped(HttpDrop::kRefused, 1), 1);
  gate_.Open();
  slow_client.join();
  ASSERT_TRUE(slow_answer.has_value());
  EXPECT_EQ(slow_answer->status, 200);
}

TEST_F(HttpServerAbuseTest, InlineRoutesAnswerWhileTheApiIsSaturated) {
  HttpServer::Options options;
  options.api_threads = 2;
  options.api_queue = 0;
  StartServer(options);
  // Two requests take both pool threads (and wait at the gate).
  std::vector<std::optional<testing::ClientResponse>> answers(2);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([this, &answers, i] {
      HttpTestClient client(server_->port());
      answers[i] = client.Get("/slow");
    });
  }
  ASSERT_TRUE(gate_.WaitForWaiters(2));
  HttpTestClient third(server_->port());
  std::optional<testing::ClientResponse> busy = third.Get("/slow");
  ASSERT_TRUE(busy.has_value());
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->headers["retry-after"], "1");
  EXPECT_EQ(events_.rejected(HttpRejection::kApiBusy), 1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(FastAnswers()) << "probe " << i;
  gate_.Open();
  for (std::thread& t : clients) t.join();
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->status, 200);
  }
}

TEST_F(HttpServerAbuseTest, PooledRequestsWaitInTheQueueForAThread) {
  HttpServer::Options options;
  options.api_threads = 1;
  options.api_queue = 4;
  StartServer(options);
  std::vector<std::optional<testing::ClientResponse>> answers(3);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([this, &answers, i] {
      HttpTestClient client(server_->port());
      answers[i] = client.Get("/slow");
    });
  }
  ASSERT_TRUE(gate_.WaitForWaiters(1));
  gate_.Open();
  for (std::thread& t : clients) t.join();
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->status, 200);
  }
  EXPECT_EQ(events_.rejected(HttpRejection::kApiBusy), 0);
}

}  // namespace
}  // namespace isowatch::server
