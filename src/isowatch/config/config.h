// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/common/credentials.h"
#include "isowatch/config/units.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::config {

enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };
const char* LogLevelName(LogLevel level);  // "trace", "debug", "info", "warn", "error", ...

enum class LogFormat : uint8_t { kText, kJson };
const char* LogFormatName(LogFormat format);  // "text", "json"

// Where a server listens, and who may talk to it (docs/security.md).
struct Endpoint {
  std::string listen;  // address or host name
  int port = 0;        // 0: a free port chosen by the system (see ports_file)
  TlsFiles tls;        // no cert_file: no TLS
  // A file holding the bearer token clients must send; empty: none.
  std::string token_file;

  bool operator==(const Endpoint&) const = default;
};

// Who may read an HTTP endpoint that is not the API.
enum class HttpAccess : uint8_t {
  kOpen,   // anyone who can connect
  kToken,  // only with http.auth.token_file's bearer token, as /api/v1/*
};
const char* HttpAccessName(HttpAccess access);  // "open", "token"

// Which of the HTTP endpoints besides /api/v1/* need the token (docs/security.md).
struct HttpAuthConfig {
  HttpAccess metrics = HttpAccess::kOpen;  // /metrics
  HttpAccess health = HttpAccess::kOpen;   // /healthz, /livez, /readyz

  bool operator==(const HttpAuthConfig&) const = default;
};

