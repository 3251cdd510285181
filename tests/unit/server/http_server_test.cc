// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/http_server.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/server/internal/request_target.h"

#include "tests/unit/server/http_test_client.h"

namespace isowatch::server {
namespace {

using ::testing::HasSubstr;
using testing::HttpTestClient;

// Echoes the request: method, path, query parameters and body.
HttpResponse Echo(const HttpRequest& request) {
  std::string text = fmt::format("{} {}", request.method, request.path);
  for (const auto& [name, value] : request.query) text += fmt::format("|{}={}", name, value);
  if (!request.body.empty()) text += fmt::format("|body={}", request.body);
  return HttpResponse::Text(200, text);
}

class HttpServerTest : public ::testing::Test {
 protected:
  // Starts a server on 127.0.0.1, a free port, with the echo handler on a few routes.
  void StartServer(const HttpServer::Options& options = {}) {
    server_ = std::make_unique<HttpServer>(options);
    ASSERT_TRUE(server_->Handle("GET", "/a", Echo).ok());
    ASSERT_TRUE(
        server_
            ->Handle("GET", "/b",
                     [](const HttpRequest&) { return HttpResponse::Json(201, R"({"b":true})"); })
            .ok());
    ASSERT_TRUE(server_->Handle("GET", "/echo", Echo).ok());
    ASSERT_TRUE(server_->Handle("POST", "/echo", Echo).ok());
    ASSERT_TRUE(server_
                    ->Handle("GET", "/throws",
                             [](const HttpRequest&) -> HttpResponse {
                               throw std::runtime_error("handler failure");
                             })
                    .ok());
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
  }

  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, RoutesExactPaths) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_TRUE(client.connected());
  auto a = client.Get("/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body, "GET /a");
  EXPECT_EQ(a->headers["content-type"], "text/plain; charset=utf-8");
  auto b = client.Get("/b");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->status, 201);
  EXPECT_EQ(b->body, R"({"b":true})");
  EXPECT_EQ(b->headers["content-type"], "application/json");
  // Exact match only: no prefix or trailing-slash matching.
  for (const char* target : {"/a/", "/ab", "/", "/A"}) {
    auto r = client.Get(target);
    ASSERT_TRUE(r.has_value()) << target;
    EXPECT_EQ(r->status, 404) << target;
  }
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405) {
  StartServer();
  HttpTestClient client(server_->port());
  auto missing = client.Get("/nothing-here");
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 404);
  auto wrong = client.Request("DELETE", "/a");
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->headers["allow"], "GET, HEAD");
  auto post_get_only = client.Request("POST", "/b", "x");
  ASSERT_TRUE(post_get_only.has_value());
  EXPECT_EQ(post_get_only->status, 405);
  auto post = client.Request("POST", "/echo", "payload");
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->status, 200);
  EXPECT_EQ(post->body, "POST /echo|body=payload");
}

TEST_F(HttpServerTest, HeadAnswersGetRoutesWithoutBody) {
  StartServer();
  HttpTestClient client(server_->port());
  auto head = client.Request("HEAD", "/a");
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  // Same length as the GET body ("HEAD /a" has the length of "GET /a" plus one).
  EXPECT_EQ(head->headers["content-length"], "7");
  // The connection is still usable afterwards.
  auto get = client.Get("/a");
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->body, "GET /a");
}

TEST_F(HttpServerTest, DecodesPathAndQuery) {
  StartServer();
  HttpTestClient client(server_->port());
  auto r = client.Get("/%65cho?x=a%20b&y=1+2&z&&w=%C3%A9%3D%26&x=second");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "GET /echo|x=a b|y=1 2|z=|w=\xC3\xA9=&|x=second");
  auto bad = client.Get("/echo?x=%zz");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status, 400);
}

