// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/http_server.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>

#include "isowatch/server/internal/connection_registry.h"
#include "isowatch/server/internal/request_target.h"

namespace isowatch::server {

namespace internal {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

// The running part of an HttpServer: the io_contexts of the I/O threads and of the API pool, and
// the acceptor. Created by Start(), destroyed by Stop() after the threads are joined.
class HttpServerCore {
 public:
  explicit HttpServerCore(const HttpServer& server)
      : server_(server),
        ssl_(net::ssl::context::tls_server),
        api_guard_(net::make_work_guard(api_context_)),
        acceptor_(net::make_strand(io_context_)),
        retry_timer_(acceptor_.get_executor()) {}

  // Sets up the TLS context from the options' credentials (only when they enable TLS). Errors:
  // InvalidArgument for credentials OpenSSL refuses.
  absl::Status SetUpTls();
  // Opens, binds and listens; returns the bound port.
  absl::StatusOr<uint16_t> Listen(const std::string& host, uint16_t port);
  // Queues the first accept; the threads are started afterwards.
  void StartAccepting() { DoAccept(); }
  // Run the I/O io_context and the pool's until they run out of work; a throwing handler is
  // caught and the loop goes on (the connection it served is dropped).
  void RunIo() { Run(io_context_); }
  void RunApi() { Run(api_context_); }
  // Closes the acceptor and every open connection and lets the pool finish what it was given;
  // the Run functions return once everything has unwound.
  void BeginStop();

  const HttpServer::Options& options() const { return server_.options_; }
  using Routed = HttpServer::Routed;
  Routed FindRoute(const HttpRequest& request) const { return server_.FindRoute(request); }
  static HttpResponse Invoke(const HttpHandler& handler, const HttpRequest& request) {
    return HttpServer::Invoke(handler, request);
  }
  ConnectionRegistry& registry() const { return *server_.registry_; }

  // Takes a place among the pooled requests (running or queued); false when they are all taken.
  bool EnterPool() {
    size_t taken = pooled_.load(std::memory_order_relaxed);
    const size_t limit = static_cast<size_t>(options().api_threads) + options().api_queue;
    do {
      if (taken >= limit) return false;
    } while (!pooled_.compare_exchange_weak(taken, taken + 1, std::memory_order_relaxed));
    return true;
  }
  void LeavePool() { pooled_.fetch_sub(1, std::memory_order_relaxed); }
  net::io_context::executor_type api_executor() { return api_context_.get_executor(); }

  void Report(HttpDrop drop) const {
    if (options().events.dropped) options().events.dropped(drop);
  }
  void Report(HttpRejection rejection) const {
    if (options().events.rejected) options().events.rejected(rejection);
  }

 private:
  static void Run(net::io_context& context);
  void DoAccept();
  void OnAccept(beast::error_code ec, net::ip::tcp::socket socket);
  // Registers a new session and runs it, or drops it (at the limit with every connection busy).
  template <class SessionType>
  void Admit(const std::shared_ptr<SessionType>& session);

  const HttpServer& server_;
  // The TLS context of every connection, when options().tls is enabled; read-only once the
  // server runs (OpenSSL contexts may be shared by connections on several threads).
  net::ssl::context ssl_;
  // Pooled requests running or waiting for a pool thread. Relaxed: a count that orders nothing.
  std::atomic<size_t> pooled_{0};

