// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "isowatch/cli/read_flags.h"

namespace isowatch::cli {

// `isowatch formats`: lists the history formats (formats/history_file.h) with what each carries,
// whether it is a file or a directory and whether isowatch writes it.
class FormatsCommand {
 public:
  CLI::App* Register(CLI::App& app);
  int Run();
};

// `isowatch convert IN OUT --to FORMAT`: reads a history in any format and writes it in another,
// so that histories move between tools; exit 2 when the target cannot express the history.
// --drop-timestamps writes it as a black-box history (history::WithoutTimestamps).
class ConvertCommand {
 public:
  CLI::App* Register(CLI::App& app);
  int Run();

 private:
  std::string in_;
  std::string out_;
  std::string to_;
  bool drop_timestamps_ = false;
  ReadFlags read_;
};

}  // namespace isowatch::cli
