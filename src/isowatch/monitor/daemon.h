// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "isowatch/common/clock.h"
#include "isowatch/config/config.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/ingest/service.h"
#include "isowatch/monitor/monitor.h"
#include "isowatch/server/http_api.h"
#include "isowatch/server/http_server.h"
#include "isowatch/server/metrics.h"
#include "isowatch/store/store.h"

namespace isowatch::monitor {

// isowatchd's parts wired together from a DaemonConfig: the store in data_dir, the monitor
// (recovery, engine thread), the gRPC ingest server and the HTTP server. The HTTP server starts
// before recovery, so that /healthz answers and /readyz says "recovering the store" meanwhile;
// the API answers 503 until the monitor is there. Used by the isowatchd
// program and by `isowatch demo`, which runs one in-process.
class Daemon {
 public:
  // Opens the store, recovers, binds both ports and starts serving. `clock`: every reading of
  // time the monitor makes (nullptr: the system clock). REQUIRES: `clock` outlives the daemon.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const config::DaemonConfig& config,
                                                       std::string version,
                                                       const common::Clock* clock = nullptr);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  int grpc_port() const { return ingest_->port(); }
  int http_port() const { return http_->port(); }

  // Writes {"grpc": P, "http": P} to `path` atomically (a temporary file renamed into place).
  absl::Status WritePortsFile(const std::string& path) const;

  // Drains: stops taking batches (in-flight ones finish until `deadline`), applies every queued
  // batch, stores the violations, stops the HTTP server. Idempotent.
  void Shutdown(absl::Duration deadline = absl::Seconds(10));

  Monitor& monitor() { return *monitor_; }
  server::DaemonMetrics& metrics() { return *metrics_; }

 private:
  // The HTTP API's view of the monitor, which is null until recovery is done.
  class MonitorView;

  Daemon();

  std::unique_ptr<store::Store> store_;
  std::unique_ptr<server::DaemonMetrics> metrics_;
  std::unique_ptr<MonitorView> view_;                 // outlives http_
  std::unique_ptr<engine::RocksVersionSpill> spill_;  // with a memory budget; outlives monitor_
  std::unique_ptr<Monitor> monitor_;
  std::unique_ptr<ingest::IngestServer> ingest_;
  std::unique_ptr<server::HttpServer> http_;
  std::unique_ptr<server::HttpApi> api_;
  bool shut_down_ = false;
};

// Sets up spdlog's default logger from the log section of a configuration: level, text or JSON
// lines, standard error or a file. Errors: the log file cannot be opened.
absl::Status ConfigureLogging(const config::LogConfig& log);

}  // namespace isowatch::monitor