  net::io_context api_context_;
  // Keeps the pool's threads waiting for work until BeginStop.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> api_guard_;
  net::io_context io_context_;
  net::ip::tcp::acceptor acceptor_;  // used on its strand only
  net::steady_timer retry_timer_;
};

// One connection: reads a request, answers it, and reads the next while the connection is kept
// alive, with a deadline for each step (HttpServer, "Abuse"). All its work runs on its own strand,
// except the handlers of pooled routes, which run on the pool and post their answer back.
// `Stream` is beast::tcp_stream (plaintext) or beast::ssl_stream over one (TLS).
template <class Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // `args`: what Stream is built from (the accepted socket, and for TLS the context).
  template <class... Args>
  explicit Session(HttpServerCore& core, Args&&... args)
      : core_(core), stream_(std::forward<Args>(args)...) {}
  ~Session() override { core_.registry().Unregister(this); }

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Run() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Begin, this->shared_from_this()));
  }

  // Closes the connection from another thread; pending reads and writes complete with an error.
  void CloseAsync() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  // What the connection waits for: which deadline runs.
  enum class Phase : uint8_t { kHandshake, kIdle, kHeader, kBody, kHandler, kWrite };

  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  void Begin() {
    // The TLS handshake and the first request's header are due header_timeout after the accept.
    tcp().expires_after(core_.options().header_timeout);
    if constexpr (kTls) {
      phase_ = Phase::kHandshake;
      stream_.async_handshake(
          net::ssl::stream_base::server,
          beast::bind_front_handler(&Session::OnHandshake, this->shared_from_this()));
    } else {
      ReadRequest();
    }
  }

  void OnHandshake(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      // A plaintext client, an unknown CA, no client certificate where one is needed, ...
      core_.Report(ec == beast::error::timeout ? HttpDrop::kHeaderTimeout
                                               : HttpDrop::kTlsHandshake);
      Close();
      return;
    }
    ReadRequest();
  }

  void ReadRequest() {
    if (closed_) return;
    core_.registry().SetIdle(this, true);
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(core_.options().max_header_bytes, std::numeric_limits<uint32_t>::max())));
    parser_->body_limit(static_cast<uint64_t>(core_.options().max_body_bytes));
    if (requests_ == 0 || buffer_.size() > 0) {
      // The first request (its deadline runs from the accept), or the next one already begun.
      ReadHeader(/*restart_deadline=*/requests_ != 0);
      return;
    }
    phase_ = Phase::kIdle;
    tcp().expires_after(core_.options().idle_timeout);
    stream_.async_read_some(
        buffer_.prepare(kFirstRead),
        beast::bind_front_handler(&Session::OnFirstBytes, this->shared_from_this()));
  }

  void OnFirstBytes(beast::error_code ec, size_t bytes) {
    if (closed_) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    buffer_.commit(bytes);
    ReadHeader(/*restart_deadline=*/true);
  }

  void ReadHeader(bool restart_deadline) {
    phase_ = Phase::kHeader;
    if (restart_deadline) tcp().expires_after(core_.options().header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&Session::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t /*bytes*/) {
    if (closed_) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    if (parser_->is_done()) {
      OnRequest();
      return;
    }
    phase_ = Phase::kBody;
    tcp().expires_after(core_.options().body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnBody, this->shared_from_this()));
  }

  void OnBody(beast::error_code ec, size_t /*bytes*/) {
    if (closed_) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    OnRequest();
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      SendError(413, "request body too large\n");
    } else if (ec == http::error::header_limit) {
      SendError(431, "request header too large\n");
    } else if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      SendError(400, "malformed request\n");
    } else {
      if (ec == beast::error::timeout) {
        core_.Report(phase_ == Phase::kIdle     ? HttpDrop::kIdleTimeout
                     : phase_ == Phase::kHeader ? HttpDrop::kHeaderTimeout
                                                : HttpDrop::kBodyTimeout);
      }
      // End of stream, timeout, reset or cancellation: nothing to answer.
      Close();
    }
  }

  void OnRequest() {
    ++requests_;
    core_.registry().SetIdle(this, false);
    phase_ = Phase::kHandler;
    // No deadline while a handler runs: the pool's queue bounds the wait.
    tcp().expires_never();
    const http::request<http::string_body>& message = parser_->get();
    Reply reply{.version = message.version(), .keep_alive = message.keep_alive()};
    HttpRequest request;
    try {
      absl::StatusOr<RequestTarget> target =
          ParseRequestTarget(std::string_view(message.target().data(), message.target().size()));
      if (!target.ok()) {
        absl::string_view error = target.status().message();
        reply.keep_alive = false;
        Send(HttpResponse::Text(400,
                                fmt::format("{}\n", std::string_view(error.data(), error.size()))),
             reply);
        return;
      }
      request.method.assign(message.method_string().data(), message.method_string().size());
      request.path = std::move(target->path);
      request.query = std::move(target->query);
      for (const auto& field : message) {
        std::string name(field.name_string().data(), field.name_string().size());
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        request.headers.emplace_back(std::move(name),
                                     std::string(field.value().data(), field.value().size()));
      }
      request.body = message.body();
    } catch (...) {
      Send(HttpResponse::Text(500, "internal error\n"), reply);
      return;
    }
    reply.is_head = request.method == "HEAD";
    HttpServerCore::Routed routed = core_.FindRoute(request);
    if (routed.handler == nullptr) {
      Send(std::move(routed.answer), reply);
    } else if (routed.kind == RouteKind::kInline) {
      Send(HttpServerCore::Invoke(*routed.handler, request), reply);
    } else if (!core_.EnterPool()) {
      core_.Report(HttpRejection::kApiBusy);
      HttpResponse busy = HttpResponse::Text(503, "busy: too many API requests; retry later\n");
      busy.headers.emplace_back("Retry-After", "1");
      Send(std::move(busy), reply);
    } else {
      // The work guard keeps the I/O threads running until the answer is posted back.
      net::post(
          core_.api_executor(),
          [self = this->shared_from_this(), handler = routed.handler, request = std::move(request),
           reply, guard = net::make_work_guard(stream_.get_executor())]() mutable {
            HttpResponse response = HttpServerCore::Invoke(*handler, request);
            self->core_.LeavePool();
            net::post(self->stream_.get_executor(),
                      [self, response = std::move(response), reply]() mutable {
                        self->Send(std::move(response), reply);
                      });
          });
    }
  }

  // How to answer: the request's HTTP version, whether to keep the connection, and whether the
  // request was a HEAD.
  struct Reply {
    unsigned version = 11;
    bool keep_alive = false;
    bool is_head = false;
  };

  void SendError(int status, std::string body) {
    Send(HttpResponse::Text(status, std::move(body)), Reply{});
  }

  void Send(HttpResponse response, const Reply& reply) {
    if (closed_) return;
    core_.registry().SetIdle(this, false);
    if (response.status < 100 || response.status > 599) response.status = 500;
    response_.emplace();
    http::response<http::string_body>& out = *response_;
    out.version(reply.version);
    out.result(static_cast<unsigned>(response.status));
    out.set(http::field::server, "isowatch");
    out.set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) out.set(name, value);
    out.keep_alive(reply.keep_alive);
    size_t length = response.body.size();
    out.body() = std::move(response.body);
    out.prepare_payload();
    if (reply.is_head) {
      out.body().clear();
      out.content_length(length);
    }
    phase_ = Phase::kWrite;
    tcp().expires_after(core_.options().write_timeout);
    http::async_write(stream_, out,
                      beast::bind_front_handler(&Session::OnWrite, this->shared_from_this(),
                                                !reply.keep_alive || out.need_eof()));
  }

  void OnWrite(bool close, beast::error_code ec, size_t /*bytes*/) {
    response_.reset();
    if (ec == beast::error::timeout) core_.Report(HttpDrop::kWriteTimeout);
    if (ec) {
      Close();
      return;
    }
    if (close) {
      if constexpr (kTls) {
        // The TLS close_notify, so that the client knows the response was not cut short; it
        // has write_timeout still.
        stream_.async_shutdown(
            beast::bind_front_handler(&Session::OnShutdown, this->shared_from_this()));
      } else {
        Close();
      }
      return;
    }
    ReadRequest();
  }

  void OnShutdown(beast::error_code /*ec*/) { Close(); }

  // Closes the socket at once (no TLS close_notify).
  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    tcp().socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    tcp().socket().close(ignored);
  }

  // Bytes asked for while waiting for the first byte of a kept-alive connection's next request.
  static constexpr size_t kFirstRead = 1024;

  HttpServerCore& core_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  // Strand-confined, like everything above.
  Phase phase_ = Phase::kHeader;
  uint64_t requests_ = 0;  // requests read in full
  bool closed_ = false;
};

