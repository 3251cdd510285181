// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace isowatch::cli {

// `isowatch check FILE`: reads a history and checks it with Chronos at SI or SER.
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
};

}  // namespace isowatch::cli
