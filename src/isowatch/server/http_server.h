// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

#include "isowatch/server/http_message.h"

namespace isowatch::server {

namespace internal {
class HttpServerCore;
}  // namespace internal

// A small HTTP/1.1 server (Boost.Beast over Asio) for the daemon's operational endpoints:
// /metrics, health probes and the JSON API.
//
// - Routes are exact paths (no patterns). A path that is not registered answers 404; a registered
//   path asked with a method it has no handler for answers 405 with an Allow header. A GET route
//   also answers HEAD (same headers, no body).
// - Connections are persistent (HTTP/1.1 keep-alive) unless the client asks otherwise; an idle
//   connection is closed after `idle_timeout`.
// - Request headers larger than `max_header_bytes` answer 431, bodies larger than `max_body_bytes`
//   answer 413; a malformed request answers 400; all three then close the connection.
// - The server never lets an exception out: Asio and Beast are used through their error_code
//   overloads, and a handler that throws answers 500.
//
// Lifecycle: construct, Handle() the routes, Start(), ..., Stop() (or destroy). Stop() closes the
// listening socket and every open connection and joins the server's threads; it waits for a handler
// that is running to return.
//
// Thread-safety: Handle() and Start() must be called from one thread before the server runs;
// port() and Stop() may be called from any thread. Handlers run on the server's threads
// (`threads` of them), concurrently when there is more than one.
// Ownership: the server owns its threads, sockets and the handlers it was given.
class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";  // an IPv4 or IPv6 address literal
    uint16_t port = 0;               // 0: any free port; port() tells which
    int threads = 1;
    size_t max_header_bytes = size_t{16} * 1024;
    size_t max_body_bytes = size_t{64} * 1024;
    size_t max_connections = 256;  // further connections are accepted and closed at once
    std::chrono::milliseconds idle_timeout = std::chrono::seconds(60);
  };

  explicit HttpServer(Options options);
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers `handler` for requests with this method (upper case, e.g. "GET") and exactly this
  // path (starting with '/'). Errors: FailedPrecondition after Start(); InvalidArgument for an
  // empty method or a path that does not start with '/'; AlreadyExists for a method and path
  // already registered.
  absl::Status Handle(std::string_view method, std::string_view path, HttpHandler handler);

  // Binds host:port, listens and starts the server's threads. Errors: InvalidArgument for a host
  // that is not an address or bad options; Unavailable when the address cannot be bound (in use,
  // not local); FailedPrecondition when called twice.
  absl::Status Start();

  // The bound port once Start() succeeded, else 0.
  uint16_t port() const { return bound_port_.load(std::memory_order_acquire); }

  // Stops accepting, closes all connections and joins the threads. Idempotent; safe to call when
  // Start() was never called or failed. REQUIRES: not called from a handler (it would wait for
  // itself).
  void Stop();

 private:
  struct Route {
    std::vector<std::pair<std::string, HttpHandler>> methods;
  };

  // Finds the handler for a request and runs it, catching anything it throws. Called by the
  // connections on the server's threads; routes_ is immutable once the server runs.
  HttpResponse Dispatch(HttpRequest& request) const;

  friend class internal::HttpServerCore;

  Options options_;
  absl::flat_hash_map<std::string, Route> routes_;
  bool started_ = false;  // set by Start(); read only by the thread that calls Handle()/Start()
  // Written once by Start(); read by port() from any thread (acquire/release pairs the write).
  std::atomic<uint16_t> bound_port_{0};

  absl::Mutex stop_mu_;  // serialises Stop() calls
  std::unique_ptr<internal::HttpServerCore> core_ ABSL_GUARDED_BY(stop_mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace isowatch::server
