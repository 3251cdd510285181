// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/common/credentials.h"
#include "isowatch/server/http_message.h"

namespace isowatch::server {

namespace internal {
class ConnectionRegistry;
class HttpServerCore;
}  // namespace internal

// Why the server closed a connection before its client did (HttpServer::Events): the label
// values of isowatch_http_connections_dropped_total.
enum class HttpDrop : uint8_t {
  kEvicted,        // the connection idle the longest, closed to make room for a new one
  kRefused,        // a new connection over the limit while every other one was busy
  kIdleTimeout,    // a kept-alive connection sent no new request within idle_timeout
  kHeaderTimeout,  // a request header not complete within header_timeout
  kBodyTimeout,    // a request body not complete within body_timeout
  kWriteTimeout,   // a response the client did not take within write_timeout
  kTlsHandshake,   // a TLS handshake failed (a plaintext client, no client certificate, ...)
};
inline constexpr HttpDrop kAllHttpDrops[] = {HttpDrop::kEvicted,     HttpDrop::kRefused,
                                             HttpDrop::kIdleTimeout, HttpDrop::kHeaderTimeout,
                                             HttpDrop::kBodyTimeout, HttpDrop::kWriteTimeout,
                                             HttpDrop::kTlsHandshake};
const char* HttpDropName(HttpDrop drop);  // "evicted", "refused", "idle_timeout", ...

// Requests the server answered without running their handler: the label values of
// isowatch_http_requests_rejected_total.
enum class HttpRejection : uint8_t {
  kApiBusy,       // a pooled route while api_threads + api_queue requests were taken (503)
  kUnauthorized,  // no bearer token, or a wrong one, where one is needed (401; HttpApi)
};
inline constexpr HttpRejection kAllHttpRejections[] = {HttpRejection::kApiBusy,
                                                       HttpRejection::kUnauthorized};
const char* HttpRejectionName(HttpRejection rejection);  // "api_busy", "unauthorized"

// Where a route's handler runs (HttpServer::Handle).
enum class RouteKind : uint8_t {
  // On the pool of `api_threads`: for handlers that may take time (queries of the store). At most
  // `api_queue` requests wait for a pool thread; one more answers 503 with Retry-After.
  kPooled,
  // On the I/O thread that read the request, at once: for handlers that are quick and never block
  // (probes, /metrics), which then answer even while every pool thread is busy.
  kInline,
};

// A small HTTP/1.1 server (Boost.Beast over Asio) for the daemon's operational endpoints:
// /metrics, health probes and the JSON API.
//
// - Routes are exact paths (no patterns). A path that is not registered answers 404; a registered
//   path asked with a method it has no handler for answers 405 with an Allow header. A GET route
//   also answers HEAD (same headers, no body).
// - Connections are persistent (HTTP/1.1 keep-alive) unless the client asks otherwise.
// - Request headers larger than `max_header_bytes` answer 431, bodies larger than `max_body_bytes`
//   answer 413; a malformed request answers 400; all three then close the connection.
// - The server never lets an exception out: Asio and Beast are used through their error_code
//   overloads, and a handler that throws answers 500.
//
// Abuse (docs/operations.md, "HTTP under load"): slow or idle clients cannot starve the probes.
// - Deadlines per connection: a new connection must deliver a complete request header within
//   `header_timeout` of being accepted; a kept-alive one gets `idle_timeout` for the first byte
//   of its next request and `header_timeout` from there for the rest of the header. The body must
//   follow within `body_timeout` of the header, and a response must be taken within
//   `write_timeout`. A connection past a deadline is closed without an answer. With TLS, the
//   handshake is part of the first request's header_timeout.
// - At most `max_connections` are open. A new connection over the limit closes the connection
//   idle the longest (waiting for or reading a request: ConnectionRegistry) and takes its place;
//   only when every connection is busy is the new one closed at once.
// - Handlers of pooled routes run on their own threads, with a bounded queue, so that a
//   saturated API delays neither the I/O thread nor the inline routes.
// Every connection dropped and request rejected is reported to `events`.
//
// Lifecycle: construct, Handle() the routes, Start(), ..., Stop() (or destroy). Stop() closes the
// listening socket and every open connection and joins the server's threads; it waits for a handler
// that is running to return.
//
// Thread-safety: Handle() and Start() must be called from one thread before the server runs;
// port(), open_connections() and Stop() may be called from any thread. Handlers run on the server's
// threads (`threads` I/O threads, `api_threads` pool threads), concurrently.
// Ownership: the server owns its threads, sockets and the handlers it was given.
class HttpServer {
 public:
  // Called on the server's threads as things happen; each may be empty, and must be quick and
  // thread-safe.
  struct Events {
    std::function<void(HttpDrop)> dropped;
    std::function<void(HttpRejection)> rejected;
  };

