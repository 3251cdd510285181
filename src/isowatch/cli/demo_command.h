// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "isowatch/cli/channel_flags.h"
#include "isowatch/cli/sim_flags.h"

namespace isowatch::cli {

// `isowatch demo`: starts isowatchd in-process with a temporary store, feeds it from the built-in
// simulator (a database that starts misbehaving part-way through) over gRPC with simulated
// asynchrony, prints a live one-line summary and each violation as it becomes final, and at the
// end compares what the daemon found with the simulator's ground truth. Ctrl-C stops it cleanly.
// --set configures the daemon as isowatchd's flag does, and the TLS flags the feeder, so that the
// demo can show TLS and tokens end to end (docs/security.md).
class DemoCommand {
 public:
  DemoCommand();
  CLI::App* Register(CLI::App& app);
  int Run();

 private:
  SimFlags sim_;
  ChannelFlags channel_;
  std::vector<std::string> assignments_;  // --set KEY=VALUE for the in-process daemon
  double rate_tps_ = 20000;
  double sigma_ms_ = 20;
  size_t max_shown_ = 20;
  bool keep_ = false;
};

}  // namespace isowatch::cli
