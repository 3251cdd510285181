// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace isowatch::server::testing {

// The parts of an HTTP response the tests look at.
struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool keep_alive = false;
};

// A blocking HTTP/1.1 client over one TCP connection to 127.0.0.1, for tests. Every operation
// gives up after `timeout` and reports failure instead of hanging (each runs as an asynchronous
// operation with the stream's deadline, driven to completion on the calling thread).
// Thread-compatible.
class HttpTestClient {
 public:
  explicit HttpTestClient(uint16_t port,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10))
      : stream_(io_context_), timeout_(timeout) {
    boost::beast::error_code ec;
    boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), port);
    stream_.expires_after(timeout_);
    stream_.async_connect(endpoint, [&](boost::beast::error_code e) { ec = e; });
    Drive();
    connected_ = !ec;
  }

  bool connected() const { return connected_; }

  // Sends one request on the connection; nullopt when the connection failed or was closed.
  std::optional<ClientResponse> Request(std::string_view method, std::string_view target,
                                        std::string body = "", bool keep_alive = true) {
    namespace http = boost::beast::http;
    http::request<http::string_body> request;
    request.method_string(boost::beast::string_view(method.data(), method.size()));
    request.target(boost::beast::string_view(target.data(), target.size()));
    request.version(11);
    request.set(http::field::host, "127.0.0.1");
    request.keep_alive(keep_alive);
    if (!body.empty() || method == "POST") {
      request.body() = std::move(body);
      request.prepare_payload();
    }
    return SendRaw(request, method == "HEAD");
  }

  std::optional<ClientResponse> Get(std::string_view target, bool keep_alive = true) {
    return Request("GET", target, "", keep_alive);
  }

  // Writes raw bytes (for malformed requests) and reads one response.
  std::optional<ClientResponse> SendBytes(std::string_view bytes) {
    boost::beast::error_code ec;
    stream_.expires_after(timeout_);
    boost::asio::async_write(stream_, boost::asio::buffer(bytes.data(), bytes.size()),
                             [&](boost::beast::error_code e, size_t) { ec = e; });
    Drive();
    if (ec) return std::nullopt;
    return ReadResponse(/*head=*/false);
  }

  // Writes raw bytes and reads nothing; false when the write failed.
  bool Write(std::string_view bytes) {
    boost::beast::error_code ec;
    stream_.expires_after(timeout_);
    boost::asio::async_write(stream_, boost::asio::buffer(bytes.data(), bytes.size()),
                             [&](boost::beast::error_code e, size_t) { ec = e; });
    Drive();
    return !ec;
  }

  // True when the server has closed the connection: a read ends with end of stream or a reset
  // (not with a timeout) and no data.
  bool WaitClosed() {
    boost::beast::error_code ec;
    char byte;
    size_t n = 0;
    stream_.expires_after(timeout_);
    stream_.async_read_some(boost::asio::buffer(&byte, 1),
                            [&](boost::beast::error_code e, size_t bytes) {
                              ec = e;
                              n = bytes;
                            });
    Drive();
    return n == 0 && ec && ec != boost::beast::error::timeout;
  }

 private:
  // Runs the pending operation to completion (or to its deadline).
  void Drive() {
    io_context_.restart();
    io_context_.run();
  }

  template <typename Request>
  std::optional<ClientResponse> SendRaw(Request& request, bool head) {
    boost::beast::error_code ec;
    stream_.expires_after(timeout_);
    boost::beast::http::async_write(stream_, request,
                                    [&](boost::beast::error_code e, size_t) { ec = e; });
    Drive();
    if (ec) return std::nullopt;
    return ReadResponse(head);
  }

  std::optional<ClientResponse> ReadResponse(bool head) {
    namespace http = boost::beast::http;
    boost::beast::error_code ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(uint64_t{64} * 1024 * 1024);
    parser.skip(head);
    stream_.expires_after(timeout_);
    http::async_read(stream_, buffer_, parser, [&](boost::beast::error_code e, size_t) { ec = e; });
    Drive();
    if (ec) return std::nullopt;
    const auto& message = parser.get();
    ClientResponse response;
    response.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      std::string name(field.name_string().data(), field.name_string().size());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      response.headers[name] = std::string(field.value().data(), field.value().size());
    }
    response.body = message.body();
    response.keep_alive = message.keep_alive();
    return response;
  }

  boost::asio::io_context io_context_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::chrono::milliseconds timeout_;
  bool connected_ = false;
};

}  // namespace isowatch::server::testing