absl::StatusOr<uint16_t> HttpServerCore::Listen(const std::string& host, uint16_t port) {
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("'{}' is not an IP address", host));
  net::ip::tcp::endpoint endpoint(address, port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  }
  net::ip::tcp::endpoint local = acceptor_.local_endpoint(ec);
  if (ec) return absl::UnavailableError(fmt::format("cannot read bound port: {}", ec.message()));
  return local.port();
}

void HttpServerCore::Run(net::io_context& context) {
  for (;;) {
    try {
      context.run();
      return;
    } catch (...) {
      // A handler threw past its own guard; the connection it belonged to is gone. Keep serving.
    }
  }
}

void HttpServerCore::BeginStop() {
  std::vector<std::shared_ptr<Connection>> open = registry().Stop();
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
  });
  for (const std::shared_ptr<Connection>& connection : open) connection->CloseAsync();
  // The pool runs what it was given, then its threads return.
  api_guard_.reset();
}

void HttpServerCore::DoAccept() {
  acceptor_.async_accept(net::make_strand(io_context_),
                         beast::bind_front_handler(&HttpServerCore::OnAccept, this));
}

void HttpServerCore::OnAccept(beast::error_code ec, net::ip::tcp::socket socket) {
  if (!acceptor_.is_open() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of file descriptors and the like: wait a little instead of spinning.
    retry_timer_.expires_after(std::chrono::milliseconds(50));
    retry_timer_.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor_.is_open()) DoAccept();
    });
    return;
  }
  if (options().tls.enabled()) {
    Admit(std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, std::move(socket),
                                                                          ssl_));
  } else {
    Admit(std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket)));
  }
  DoAccept();
}

