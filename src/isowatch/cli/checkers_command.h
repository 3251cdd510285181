// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <CLI/CLI.hpp>

namespace isowatch::cli {

// `isowatch checkers`: lists the registered plug-in checkers (checkers/registry.h) with the
// levels each judges, what it needs of a history and its options, for `check --checker`.
class CheckersCommand {
 public:
  // Adds the subcommand to `app`; returns it so main can tell whether it was chosen.
  CLI::App* Register(CLI::App& app);
  int Run();
};

}  // namespace isowatch::cli