// The HTTP server's defences against slow and idle clients and against a saturated API
// (docs/operations.md, "HTTP under load"): the http.* options besides the endpoint.
struct HttpLimits {
  // Connections open at once; one more closes the connection idle the longest.
  uint64_t max_connections = 256;
  // A kept-alive connection is closed when its next request does not start within this.
  std::chrono::milliseconds idle_timeout{60'000};
  // A request header must be complete this long after the connection was accepted (first
  // request) or after its first byte (later requests).
  std::chrono::milliseconds header_timeout{10'000};
  // A request body must be complete this long after its header.
  std::chrono::milliseconds body_timeout{30'000};
  // A response must be taken by the client within this.
  std::chrono::milliseconds write_timeout{30'000};
  // Threads answering /api/v1/*, and API requests waiting for one (beyond: 503).
  uint64_t api_threads = 2;
  uint64_t api_queue = 16;

  bool operator==(const HttpLimits&) const = default;
};

struct LogConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  std::string file;  // empty: standard error

  bool operator==(const LogConfig&) const = default;
};

struct EngineConfig {
  verdict::IsolationLevel level = verdict::IsolationLevel::kSnapshotIsolation;
  // For streams without watermarks: a verdict becomes final this long after its transaction
  // arrived.
  std::chrono::milliseconds finality_timeout{5000};
  // Versions are collected only this far below the final point, in the physical unit of the
  // streams' timestamps (engine::EngineOptions::retention).
  int64_t retention = 0;
  // Bytes of engine state above which collected versions move to the spill on disk
  // (engine::EngineOptions::memory_budget); 0: no budget.
  uint64_t memory_budget = 0;
  // Also spill what the normal collection drops, so that transactions of any length are checked
  // exactly (engine::EngineOptions::spill_collected).
  bool spill_collected = false;
  // How far below the final point the spill keeps versions, in the physical unit of the
  // timestamps (engine::EngineOptions::spill_retention); 0: for the life of the process.
  int64_t spill_retention = 0;

  bool operator==(const EngineConfig&) const = default;
};

struct IngestConfig {
  uint64_t max_batch_transactions = 10'000;
  uint64_t max_batch_bytes = 16ull << 20;
  uint64_t max_ops_per_transaction = 10'000;
  uint64_t queue_batches = 64;  // capacity of the queue between ingest and the engine
  uint64_t max_streams = 1024;
  // Transaction ids remembered per stream to recognise a transaction sent again: at least the
  // newest this many, at most twice as many; 0: every id. Unset ("auto"): see RememberedIds.
  std::optional<uint64_t> remembered_ids;

  bool operator==(const IngestConfig&) const = default;
};

// How windows are cut (docs/windows.md).
enum class WindowCut : uint8_t { kTransactions, kCommitTime };
const char* WindowCutName(WindowCut cut);  // "transactions", "commit_time"

// Sealed windows and the plug-in checkers run on them (docs/windows.md).
struct WindowsConfig {
  // The plug-ins run on every sealed window (checkers/registry.h); empty: no windows are cut.
  std::vector<std::string> checkers;
  WindowCut by = WindowCut::kTransactions;
  // Transactions per window, or its span of commit time in the unit of the timestamps.
  uint64_t size = 10'000;
  // Lead-in from the previous window, in the unit of `size`; less than `size`.
  uint64_t overlap = 1'000;
  // Worker threads; 0: one fewer than the cores, at least one.
  uint64_t threads = 0;
  // Sealed windows waiting for a worker; beyond it the oldest is dropped.
  uint64_t max_queued = 16;
  // Time one checker may spend on one window before it reports UNKNOWN for it.
  std::chrono::milliseconds time_limit{60'000};
  bool operator==(const WindowsConfig&) const = default;
};

struct StoreConfig {
  bool sync_writes = true;
  // 0: no checkpoints.
  std::chrono::milliseconds checkpoint_interval{300'000};

  bool operator==(const StoreConfig&) const = default;
};

// How much of the violations the daemon keeps in full and logs (docs/operations.md, "Bounded
// findings"); past it they are counted in summaries.
struct FindingsConfig {
  uint64_t max_per_key = 100;                      // kept in full per kind and key; 0: no bound
  uint64_t max_per_txn = 20;                       // per kind and transaction; 0: no bound
  uint64_t max_store_bytes = uint64_t{256} << 20;  // 0: no limit
  uint64_t log_per_minute = 600;                   // violations logged in full; 0: none
  uint64_t max_log_bytes = uint64_t{64} << 20;     // 0: no limit
  std::chrono::milliseconds summary_interval{60'000};

  bool operator==(const FindingsConfig&) const = default;
};

// Every option of isowatchd, with its default. The file config/isowatchd.yaml lists them all
// with comments, docs/configuration.md in a table; a field added here needs an entry in the
// option table of config.cc, in both files and in config_test.cc. Plain data.
struct DaemonConfig {
  std::string data_dir = "/var/lib/isowatch";
  Endpoint grpc{.listen = "127.0.0.1", .port = 7470};
  Endpoint http{.listen = "127.0.0.1", .port = 7471};
  HttpAuthConfig http_auth;  // http.auth.metrics, http.auth.health
  HttpLimits http_limits;    // the http.* options that bound connections and the API
  std::string ports_file;    // empty: none
  LogConfig log;
  EngineConfig engine;
  IngestConfig ingest;
  StoreConfig store;
  FindingsConfig findings;
  WindowsConfig windows;
  // Options of the plug-in checkers, "NAME.OPTION" -> value as written (`checkers.NAME.OPTION`
  // in the file); an option not set takes the plug-in's default.
  std::map<std::string, std::string> checker_options;

  bool operator==(const DaemonConfig&) const = default;
};

// ingest.remembered_ids when "auto" and engine.memory_budget is set.
inline constexpr uint64_t kDefaultRememberedIds = 262'144;

// ingest.remembered_ids as it applies: the value set, or for "auto" 0 (every id) without a
// memory budget and kDefaultRememberedIds with one.
uint64_t RememberedIds(const DaemonConfig& config);

// One option as the file and the flags name it.
struct OptionInfo {
  std::string key;            // dotted: "engine.finality_timeout"
  std::string type;           // what a value looks like: "duration", "si | ser", ...
  std::string default_value;  // rendered as in the file
  std::string help;           // one sentence
};

// Every option, in the order of config/isowatchd.yaml.
const std::vector<OptionInfo>& Options();

// Reads a YAML configuration file. Options it does not set keep their defaults. Each value is
// checked on its own (type, range); cross-field checks are Validate's, to run once the flags are
// applied too.
// Errors: NotFound / PermissionDenied when the file cannot be read; InvalidArgument for a syntax
// error, an unknown option (typos never pass) or a bad value, with `FILE:LINE: ` and the option's
// dotted key in the message.
absl::StatusOr<DaemonConfig> LoadConfigFile(const std::string& path);

// The same for YAML text; `source` names it in messages.
absl::StatusOr<DaemonConfig> LoadConfigString(std::string_view yaml,
                                              std::string_view source = "<config>");

// Sets the option `dotted_key` ("grpc.port") from its textual value ("0"), with the same checks
// as the file. Errors: InvalidArgument naming the option.
absl::Status ApplyOverride(DaemonConfig* config, std::string_view dotted_key,
                           std::string_view value);

// ApplyOverride for a "KEY=VALUE" assignment (the daemon's --set flag).
absl::Status ApplyAssignment(DaemonConfig* config, std::string_view assignment);

// Cross-field and range checks of a complete configuration: data_dir set, ports in range and
// distinct, positive limits, ... Errors: InvalidArgument listing every problem, each naming its
// option.
absl::Status Validate(const DaemonConfig& config);

// Whether `host` (an address or a host name as grpc.listen takes it) can only be reached from
// this machine: 127.0.0.0/8, ::1, an IPv4-mapped loopback, or "localhost".
bool IsLoopback(std::string_view host);

// What the configuration leaves open to anyone who can connect, one sentence each, for the
// daemon to log as warnings at start (docs/security.md): a gRPC port on an address other than
// loopback with neither client certificates nor a token, an HTTP port so with an API without a
// token, and a token that would travel in clear over a network.
std::vector<std::string> AccessWarnings(const DaemonConfig& config);

// The configuration as YAML, every option present (for isowatchd --print-config). Loading it
// back gives the same configuration.
std::string DescribeConfig(const DaemonConfig& config);

}  // namespace isowatch::config