  struct Options {
    std::string host = "127.0.0.1";  // an IPv4 or IPv6 address literal
    uint16_t port = 0;               // 0: any free port; port() tells which
    int threads = 1;                 // I/O threads: connections, parsing, inline routes
    int api_threads = 2;             // threads running the handlers of pooled routes
    size_t api_queue = 16;           // pooled requests waiting for a thread; one more answers 503
    size_t max_header_bytes = size_t{16} * 1024;
    size_t max_body_bytes = size_t{64} * 1024;
    size_t max_connections = 256;
    std::chrono::milliseconds idle_timeout = std::chrono::seconds(60);
    std::chrono::milliseconds header_timeout = std::chrono::seconds(10);
    std::chrono::milliseconds body_timeout = std::chrono::seconds(30);
    std::chrono::milliseconds write_timeout = std::chrono::seconds(30);
    // Enabled: the port speaks HTTPS only (TLS 1.2 or later), and with a client CA asks every
    // client for a certificate that CA signed. A failed handshake drops the connection.
    TlsCredentials tls;
    Events events;
  };

  explicit HttpServer(Options options);
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers `handler` for requests with this method (upper case, e.g. "GET") and exactly this
  // path (starting with '/'), to run where `kind` says. Errors: FailedPrecondition after Start();
  // InvalidArgument for an empty method or a path that does not start with '/'; AlreadyExists for
  // a method and path already registered.
  absl::Status Handle(std::string_view method, std::string_view path, HttpHandler handler,
                      RouteKind kind = RouteKind::kPooled);

  // Binds host:port, listens and starts the server's threads. Errors: InvalidArgument for a host
  // that is not an address, bad options or TLS credentials OpenSSL refuses; Unavailable when the
  // address cannot be bound (in use, not local); FailedPrecondition when called twice.
  absl::Status Start();

  // The bound port once Start() succeeded, else 0.
  uint16_t port() const { return bound_port_.load(std::memory_order_acquire); }

  // Connections open now (0 when the server is not running), and of them those idle: waiting for
  // or reading a request.
  size_t open_connections() const;
  size_t idle_connections() const;

  // Stops accepting, closes all connections and joins the threads. Idempotent; safe to call when
  // Start() was never called or failed. REQUIRES: not called from a handler (it would wait for
  // itself).
  void Stop();

 private:
  struct Method {
    std::string name;
    HttpHandler handler;
    RouteKind kind;
  };
  struct Route {
    std::vector<Method> methods;
  };
  // A request's handler and where it runs, or (handler null) the answer without one (404, 405).
  struct Routed {
    const HttpHandler* handler = nullptr;
    RouteKind kind = RouteKind::kPooled;
    HttpResponse answer;
  };

  // Finds the handler for a request. Called by the connections on the server's threads; routes_
  // is immutable once the server runs.
  Routed FindRoute(const HttpRequest& request) const;
  // Runs a handler, catching anything it throws (500).
  static HttpResponse Invoke(const HttpHandler& handler, const HttpRequest& request);

  friend class internal::HttpServerCore;

  Options options_;
  absl::flat_hash_map<std::string, Route> routes_;
  bool started_ = false;  // set by Start(); read only by the thread that calls Handle()/Start()
  // Written once by Start(); read by port() from any thread (acquire/release pairs the write).
  std::atomic<uint16_t> bound_port_{0};

  // The open connections; thread-safe itself, it lives as long as the server so that
  // open_connections() never waits for Stop().
  const std::unique_ptr<internal::ConnectionRegistry> registry_;

  absl::Mutex stop_mu_;  // serialises Stop() calls
  std::unique_ptr<internal::HttpServerCore> core_ ABSL_GUARDED_BY(stop_mu_);

  std::vector<std::thread> threads_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace isowatch::server
