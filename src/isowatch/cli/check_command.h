// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace isowatch::cli {

// `isowatch check FILE`: reads a history and checks it with Chronos at SI or SER, or with
// `--online` with the online engine, fed the history through simulated asynchrony.
class CheckCommand {
 public:
  // Adds the subcommand to `app`; returns it so main can tell whether it was chosen.
  CLI::App* Register(CLI::App& app);
  int Run();

 private:
  std::string file_;
  std::string level_ = "si";
  std::string format_ = "auto";
  std::string initial_value_ = "null";
  std::string initial_txn_;
  bool json_ = false;
  size_t max_detailed_ = 20;
  // --online and the delivery it simulates (engine::DeliveryOptions, OnlineOptions).
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
  std::string spill_dir_;
};

}  // namespace isowatch::cli
