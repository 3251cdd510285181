// SPDX-License-Identifier: Apache-2.0
// The isowatch command: check history files, generate them, convert them between formats,
// replay them to isowatchd, run the demo.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "isowatch/cli/check_command.h"
#include "isowatch/cli/checkers_command.h"
#include "isowatch/cli/command.h"
#include "isowatch/cli/demo_command.h"
#include "isowatch/cli/formats_command.h"
#include "isowatch/cli/gen_command.h"
#include "isowatch/cli/replay_command.h"
#include "isowatch/common/mutex_mode.h"

// Only CLI11 throws (docs/style.md, item 4), and its parse errors are caught here. Anything else
// that could escape (an option declared twice, std::bad_alloc) is a bug, which std::terminate
// reports.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  isowatch::SetReleaseMutexMode();
  using isowatch::cli::CheckCommand;
  using isowatch::cli::CheckersCommand;
  using isowatch::cli::ConvertCommand;
  using isowatch::cli::DemoCommand;
  using isowatch::cli::FormatsCommand;
  using isowatch::cli::GenCommand;
  using isowatch::cli::kExitBadInput;
  using isowatch::cli::kExitInternalError;
  using isowatch::cli::ReplayCommand;
  CLI::App app("isowatch: checks that a database provides the isolation level it promises");
  app.require_subcommand(1);
  CheckCommand check;
  CheckersCommand checkers;
  GenCommand gen;
  DemoCommand demo;
  ReplayCommand replay;
  FormatsCommand formats;
  ConvertCommand convert;
  CLI::App* check_cmd = check.Register(app);
  CLI::App* checkers_cmd = checkers.Register(app);
  CLI::App* gen_cmd = gen.Register(app);
  CLI::App* demo_cmd = demo.Register(app);
  CLI::App* replay_cmd = replay.Register(app);
  CLI::App* formats_cmd = formats.Register(app);
  CLI::App* convert_cmd = convert.Register(app);
  // CLI11 reports usage errors by exception; this entry point is where they stop.
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    if (check_cmd->parsed()) return check.Run();
    if (checkers_cmd->parsed()) return checkers.Run();
    if (gen_cmd->parsed()) return gen.Run();
    if (demo_cmd->parsed()) return demo.Run();
    if (replay_cmd->parsed()) return replay.Run();
    if (formats_cmd->parsed()) return formats.Run();
    if (convert_cmd->parsed()) return convert.Run();
  } catch (const std::exception& e) {
    std::cerr << "isowatch: internal error: " << e.what() << "\n";
    return kExitInternalError;
  }
  return kExitBadInput;
}
