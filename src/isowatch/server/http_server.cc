// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/http_server.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "isowatch/server/internal/request_target.h"

namespace isowatch::server {

namespace internal {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

class Session;

// The running part of an HttpServer: the io_context, the acceptor and the set of open
// connections. Created by Start(), destroyed by Stop() after the threads are joined.
//
// Member order matters: the connection registry is declared before the io_context so that it
// outlives it (destroying the io_context destroys pending handlers, which may release the last
// reference to a Session, whose destructor unregisters it).
class HttpServerCore {
 public:
  explicit HttpServerCore(const HttpServer& server)
      : server_(server),
        acceptor_(net::make_strand(io_context_)),
        retry_timer_(acceptor_.get_executor()) {}

  // Opens, binds and listens; returns the bound port.
  absl::StatusOr<uint16_t> Listen(const std::string& host, uint16_t port);
  // Queues the first accept; the threads are started afterwards.
  void StartAccepting() { DoAccept(); }
  // Runs the io_context until it runs out of work; a throwing handler is caught and the loop
  // goes on (the connection it served is dropped).
  void Run();
  // Closes the acceptor and every open connection; Run() returns once everything has unwound.
  void BeginStop();

  const HttpServer::Options& options() const { return server_.options_; }
  HttpResponse Dispatch(HttpRequest& request) const { return server_.Dispatch(request); }

  // Registers an accepted connection. False when the server is stopping or full.
  bool Register(const std::shared_ptr<Session>& session);
  void Unregister(Session* session);

 private:
  void DoAccept();
  void OnAccept(beast::error_code ec, net::ip::tcp::socket socket);

  const HttpServer& server_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<Session*, std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);

  net::io_context io_context_;
  net::ip::tcp::acceptor acceptor_;  // used on its strand only
  net::steady_timer retry_timer_;
};

// One connection: reads a request, answers it, and reads the next while the connection is kept
// alive. All its work runs on its own strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServerCore& core, net::ip::tcp::socket socket)
      : core_(core), stream_(std::move(socket)) {}
  ~Session() { core_.Unregister(this); }

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Run() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::ReadRequest, shared_from_this()));
  }

  // Closes the connection from another thread; pending reads and writes complete with an error.
  void CloseAsync() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }

 private:
  void ReadRequest() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(core_.options().max_header_bytes, std::numeric_limits<uint32_t>::max())));
    parser_->body_limit(static_cast<uint64_t>(core_.options().max_body_bytes));
    stream_.expires_after(core_.options().idle_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, size_t /*bytes*/) {
    if (closed_) return;
    if (ec) {
      if (ec == http::error::body_limit) {
        SendError(413, "request body too large\n");
      } else if (ec == http::error::header_limit) {
        SendError(431, "request header too large\n");
      } else if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
                 ec != http::error::end_of_stream && ec != http::error::partial_message) {
        SendError(400, "malformed request\n");
      } else {
        // End of stream, timeout, reset or cancellation: nothing to answer.
        Close();
      }
      return;
    }
    const http::request<http::string_body>& message = parser_->get();
    bool keep_alive = message.keep_alive();
    HttpResponse response;
    bool is_head = false;
    try {
      absl::StatusOr<RequestTarget> target =
          ParseRequestTarget(std::string_view(message.target().data(), message.target().size()));
      if (!target.ok()) {
        absl::string_view error = target.status().message();
        response = HttpResponse::Text(
            400, fmt::format("{}\n", std::string_view(error.data(), error.size())));
        keep_alive = false;
      } else {
        HttpRequest request;
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
        is_head = request.method == "HEAD";
        response = core_.Dispatch(request);
      }
    } catch (...) {
      response = HttpResponse::Text(500, "internal error\n");
    }
    Send(std::move(response), message.version(), keep_alive, is_head);
  }

  void SendError(int status, std::string body) {
    Send(HttpResponse::Text(status, std::move(body)), 11, /*keep_alive=*/false, /*is_head=*/false);
  }

  void Send(HttpResponse response, unsigned version, bool keep_alive, bool is_head) {
    if (response.status < 100 || response.status > 599) response.status = 500;
    response_.emplace();
    http::response<http::string_body>& out = *response_;
    out.version(version);
    out.result(static_cast<unsigned>(response.status));
    out.set(http::field::server, "isowatch");
    out.set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) out.set(name, value);
    out.keep_alive(keep_alive);
    size_t length = response.body.size();
    out.body() = std::move(response.body);
    out.prepare_payload();
    if (is_head) {
      out.body().clear();
      out.content_length(length);
    }
    stream_.expires_after(core_.options().idle_timeout);
    http::async_write(stream_, out,
                      beast::bind_front_handler(&Session::OnWrite, shared_from_this(),
                                                !keep_alive || out.need_eof()));
  }

  void OnWrite(bool close, beast::error_code ec, size_t /*bytes*/) {
    response_.reset();
    if (ec || close) {
      Close();
      return;
    }
    ReadRequest();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  HttpServerCore& core_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  bool closed_ = false;  // strand-confined
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

void HttpServerCore::Run() {
  for (;;) {
    try {
      io_context_.run();
      return;
    } catch (...) {
      // A handler threw past its own guard; the connection it belonged to is gone. Keep serving.
    }
  }
}

void HttpServerCore::BeginStop() {
  std::vector<std::shared_ptr<Session>> open;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [ptr, weak] : sessions_) {
      if (std::shared_ptr<Session> session = weak.lock()) open.push_back(std::move(session));
    }
  }
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
  });
  for (const std::shared_ptr<Session>& session : open) session->CloseAsync();
}

