// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/daemon.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "isowatch/checkers/registry.h"
#include "isowatch/common/atomic_file.h"
#include "isowatch/common/credentials.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/monitor/json_log_format.h"
#include "isowatch/monitor/log_routing.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::monitor {
namespace {

spdlog::level::level_enum SpdLevel(config::LogLevel level) {
  switch (level) {
    case config::LogLevel::kTrace:
      return spdlog::level::trace;
    case config::LogLevel::kDebug:
      return spdlog::level::debug;
    case config::LogLevel::kInfo:
      return spdlog::level::info;
    case config::LogLevel::kWarn:
      return spdlog::level::warn;
    case config::LogLevel::kError:
      return spdlog::level::err;
    case config::LogLevel::kCritical:
      return spdlog::level::critical;
    case config::LogLevel::kOff:
      break;
  }
  return spdlog::level::off;
}

}  // namespace

class Daemon::MonitorView final : public server::ViolationSource, public server::StatusSource {
 public:
  // REQUIRES: `monitor` outlives the HTTP server.
  void Set(Monitor* monitor) { monitor_.store(monitor, std::memory_order_release); }

  absl::Status Ready() const {
    Monitor* m = monitor_.load(std::memory_order_acquire);
    return m != nullptr ? m->Ready() : Recovering();
  }
  absl::StatusOr<store::ViolationPage> Query(const store::ViolationFilter& filter, size_t limit,
                                             std::string_view page_token) override {
    Monitor* m = monitor_.load(std::memory_order_acquire);
    if (m == nullptr) return Recovering();
    return m->Query(filter, limit, page_token);
  }
  absl::StatusOr<store::SummaryPage> QuerySummaries(const store::SummaryFilter& filter,
                                                    size_t limit,
                                                    std::string_view page_token) override {
    Monitor* m = monitor_.load(std::memory_order_acquire);
    if (m == nullptr) return Recovering();
    return m->QuerySummaries(filter, limit, page_token);
  }
  absl::StatusOr<server::DaemonStatus> GetStatus() override {
    Monitor* m = monitor_.load(std::memory_order_acquire);
    if (m == nullptr) return Recovering();
    return m->GetStatus();
  }

 private:
  static absl::Status Recovering() { return absl::UnavailableError("recovering the store"); }

  // Acquire/release: the monitor is fully built before an HTTP thread can see it.
  std::atomic<Monitor*> monitor_{nullptr};
};

Daemon::Daemon() : view_(std::make_unique<MonitorView>()) {}

