// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <functional>

#include "absl/status/status.h"

#include "isowatch/server/http_message.h"
#include "isowatch/server/http_server.h"
#include "isowatch/server/metrics.h"
#include "isowatch/server/status_source.h"
#include "isowatch/server/violation_source.h"

namespace isowatch::server {

// Says whether the daemon is ready to take ingest: OK when ready, otherwise a status whose
// message is the reason ("recovering the store", "draining").
using ReadinessCheck = std::function<absl::Status()>;

// The daemon's HTTP endpoints (docs/operations.md, "HTTP API"):
//   GET /metrics            Prometheus text format (DaemonMetrics::Serialize)
//   GET /healthz, /livez    200 "ok" while the process serves HTTP
//   GET /readyz             200 "ok" when the readiness check passes, else 503 and the reason
//   GET /api/v1/violations  final violations as JSON, filtered and paged
//   GET /api/v1/summaries   the summaries of the violations not stored in full, filtered and paged
//   GET /api/v1/status      streams, watermarks, lag, counts, memory, uptime, version (JSON)
// A provider left null makes its endpoint answer 503; a null readiness check means always ready.
//
// Thread-safety: thread-safe as long as the providers are (handlers may run concurrently).
// Ownership: does not own the providers; they, and this object, must outlive the HttpServer it is
// registered on (or at least its Stop()).
class HttpApi {
 public:
  struct Options {
    size_t default_limit = 100;  // violations per page when the request gives no limit
    size_t max_limit = 1000;     // larger limits are lowered to this
    // The bearer token /api/v1/* needs (`Authorization: Bearer TOKEN`); empty: none. A request
    // without it, or with another, answers 401 with `WWW-Authenticate: Bearer` and is counted
    // (isowatch_http_requests_rejected_total{reason="unauthorized"}). docs/security.md.
    std::string token;
    bool metrics_need_token = false;  // /metrics needs it too
    bool health_need_token = false;   // /healthz, /livez and /readyz need it too
  };

  HttpApi(DaemonMetrics* metrics, ViolationSource* violations, StatusSource* status,
          ReadinessCheck readiness, Options options);
  HttpApi(DaemonMetrics* metrics, ViolationSource* violations, StatusSource* status,
          ReadinessCheck readiness)
      : HttpApi(metrics, violations, status, std::move(readiness), Options()) {}

  // Adds the endpoints above to `server`: the probes and /metrics inline, the API pooled
  // (RouteKind), each behind the token where the options ask for it. /metrics then also reports
  // the server's open connections. REQUIRES: before server.Start(). Errors: InvalidArgument when
  // metrics or health need a token and there is none; those of HttpServer::Handle (a path
  // already taken).
  absl::Status RegisterOn(HttpServer& server);

  // The handlers, also callable directly.
  HttpResponse ServeMetrics(const HttpRequest& request) const;
  HttpResponse ServeHealth(const HttpRequest& request) const;
  HttpResponse ServeReady(const HttpRequest& request) const;
  HttpResponse ServeViolations(const HttpRequest& request) const;
  HttpResponse ServeSummaries(const HttpRequest& request) const;
  HttpResponse ServeStatus(const HttpRequest& request) const;

 private:
  // `handler` behind the token when `need_token`: 401 (JSON with `json`) without it.
  HttpHandler Guard(HttpHandler handler, bool need_token, bool json) const;

  DaemonMetrics* metrics_;
  ViolationSource* violations_;
  StatusSource* status_;
  ReadinessCheck readiness_;
  Options options_;
  const HttpServer* server_ = nullptr;           // set by RegisterOn; not owned
  prometheus::Counter* unauthorized_ = nullptr;  // set by RegisterOn; metrics_'s
};

}  // namespace isowatch::server
