// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "isowatch/cli/sim_flags.h"

namespace isowatch::cli {

// `isowatch gen`: runs the simulator and writes the history and, beside it, its ground truth.
class GenCommand {
 public:
  GenCommand();
  CLI::App* Register(CLI::App& app);
  int Run();

 private:
  SimFlags sim_;
  std::string out_;
  std::string format_ = "timekiller";
  std::string truth_;
  std::string values_ = "int";
  bool drop_timestamps_ = false;
};

}  // namespace isowatch::cli
