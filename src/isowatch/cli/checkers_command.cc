// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/checkers_command.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "isowatch/checkers/registry.h"
#include "isowatch/cli/command.h"

namespace isowatch::cli {
namespace {

std::string Levels(const std::vector<verdict::IsolationLevel>& levels, std::string_view sep) {
  std::vector<std::string_view> names;
  names.reserve(levels.size());
  for (verdict::IsolationLevel level : levels) names.emplace_back(IsolationLevelName(level));
  return fmt::format("{}", fmt::join(names, sep));
}

std::string Requires(const checkers::Requirements& r) {
  std::vector<std::string_view> parts;
  if (r.commit_timestamps)
    parts.emplace_back("commit timestamps (transactions without are skipped)");
  if (r.start_snapshots)
    parts.emplace_back("start timestamps for si (reads judged against start snapshots)");
  if (r.registers && r.lists) {
    parts.emplace_back("registers and lists");
  } else if (r.registers) {
    parts.emplace_back("registers only");
  } else if (r.lists) {
    parts.emplace_back("lists only");
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Which plug-ins judge each level on each shape of history, the one picked first.
void PrintMatrix() {
  using verdict::IsolationLevel;
  const checkers::HistoryShape shapes[] = {
      {.commit_timestamps = true, .registers = true},
      {.commit_timestamps = false, .registers = true},
      {.commit_timestamps = true, .lists = true},
      {.commit_timestamps = false, .lists = true},
  };
  const IsolationLevel levels[] = {
      IsolationLevel::kReadCommitted,     IsolationLevel::kRepeatableRead,
      IsolationLevel::kReadAtomic,        IsolationLevel::kCausal,
      IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable};
  std::cout << "Which checker judges which level, by the shape of the history (without --checker, "
               "`isowatch check` runs the first one named):\n";
  // The table's cells, its header first, and each column as wide as its widest cell.
  std::vector<std::vector<std::string>> rows = {
      {"level", "registers, timestamps", "registers, none", "lists, timestamps", "lists, none"}};
  for (IsolationLevel level : levels) {
    std::vector<std::string>& row = rows.emplace_back();
    row.emplace_back(verdict::IsolationLevelName(level));
    for (const checkers::HistoryShape& shape : shapes) {
      std::vector<std::string_view> names;
      for (const checkers::CheckerInfo* info : checkers::CheckersFor(level, shape)) {
        names.emplace_back(info->name);
      }
      row.push_back(names.empty() ? "-" : fmt::format("{}", fmt::join(names, ", ")));
    }
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 < row.size() ? fmt::format(" {:<{}} ", row[i], width[i]) : " " + row[i];
    }
    std::cout << line << "\n";
  }
  std::cout << "\n";
}

}  // namespace

CLI::App* CheckersCommand::Register(CLI::App& app) {
  return app.add_subcommand(
      "checkers",
      "List the plug-in checkers for `check --checker`: which judges which level on which "
      "history, their requirements and options");
}

int CheckersCommand::Run() {
  PrintMatrix();
  for (const checkers::CheckerInfo& info : checkers::RegisteredCheckers()) {
    std::cout << fmt::format("{}\n  {}\n  levels:   {}\n  requires: {}\n  options:\n", info.name,
                             info.help, Levels(info.levels, ", "), Requires(info.requirements));
    std::cout << fmt::format("    {}.levels=LEVEL,...  (default {}) the levels to judge\n",
                             info.name, Levels(info.levels, ","));
    for (const checkers::OptionSpec& o : info.options) {
      std::cout << fmt::format("    {}.{}={}  (default {}) {}\n", info.name, o.name, o.type,
                               o.default_value, o.help);
    }
    std::cout << "\n";
  }
  std::cout << "Use: isowatch check FILE --checker NAME[,NAME...] [--checker-option "
               "NAME.OPTION=VALUE]... [--level LEVEL] [--time-limit-ms MS]\n";
  return kExitValid;
}

}  // namespace isowatch::cli
