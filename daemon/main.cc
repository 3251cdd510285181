// SPDX-License-Identifier: Apache-2.0
// isowatchd: the daemon (docs/operations.md). All logic lives in libisowatch; this is the wiring
// of configuration, signals and the ports file.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/mutex_mode.h"
#include "isowatch/common/stop_signals.h"
#include "isowatch/config/config.h"
#include "isowatch/monitor/daemon.h"

namespace {

constexpr char kVersion[] = "0.1.0";
// The exit status of a bad flag or option value, or of a start that fails (docs/operations.md).
constexpr int kExitStartFailed = 2;

// Every HTTP connection, gRPC stream and RocksDB file takes a descriptor, and the soft limit many
// systems start processes with (1024) is below what http.max_connections and the store may
// need: raise it to the hard limit, which the administrator chose.
void RaiseOpenFileLimit(uint64_t http_connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      spdlog::info("open-file limit raised from {} to {}", before, limit.rlim_max);
    } else {
      limit.rlim_cur = before;
    }
  }
  // Room for the store, the gRPC streams and the accept of one more connection besides.
  constexpr uint64_t kOtherFiles = 512;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < http_connections + kOtherFiles) {
    spdlog::warn(
        "the open-file limit ({}) leaves little room beside http.max_connections ({}): raise "
        "it (LimitNOFILE= in the systemd unit) or lower http.max_connections",
        limit.rlim_cur, http_connections);
  }
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "isowatchd: %s\n", std::string(status.message()).c_str());
  return kExitStartFailed;
}

}  // namespace

// Only CLI11 throws (docs/style.md, item 4), and its parse errors are caught here. Anything else
// that could escape (an option declared twice, std::bad_alloc) is a bug, which std::terminate
// reports.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  isowatch::SetReleaseMutexMode();
  // The store, the spill, checkpoints, logs and the ports file hold what the databases wrote:
  // whatever the caller's umask, everything the daemon creates is its owner's only.
  umask(umask(0) | 077);
  CLI::App app{"isowatchd: checks, continuously, the isolation level a database provides"};
  std::string config_path;
  std::optional<std::string> data_dir;
  std::optional<int> grpc_port;
  std::optional<int> http_port;
  std::optional<std::string> ports_file;
  std::optional<std::string> memory_budget;
  std::vector<std::string> assignments;
  bool print_config = false;
  bool version = false;
  app.add_option("--config", config_path, "YAML configuration file (config/isowatchd.yaml)");
  app.add_option("--data-dir", data_dir, "Directory of the store (overrides data_dir)");
  app.add_option("--grpc-port", grpc_port, "gRPC ingest port; 0 = a free port");
  app.add_option("--http-port", http_port, "HTTP port (metrics, health, API); 0 = a free port");
  app.add_option("--ports-file", ports_file,
                 "Write {\"grpc\": P, \"http\": P} here once ready (overrides ports_file)");
  app.add_option("--memory-budget", memory_budget,
                 "Engine memory above which state spills to disk, e.g. 256MiB; 0 = none "
                 "(overrides engine.memory_budget)");
  app.add_option("--set", assignments, "Override any option: --set engine.level=ser")
      ->type_name("KEY=VALUE");
  app.add_flag("--print-config", print_config, "Print the effective configuration and exit");
  app.add_flag("--version", version, "Print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help succeeds; every other parse error (CLI11 numbers them from 100) is a bad flag.
    return app.exit(e) == 0 ? 0 : kExitStartFailed;
  }
  if (version) {
    std::cout << "isowatchd " << kVersion << "\n";
    return 0;
  }

  isowatch::config::DaemonConfig config;
  if (!config_path.empty()) {
    auto loaded = isowatch::config::LoadConfigFile(config_path);
    if (!loaded.ok()) return Fail(loaded.status());
    config = *std::move(loaded);
  }
  std::vector<std::pair<std::string, std::string>> overrides;
  if (data_dir) overrides.emplace_back("data_dir", *data_dir);
  if (grpc_port) overrides.emplace_back("grpc.port", std::to_string(*grpc_port));
  if (http_port) overrides.emplace_back("http.port", std::to_string(*http_port));
  if (ports_file) overrides.emplace_back("ports_file", *ports_file);
  if (memory_budget) overrides.emplace_back("engine.memory_budget", *memory_budget);
  for (const auto& [key, value] : overrides) {
    if (auto s = isowatch::config::ApplyOverride(&config, key, value); !s.ok()) return Fail(s);
  }
  for (const std::string& a : assignments) {
    if (auto s = isowatch::config::ApplyAssignment(&config, a); !s.ok()) return Fail(s);
  }
  if (auto s = isowatch::config::Validate(config); !s.ok()) return Fail(s);
  if (print_config) {
    std::cout << isowatch::config::DescribeConfig(config);
    return 0;
  }
  if (auto s = isowatch::monitor::ConfigureLogging(config.log); !s.ok()) return Fail(s);
  RaiseOpenFileLimit(config.http_limits.max_connections);

  // Before any thread starts (BlockStopSignals): SIGTERM and SIGINT are waited for below.
  const sigset_t signals = isowatch::BlockStopSignals();

  auto daemon = isowatch::monitor::Daemon::Start(config, kVersion);
  if (!daemon.ok()) {
    spdlog::critical("cannot start: {}", std::string(daemon.status().message()));
    return Fail(daemon.status());
  }
  if (!config.ports_file.empty()) {
    if (auto s = (*daemon)->WritePortsFile(config.ports_file); !s.ok()) {
      (*daemon)->Shutdown();
      return Fail(s);
    }
  }
  const int sig = isowatch::WaitForStopSignal(signals);
  spdlog::info("received {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*daemon)->Shutdown();
  return 0;
}
