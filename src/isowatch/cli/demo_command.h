// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <CLI/CLI.hpp>

#include "isowatch/cli/sim_flags.h"

namespace isowatch::cli {

// `isowatch demo`: simulates a workload with faults switched on part-way through, checks the
// history, prints the report and compares it with the simulator's ground truth.
class DemoCommand {
 public:
  DemoCommand();
  CLI::App* Register(CLI::App& app);
  int Run();

 private:
  SimFlags sim_;
  size_t max_detailed_ = 5;
};

}  // namespace isowatch::cli