TEST_F(HttpServerTest, KeepsConnectionsAliveAndHonoursConnectionClose) {
  StartServer();
  HttpTestClient client(server_->port());
  for (int i = 0; i < 5; ++i) {
    auto r = client.Get(fmt::format("/echo?i={}", i));
    ASSERT_TRUE(r.has_value()) << "request " << i << " on the same connection";
    EXPECT_EQ(r->body, fmt::format("GET /echo|i={}", i));
    EXPECT_TRUE(r->keep_alive);
  }
  auto last = client.Get("/a", /*keep_alive=*/false);
  ASSERT_TRUE(last.has_value());
  EXPECT_FALSE(last->keep_alive);
  EXPECT_TRUE(client.WaitClosed());
}

TEST_F(HttpServerTest, HttpOneZeroClosesAfterTheResponse) {
  StartServer();
  HttpTestClient client(server_->port());
  auto r = client.SendBytes("GET /a HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "GET /a");
  EXPECT_TRUE(client.WaitClosed());
}

TEST_F(HttpServerTest, MalformedRequestIs400) {
  StartServer();
  HttpTestClient client(server_->port());
  auto r = client.SendBytes("this is not http\r\n\r\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(client.WaitClosed());
  HttpTestClient absolute(server_->port());
  auto a = absolute.SendBytes("GET http://example.com/a HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->status, 400);
}

TEST_F(HttpServerTest, EnforcesSizeLimits) {
  HttpServer::Options options;
  options.max_body_bytes = 100;
  options.max_header_bytes = 1024;
  StartServer(options);
  {
    HttpTestClient client(server_->port());
    auto ok = client.Request("POST", "/echo", std::string(100, 'x'));
    ASSERT_TRUE(ok.has_value());
    EXPECT_EQ(ok->status, 200);
    auto big = client.Request("POST", "/echo", std::string(101, 'x'));
    ASSERT_TRUE(big.has_value());
    EXPECT_EQ(big->status, 413);
    EXPECT_TRUE(client.WaitClosed());
  }
  {
    HttpTestClient client(server_->port());
    auto big = client.Get("/echo?q=" + std::string(2000, 'y'));
    ASSERT_TRUE(big.has_value());
    EXPECT_EQ(big->status, 431);
  }
}

TEST_F(HttpServerTest, HandlerExceptionIs500AndServerGoesOn) {
  StartServer();
  HttpTestClient client(server_->port());
  auto r = client.Get("/throws");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 500);
  auto after = client.Get("/a");
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status, 200);
}

TEST_F(HttpServerTest, StopClosesConnectedClients) {
  StartServer();
  HttpTestClient idle_after_request(server_->port());
  ASSERT_TRUE(idle_after_request.Get("/a").has_value());
  HttpTestClient silent(server_->port());
  ASSERT_TRUE(silent.connected());
  // The silent client has not sent anything; make sure the server has accepted it by serving a
  // third connection after it (accepts are handled in order on one acceptor).
  HttpTestClient probe(server_->port());
  ASSERT_TRUE(probe.Get("/a").has_value());
  uint16_t port = server_->port();

  server_->Stop();  // returns only once the threads are joined

  EXPECT_EQ(server_->port(), 0);
  EXPECT_TRUE(idle_after_request.WaitClosed());
  EXPECT_TRUE(silent.WaitClosed());
  EXPECT_TRUE(probe.WaitClosed());
  HttpTestClient late(port);
  EXPECT_FALSE(late.connected() && late.Get("/a").has_value());
  server_->Stop();  // idempotent
}

TEST_F(HttpServerTest, DestructorStopsAServerWithOpenConnections) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_TRUE(client.Get("/a").has_value());
  server_.reset();
  EXPECT_TRUE(client.WaitClosed());
}

TEST_F(HttpServerTest, ClosesIdleConnectionsAfterTheTimeout) {
  HttpServer::Options options;
  options.idle_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  HttpTestClient client(server_->port());
  ASSERT_TRUE(client.Get("/a").has_value());
  EXPECT_TRUE(client.WaitClosed());  // the client waits up to 10 s; the server closes at 0.2 s
}