bool HttpServerCore::Register(const std::shared_ptr<Session>& session) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || sessions_.size() >= options().max_connections) return false;
  sessions_.emplace(session.get(), session);
  return true;
}

void HttpServerCore::Unregister(Session* session) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(session);
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
  auto session = std::make_shared<Session>(*this, std::move(socket));
  if (Register(session)) session->Run();
  // Otherwise the session is dropped here and its socket closed.
  DoAccept();
}

}  // namespace internal

HttpServer::HttpServer(Options options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Handle(std::string_view method, std::string_view path,
                                HttpHandler handler) {
  if (started_) return absl::FailedPreconditionError("routes must be added before Start()");
  if (method.empty()) return absl::InvalidArgumentError("empty HTTP method");
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(fmt::format("route path '{}' must start with '/'", path));
  }
  if (!handler) return absl::InvalidArgumentError("empty handler");
  Route& route = routes_[std::string(path)];
  for (const auto& [existing, unused] : route.methods) {
    if (existing == method) {
      return absl::AlreadyExistsError(fmt::format("{} {} is already registered", method, path));
    }
  }
  route.methods.emplace_back(std::string(method), std::move(handler));
  return absl::OkStatus();
}

absl::Status HttpServer::Start() {
  absl::MutexLock lock(&stop_mu_);
  if (started_) return absl::FailedPreconditionError("HttpServer::Start() called twice");
  if (options_.threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (options_.max_connections < 1) {
    return absl::InvalidArgumentError("max_connections must be at least 1");
  }
  auto core = std::make_unique<internal::HttpServerCore>(*this);
  absl::StatusOr<uint16_t> port = core->Listen(options_.host, options_.port);
  if (!port.ok()) return port.status();
  started_ = true;
  core->StartAccepting();
  internal::HttpServerCore* raw = core.get();
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([raw] { raw->Run(); });
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

HttpResponse HttpServer::Dispatch(HttpRequest& request) const {
  auto it = routes_.find(request.path);
  if (it == routes_.end()) return HttpResponse::Text(404, "not found\n");
  const Route& route = it->second;
  std::string_view wanted = request.method == "HEAD" ? std::string_view("GET") : request.method;
  const HttpHandler* handler = nullptr;
  for (const auto& [method, candidate] : route.methods) {
    if (method == request.method) {
      handler = &candidate;
      break;
    }
    if (method == wanted) handler = &candidate;
  }
  if (handler == nullptr) {
    std::string allow;
    for (const auto& [method, unused] : route.methods) {
      if (!allow.empty()) allow += ", ";
      allow += method;
      if (method == "GET") allow += ", HEAD";
    }
    HttpResponse response = HttpResponse::Text(405, "method not allowed\n");
    response.headers.emplace_back("Allow", std::move(allow));
    return response;
  }
  try {
    return (*handler)(request);
  } catch (...) {
    return HttpResponse::Text(500, "internal error\n");
  }
}

}  // namespace isowatch::server