template <class SessionType>
void HttpServerCore::Admit(const std::shared_ptr<SessionType>& session) {
  switch (registry().Register(session)) {
    case ConnectionRegistry::Admission::kEvicted:
      Report(HttpDrop::kEvicted);
      session->Run();
      break;
    case ConnectionRegistry::Admission::kAdmitted:
      session->Run();
      break;
    case ConnectionRegistry::Admission::kFull:
      Report(HttpDrop::kRefused);
      break;  // the session is dropped here and its socket closed
    case ConnectionRegistry::Admission::kStopping:
      break;
  }
}

absl::Status HttpServerCore::SetUpTls() {
  const TlsCredentials& tls = options().tls;
  if (!tls.enabled()) return absl::OkStatus();
  beast::error_code ec;
  // TLS 1.2 and later only.
  ssl_.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                       net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                       net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use,
                   ec);
  if (!ec) ssl_.use_certificate_chain(net::buffer(tls.cert_chain), ec);
  if (!ec) ssl_.use_private_key(net::buffer(tls.private_key), net::ssl::context::pem, ec);
  if (!ec && !tls.client_ca.empty()) {
    ssl_.add_certificate_authority(net::buffer(tls.client_ca), ec);
    if (!ec) {
      ssl_.set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert, ec);
    }
  }
  if (ec) return absl::InvalidArgumentError(fmt::format("HTTP TLS: {}", ec.message()));
  return absl::OkStatus();
}

}  // namespace internal

const char* HttpDropName(HttpDrop drop) {
  switch (drop) {
    case HttpDrop::kEvicted:
      return "evicted";
    case HttpDrop::kRefused:
      return "refused";
    case HttpDrop::kIdleTimeout:
      return "idle_timeout";
    case HttpDrop::kHeaderTimeout:
      return "header_timeout";
    case HttpDrop::kBodyTimeout:
      return "body_timeout";
    case HttpDrop::kWriteTimeout:
      return "write_timeout";
    case HttpDrop::kTlsHandshake:
      return "tls_handshake";
  }
  return "?";
}

const char* HttpRejectionName(HttpRejection rejection) {
  switch (rejection) {
    case HttpRejection::kApiBusy:
      return "api_busy";
    case HttpRejection::kUnauthorized:
      return "unauthorized";
  }
  return "?";
}