TEST_F(HttpServerTest, ANewConnectionBeyondTheLimitClosesAnIdleOne) {
  HttpServer::Options options;
  options.max_connections = 1;
  StartServer(options);
  HttpTestClient first(server_->port());
  ASSERT_TRUE(first.Get("/a").has_value());
  // Once `first` waits for its next request, the second connection takes its place.
  for (int i = 0; i < 1000 && server_->idle_connections() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  HttpTestClient second(server_->port());
  auto r = second.Get("/a");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(first.WaitClosed());
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(HttpServerTest, ServesConcurrentClientsOnSeveralThreads) {
  HttpServer::Options options;
  options.threads = 2;
  StartServer(options);
  constexpr int kClients = 4;
  constexpr int kRequests = 20;
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      HttpTestClient client(server_->port());
      for (int i = 0; i < kRequests; ++i) {
        auto r = client.Get(fmt::format("/echo?c={}&i={}", c, i));
        if (r && r->body == fmt::format("GET /echo|c={}|i={}", c, i)) good.fetch_add(1);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(good.load(), kClients * kRequests);
}

TEST(HttpServerSetupTest, RegistrationErrors) {
  HttpServer server(HttpServer::Options{});
  EXPECT_EQ(server.Handle("GET", "no-slash", Echo).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.Handle("", "/x", Echo).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.Handle("GET", "/x", nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(server.Handle("GET", "/x", Echo).ok());
  EXPECT_EQ(server.Handle("GET", "/x", Echo).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.Handle("GET", "/y", Echo).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(server.Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HttpServerSetupTest, BindErrors) {
  HttpServer::Options bad_host;
  bad_host.host = "not-an-address";
  EXPECT_EQ(HttpServer(bad_host).Start().code(), absl::StatusCode::kInvalidArgument);

  HttpServer first(HttpServer::Options{});
  ASSERT_TRUE(first.Start().ok());
  HttpServer::Options same_port;
  same_port.port = first.port();
  HttpServer second(same_port);
  absl::Status status = second.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr(std::to_string(first.port())));
  EXPECT_EQ(second.port(), 0);
}

TEST(HttpServerSetupTest, StopWithoutStartIsHarmless) {
  HttpServer server(HttpServer::Options{});
  server.Stop();
  EXPECT_EQ(server.port(), 0);
}

TEST(RequestTargetTest, SplitsAndDecodes) {
  auto t = internal::ParseRequestTarget("/p%2Fq?a=1&b=x+y&c=%41&&d#frag");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->path, "/p/q");
  ASSERT_EQ(t->query.size(), 4u);
  EXPECT_EQ(t->query[0], (std::pair<std::string, std::string>("a", "1")));
  EXPECT_EQ(t->query[1], (std::pair<std::string, std::string>("b", "x y")));
  EXPECT_EQ(t->query[2], (std::pair<std::string, std::string>("c", "A")));
  EXPECT_EQ(t->query[3], (std::pair<std::string, std::string>("d", "")));
  // '+' stays '+' in the path.
  EXPECT_EQ(internal::ParseRequestTarget("/a+b")->path, "/a+b");
}

TEST(RequestTargetTest, RejectsBadTargets) {
  EXPECT_FALSE(internal::ParseRequestTarget("").ok());
  EXPECT_FALSE(internal::ParseRequestTarget("*").ok());
  EXPECT_FALSE(internal::ParseRequestTarget("http://h/a").ok());
  EXPECT_FALSE(internal::ParseRequestTarget("/a%").ok());
  EXPECT_FALSE(internal::ParseRequestTarget("/a%4").ok());
  EXPECT_FALSE(internal::ParseRequestTarget("/a?x=%g0").ok());
  EXPECT_TRUE(internal::ParseRequestTarget("/a?x=%4a").ok());
}

TEST(HttpRequestTest, ParamAndHeaderLookup) {
  HttpRequest request;
  request.query = {{"a", "1"}, {"b", "2"}, {"a", "3"}};
  request.headers = {{"content-type", "text/plain"}};
  EXPECT_EQ(request.Param("a"), "1");
  EXPECT_EQ(request.ParamCount("a"), 2u);
  EXPECT_EQ(request.Param("c"), std::nullopt);
  EXPECT_EQ(request.Header("Content-Type"), "text/plain");
  EXPECT_EQ(request.Header("accept"), std::nullopt);
}

}  // namespace
}  // namespace isowatch::server
