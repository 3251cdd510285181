// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace isowatch::server {

// One HTTP request as a handler sees it: the method, the percent-decoded path without its query,
// the decoded query parameters in the order they appeared, the header fields and the body.
// A plain value; thread-compatible.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...; a HEAD request reaches a GET handler as "HEAD"
  std::string path;    // "/api/v1/violations"
  std::vector<std::pair<std::string, std::string>> query;    // decoded; "+" became " "
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;

  // The value of the first query parameter called `name`, or nullopt.
  std::optional<std::string_view> Param(std::string_view name) const;
  // The number of query parameters called `name`.
  size_t ParamCount(std::string_view name) const;
  // The value of the first header field called `name` (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

// What a handler answers. Content-Length, Connection and Server are set by the server.
// A plain value; thread-compatible.
struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra header fields

  static HttpResponse Text(int status, std::string body);
  static HttpResponse Json(int status, std::string body);
};

// Serves one request. Runs on one of the server's threads; it must not block for long, and it must
// be safe to call concurrently when the server runs more than one thread.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

}  // namespace isowatch::server
