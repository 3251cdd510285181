// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include <CLI/CLI.hpp>

#include "isowatch/checkers/plugin.h"
#include "isowatch/cli/read_flags.h"
#include "isowatch/history/history.h"
#include "isowatch/report/check_report.h"

namespace isowatch::cli {

// `isowatch check FILE`: reads a history and checks it with Chronos at SI or SER, with
// `--online` with the online engine, fed the history through simulated asynchrony, or with
// `--checker NAME,...` with plug-in checkers (docs/checkers/plugins.md), on the whole history or
// on windows of it.
class CheckCommand {
 public:
  // Adds the subcommand to `app`; returns it so main can tell whether it was chosen.
  CLI::App* Register(CLI::App& app);
  int Run();

 private:
  std::string file_;
  std::string level_ = "si";
  ReadFlags read_;
  bool json_ = false;
  size_t max_detailed_ = 20;
  // --online and the delivery it simulates (sim::DeliveryOptions, OnlineOptions).
  bool online_ = false;
  double mean_ms_ = 100;
  double sigma_ms_ = 10;
  uint32_t batch_ = 500;
  uint64_t seed_ = 1;
  double rate_tps_ = 10000;
  bool no_watermarks_ = false;
  int64_t timeout_ms_ = 5000;
  int64_t retention_ = 0;
  // The version spill (engine::VersionSpill): a budget such as "256MiB" (empty or 0: none),
  // spilling everything collected, and where (empty: a temporary directory, removed after).
  std::string memory_budget_;
  bool spill_collected_ = false;
  int64_t spill_retention_ = 0;
  std::string spill_dir_;
  // --checker and what goes with it.
  std::string checker_list_;
  std::vector<std::string> checker_options_;  // NAME.OPTION=VALUE
  int64_t time_limit_ms_ = 0;                 // per plug-in and window; 0: none
  uint64_t window_ = 0;                       // transactions per window; 0: the whole history
  uint64_t window_overlap_ = 0;
  CLI::Option* level_option_ = nullptr;
  // The plug-ins were picked for the user (no --checker): they judge --level, given or not.
  bool force_level_ = false;

  // The configured plug-ins, from --checker, --checker-option and --level.
  absl::StatusOr<std::vector<std::unique_ptr<checkers::Checker>>> CreateCheckers() const;
  // Runs them on `h` (whole, or cut into windows) and fills `rep`.
  absl::Status RunCheckers(const history::History& h, report::CheckReport& rep) const;
};

}  // namespace isowatch::cli