absl::Status ConfigureLogging(const config::LogConfig& log) {
  std::shared_ptr<spdlog::logger> logger;
  if (log.file.empty()) {
    logger = std::make_shared<spdlog::logger>(
        "isowatchd", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  } else {
    // Created owner-only (it holds what the databases wrote); spdlog then appends to it.
    const int fd = open(log.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    // spdlog reports a file it cannot open by throwing; the rest of isowatch never throws.
    try {
      logger = std::make_shared<spdlog::logger>(
          "isowatchd", std::make_shared<spdlog::sinks::basic_file_sink_mt>(log.file));
    } catch (const spdlog::spdlog_ex& e) {
      return absl::InvalidArgumentError(
          fmt::format("log.file: cannot open {}: {}", log.file, e.what()));
    }
  }
  if (log.format == config::LogFormat::kJson) {
    logger->set_formatter(JsonLineFormatter());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  }
  logger->set_level(SpdLevel(log.level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  RouteProcessLogsToSpdlog();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const config::DaemonConfig& config,
                                                      std::string version,
                                                      const common::Clock* clock) {
  RETURN_IF_ERROR(config::Validate(config));
  // The credentials first: a file that cannot be read stops the start before anything is opened.
  ASSIGN_OR_RETURN(TlsCredentials grpc_tls, LoadTlsCredentials(config.grpc.tls, "grpc.tls"));
  ASSIGN_OR_RETURN(TlsCredentials http_tls, LoadTlsCredentials(config.http.tls, "http.tls"));
  std::string grpc_token;
  if (!config.grpc.token_file.empty()) {
    ASSIGN_OR_RETURN(grpc_token, ReadTokenFile(config.grpc.token_file, "grpc.auth.token_file"));
  }
  std::string http_token;
  if (!config.http.token_file.empty()) {
    ASSIGN_OR_RETURN(http_token, ReadTokenFile(config.http.token_file, "http.auth.token_file"));
  }
  for (const std::string& warning : config::AccessWarnings(config)) spdlog::warn("{}", warning);
  std::unique_ptr<Daemon> d(new Daemon());
  std::error_code ec;
  // Owner-only, like everything in it (docs/operations.md, "Files").
  if (std::filesystem::create_directories(config.data_dir, ec)) {
    std::filesystem::permissions(config.data_dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
  }
  if (ec) {
    return absl::FailedPreconditionError(
        fmt::format("data_dir: cannot create {}: {}", config.data_dir, ec.message()));
  }
  ASSIGN_OR_RETURN(
      d->store_,
      store::Store::Open(
          (std::filesystem::path(config.data_dir) / "store").string(),
          store::StoreOptions{.sync_writes = config.store.sync_writes,
                              .violation_bounds = {.max_per_key = config.findings.max_per_key,
                                                   .max_per_txn = config.findings.max_per_txn,
                                                   .max_bytes = config.findings.max_store_bytes}}));
  d->metrics_ = std::make_unique<server::DaemonMetrics>(version);
  d->metrics_->engine_memory_budget_bytes().Set(static_cast<double>(config.engine.memory_budget));
  server::HttpServer::Options http;
  http.host = config.http.listen;
  http.port = static_cast<uint16_t>(config.http.port);
  const config::HttpLimits& limits = config.http_limits;
  http.max_connections = static_cast<size_t>(limits.max_connections);
  http.idle_timeout = limits.idle_timeout;
  http.header_timeout = limits.header_timeout;
  http.body_timeout = limits.body_timeout;
  http.write_timeout = limits.write_timeout;
  http.api_threads = static_cast<int>(limits.api_threads);
  http.api_queue = static_cast<size_t>(limits.api_queue);
  http.tls = std::move(http_tls);
  server::DaemonMetrics* metrics = d->metrics_.get();
  // Looked up once: a flood of connections drops thousands a second.
  std::array<prometheus::Counter*, std::size(server::kAllHttpDrops)> dropped{};
  for (server::HttpDrop drop : server::kAllHttpDrops) {
    dropped[static_cast<size_t>(drop)] =
        &metrics->HttpConnectionsDropped(server::HttpDropName(drop));
  }
  std::array<prometheus::Counter*, std::size(server::kAllHttpRejections)> rejected{};
  for (server::HttpRejection rejection : server::kAllHttpRejections) {
    rejected[static_cast<size_t>(rejection)] =
        &metrics->HttpRequestsRejected(server::HttpRejectionName(rejection));
  }
  http.events.dropped = [dropped](server::HttpDrop drop) {
    dropped[static_cast<size_t>(drop)]->Increment();
  };
  http.events.rejected = [rejected](server::HttpRejection rejection) {
    rejected[static_cast<size_t>(rejection)]->Increment();
  };
  d->http_ = std::make_unique<server::HttpServer>(http);
  MonitorView* view = d->view_.get();
  server::HttpApi::Options api;
  api.token = std::move(http_token);
  api.metrics_need_token = config.http_auth.metrics == config::HttpAccess::kToken;
  api.health_need_token = config.http_auth.health == config::HttpAccess::kToken;
  d->api_ = std::make_unique<server::HttpApi>(
      d->metrics_.get(), view, view, [view] { return view->Ready(); }, std::move(api));
  RETURN_IF_ERROR(d->api_->RegisterOn(*d->http_));
  RETURN_IF_ERROR(d->http_->Start());
  spdlog::info("HTTP on {}:{}; recovering the store in {}", config.http.listen, d->http_port(),
               config.data_dir);
  MonitorOptions options;
  options.clock = clock;
  options.live.engine.level = config.engine.level;
  options.live.engine.finality_timeout_ms = config.engine.finality_timeout.count();
  options.live.engine.retention = config.engine.retention;
  // The last checkpoint (docs/operations.md, "Checkpoints"): the monitor restores it, then
  // replays the log written after it.
  ASSIGN_OR_RETURN(const std::optional<store::CheckpointRecord> saved, d->store_->GetCheckpoint());
  if (saved) {
    auto checkpoint = std::make_shared<v1::DaemonCheckpoint>();
    if (!checkpoint->ParseFromString(saved->blob)) {
      return absl::DataLossError(
          fmt::format("the store's checkpoint (generation {}) does not parse", saved->generation));
    }
    options.checkpoint = std::move(checkpoint);
  }
  const std::string spill_dir = (std::filesystem::path(config.data_dir) / "spill").string();
  const std::string snapshot =
      options.checkpoint != nullptr ? options.checkpoint->spill_snapshot() : std::string();
  if (!snapshot.empty() || config.engine.memory_budget > 0 || config.engine.spill_collected) {
    if (!snapshot.empty()) {
      // The spill as it was at the checkpoint: the engine's saved state refers to what it held
      // (even if the budget has been turned off since).
      ASSIGN_OR_RETURN(
          d->spill_, engine::RocksVersionSpill::OpenFromSnapshot(
                         spill_dir, (std::filesystem::path(config.data_dir) / snapshot).string()));
    } else {
      // Derived state: RocksVersionSpill::Open clears it; recovery replays the log through the
      // engine, which spills again what it collects.
      ASSIGN_OR_RETURN(d->spill_, engine::RocksVersionSpill::Open(spill_dir));
    }
    options.live.engine.spill = d->spill_.get();
    options.rocks_spill = d->spill_.get();
    options.live.engine.spill_collected = config.engine.spill_collected;
    options.live.engine.memory_budget = config.engine.memory_budget;
    options.live.engine.spill_retention = config.engine.spill_retention;
    options.live.engine.on_spill_pause = [metrics](double seconds) {
      metrics->spill_pause().Observe(seconds);
    };
    options.live.engine.on_reload = [metrics](double seconds) {
      metrics->spill_reload().Observe(seconds);
    };
    options.live.history.on_byte_collection = [metrics](double seconds, uint64_t forgotten) {
      metrics->byte_collection().Observe(seconds);
      metrics->byte_strings_forgotten().Increment(static_cast<double>(forgotten));
    };
    options.live.history.on_key_collection = [metrics](double seconds, uint64_t forgotten) {
      metrics->key_collection().Observe(seconds);
      metrics->keys_forgotten().Increment(static_cast<double>(forgotten));
    };
  }
  options.checkpoint_interval_ms = config.store.checkpoint_interval.count();
  options.data_dir = config.data_dir;
  options.queue_batches = config.ingest.queue_batches;
  options.remembered_ids = static_cast<size_t>(config::RememberedIds(config));
  options.version = version;
  options.findings_log =
      FindingsLogOptions{.lines_per_minute = config.findings.log_per_minute,
                         .max_log_bytes = config.findings.max_log_bytes,
                         .summary_interval_ms = config.findings.summary_interval.count()};
  if (!config.windows.checkers.empty()) {
    const config::WindowsConfig& wc = config.windows;
    windows::WindowOptions cut;
    if (wc.by == config::WindowCut::kCommitTime) {
      cut.span = static_cast<int64_t>(wc.size);
    } else {
      cut.transactions = wc.size;
    }
    cut.overlap = static_cast<int64_t>(wc.overlap);
    options.live.windows = cut;
    for (const std::string& name : wc.checkers) {
      checkers::CheckerOptions checker_options;
      const std::string prefix = name + ".";
      for (const auto& [key, value] : config.checker_options) {
        if (key.starts_with(prefix)) checker_options[key.substr(prefix.size())] = value;
      }
      // Levels "auto": the level the database promises (the engine's), if the plug-in judges
      // it; a database that promises SI is not faulted for what SI allows.
      if (!checker_options.contains("levels")) {
        const checkers::CheckerInfo* info = checkers::FindChecker(name);
        if (info != nullptr && std::find(info->levels.begin(), info->levels.end(),
                                         config.engine.level) != info->levels.end()) {
          checker_options["levels"] = verdict::IsolationLevelName(config.engine.level);
        }
      }
      options.window_checkers.emplace_back(name, std::move(checker_options));
    }
    options.pool = windows::PoolOptions{.threads = static_cast<size_t>(wc.threads),
                                        .max_queued = static_cast<size_t>(wc.max_queued),
                                        .time_limit = wc.time_limit};
  }
  ASSIGN_OR_RETURN(d->monitor_,
                   Monitor::Open(d->store_.get(), d->metrics_.get(), std::move(options)));

  ingest::IngestServerOptions grpc;
  grpc.host = config.grpc.listen;
  grpc.port = config.grpc.port;
  grpc.service.limits.max_batch_txns =
      static_cast<uint32_t>(std::min<uint64_t>(config.ingest.max_batch_transactions, UINT32_MAX));
  grpc.service.limits.max_batch_bytes = config.ingest.max_batch_bytes;
  grpc.service.max_streams = config.ingest.max_streams;
  for (const store::StreamRecord& s : d->store_->ListStreams()) {
    grpc.service.known_streams.push_back(s.name);
  }
  grpc.service.limits.max_ops_per_txn =
      static_cast<uint32_t>(std::min<uint64_t>(config.ingest.max_ops_per_transaction, UINT32_MAX));
  grpc.service.events = d->monitor_->ingest_events();
  grpc.security.tls = std::move(grpc_tls);
  grpc.security.token = std::move(grpc_token);
  ASSIGN_OR_RETURN(d->ingest_,
                   ingest::StartIngestServer(grpc, *d->monitor_, &d->monitor_->id_registry()));
  d->monitor_->SetIngestCounters(&d->ingest_->counters());
  d->monitor_->Start();
  view->Set(d->monitor_.get());
  spdlog::info("isowatchd {} serving: gRPC{} on {}:{}, HTTP{} on {}:{}, store in {}", version,
               config.grpc.tls.enabled() ? " (TLS)" : "", config.grpc.listen, d->grpc_port(),
               config.http.tls.enabled() ? "S" : "", config.http.listen, d->http_port(),
               config.data_dir);
  const uint64_t remembered = config::RememberedIds(config);
  spdlog::info(
      "memory: engine budget {}, transaction ids remembered per stream: {}",
      config.engine.memory_budget == 0 ? std::string("none")
                                       : fmt::format("{} bytes", config.engine.memory_budget),
      remembered == 0 ? std::string("all") : fmt::format("{} to {}", remembered, 2 * remembered));
  if (!config.windows.checkers.empty()) {
    std::string names;
    for (const std::string& name : config.windows.checkers) {
      names += (names.empty() ? "" : ", ") + name;
    }
    spdlog::info(
        "windows: {} of {} {}, lead-in {}, checked by {} (time limit {} ms each)",
        config.windows.by == config::WindowCut::kCommitTime ? "commit-time spans" : "counts",
        config.windows.size,
        config.windows.by == config::WindowCut::kCommitTime ? "timestamp units" : "transactions",
        config.windows.overlap, names, config.windows.time_limit.count());
  }
  return d;
}

Daemon::~Daemon() { Shutdown(); }

absl::Status Daemon::WritePortsFile(const std::string& path) const {
  // Read by scripts while the daemon runs; a stale file after a crash is rewritten at start, so
  // it needs no sync.
  absl::Status s = WriteFileAtomically(
      path, fmt::format("{{\"grpc\": {}, \"http\": {}}}\n", grpc_port(), http_port()),
      /*sync=*/false);
  if (s.ok()) return s;
  return absl::Status(s.code(), fmt::format("ports_file: {}", std::string(s.message())));
}

void Daemon::Shutdown(absl::Duration deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  spdlog::info("draining: no new batches; finishing queued work");
  if (ingest_ != nullptr) ingest_->Shutdown(absl::Now() + deadline);
  if (monitor_ != nullptr) monitor_->Stop();
  if (http_ != nullptr) http_->Stop();
  if (store_ != nullptr) {
    spdlog::info("stopped; {} violations in the store, {} more counted in summaries",
                 store_->CountViolations(), store_->CountSummarised());
  }
  spdlog::default_logger()->flush();
}

}  // namespace isowatch::monitor
