// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "isowatch/cli/channel_flags.h"
#include "isowatch/cli/read_flags.h"

namespace isowatch::cli {

// `isowatch replay FILE --to HOST:PORT`: streams a history file to isowatchd with the simulated
// asynchrony of `check --online` (docs/operations.md, "Replaying a history file").
class ReplayCommand {
 public:
  CLI::App* Register(CLI::App& app);
  int Run();

 private:
  std::string file_;
  std::string to_;
  ReadFlags read_;
  ChannelFlags channel_;
  std::string stream_ = "replay";
  std::string id_prefix_;
  uint32_t batch_ = 500;
  double sigma_ms_ = 10;
  double mean_ms_ = 100;
  uint64_t seed_ = 1;
  double collect_rate_tps_ = 10000;
  double rate_tps_ = 0;
  int64_t connect_timeout_ms_ = 5000;
  bool no_watermarks_ = false;
  bool quiet_ = false;
};

}  // namespace isowatch::cli