HttpServer::HttpServer(Options options)
    : options_(std::move(options)),
      registry_(std::make_unique<internal::ConnectionRegistry>(options_.max_connections)) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Handle(std::string_view method, std::string_view path, HttpHandler handler,
                                RouteKind kind) {
  if (started_) return absl::FailedPreconditionError("routes must be added before Start()");
  if (method.empty()) return absl::InvalidArgumentError("empty HTTP method");
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(fmt::format("route path '{}' must start with '/'", path));
  }
  if (!handler) return absl::InvalidArgumentError("empty handler");
  Route& route = routes_[std::string(path)];
  for (const Method& existing : route.methods) {
    if (existing.name == method) {
      return absl::AlreadyExistsError(fmt::format("{} {} is already registered", method, path));
    }
  }
  route.methods.push_back({std::string(method), std::move(handler), kind});
  return absl::OkStatus();
}

absl::Status HttpServer::Start() {
  absl::MutexLock lock(&stop_mu_);
  if (started_) return absl::FailedPreconditionError("HttpServer::Start() called twice");
  if (options_.threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (options_.api_threads < 1) return absl::InvalidArgumentError("api_threads must be at least 1");
  if (options_.max_connections < 1) {
    return absl::InvalidArgumentError("max_connections must be at least 1");
  }
  for (const auto& [name, timeout] : {std::pair{"idle_timeout", options_.idle_timeout},
                                      std::pair{"header_timeout", options_.header_timeout},
                                      std::pair{"body_timeout", options_.body_timeout},
                                      std::pair{"write_timeout", options_.write_timeout}}) {
    if (timeout.count() <= 0)
      return absl::InvalidArgumentError(fmt::format("{} must be positive", name));
  }
  auto core = std::make_unique<internal::HttpServerCore>(*this);
  if (absl::Status s = core->SetUpTls(); !s.ok()) return s;
  absl::StatusOr<uint16_t> port = core->Listen(options_.host, options_.port);
  if (!port.ok()) return port.status();
  started_ = true;
  core->StartAccepting();
  internal::HttpServerCore* raw = core.get();
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([raw] { raw->RunIo(); });
  for (int i = 0; i < options_.api_threads; ++i) threads_.emplace_back([raw] { raw->RunApi(); });
  core_ = std::move(core);
  bound_port_.store(*port, std::memory_order_release);
  return absl::OkStatus();
}

void HttpServer::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (core_ == nullptr) return;
  core_->BeginStop();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  core_.reset();
  bound_port_.store(0, std::memory_order_release);
}

size_t HttpServer::open_connections() const { return registry_->size(); }

size_t HttpServer::idle_connections() const { return registry_->idle(); }

HttpServer::Routed HttpServer::FindRoute(const HttpRequest& request) const {
  Routed routed;
  auto it = routes_.find(request.path);
  if (it == routes_.end()) {
    routed.answer = HttpResponse::Text(404, "not found\n");
    return routed;
  }
  const Route& route = it->second;
  std::string_view wanted = request.method == "HEAD" ? std::string_view("GET") : request.method;
  const Method* found = nullptr;
  for (const Method& method : route.methods) {
    if (method.name == request.method) {
      found = &method;
      break;
    }
    if (method.name == wanted) found = &method;
  }
  if (found == nullptr) {
    std::string allow;
    for (const Method& method : route.methods) {
      if (!allow.empty()) allow += ", ";
      allow += method.name;
      if (method.name == "GET") allow += ", HEAD";
    }
    routed.answer = HttpResponse::Text(405, "method not allowed\n");
    routed.answer.headers.emplace_back("Allow", std::move(allow));
    return routed;
  }
  routed.handler = &found->handler;
  routed.kind = found->kind;
  return routed;
}

HttpResponse HttpServer::Invoke(const HttpHandler& handler, const HttpRequest& request) {
  try {
    return handler(request);
  } catch (...) {
    return HttpResponse::Text(500, "internal error\n");
  }
}

}  // namespace isowatch::server
