// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/check_command.h"

#include <charconv>
#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/cli/command.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/report/check_report.h"

namespace isowatch::cli {

CLI::App* CheckCommand::Register(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("check", "Check a history file for isolation violations");
  cmd->add_option("FILE", file_, "History file")->required();
  cmd->add_option("--level", level_, "Isolation level to check: si or ser")
      ->check(CLI::IsMember({"si", "ser"}));
  cmd->add_option("--format", format_, "File format: auto, timekiller, native")
      ->check(CLI::IsMember({"auto", "timekiller", "native", "native-json"}));
  cmd->add_option("--initial-value", initial_value_,
                  "Value of every key before the first write: null or an integer");
  cmd->add_option("--initial-txn", initial_txn_, "TimeKiller initial-transaction file");
  cmd->add_flag("--json", json_, "Print one JSON object instead of the human report");
  cmd->add_option("--max-detailed", max_detailed_,
                  "Violations shown in full in the human report (0 = all)");
  return cmd;
}

int CheckCommand::Run() {
  formats::ReadOptions options;
  if (initial_value_ != "null") {
    int64_t v = 0;
    auto [ptr, ec] =
        std::from_chars(initial_value_.data(), initial_value_.data() + initial_value_.size(), v);
    if (ec != std::errc() || ptr != initial_value_.data() + initial_value_.size()) {
      std::cerr << fmt::format(
          "isowatch check: --initial-value must be null or an integer, not {}\n", initial_value_);
      return kExitBadInput;
    }
    options.initial_value = v;
  }
  options.initial_txn_path = initial_txn_;
  auto format = formats::ParseFileFormat(format_);
  auto level = report::ParseIsolationLevel(level_);

  auto t0 = std::chrono::steady_clock::now();
  formats::FileFormat used = formats::FileFormat::kAuto;
  auto h = formats::ReadHistoryFile(file_, *format, options, &used);
  if (!h.ok()) {
    std::cerr << "isowatch check: " << h.status().message() << "\n";
    return kExitBadInput;
  }
  auto t1 = std::chrono::steady_clock::now();
  checkers::ChronosResult result = checkers::RunChronos(*h, {.level = *level});
  auto t2 = std::chrono::steady_clock::now();

  report::CheckReport rep;
  rep.source = file_;
  rep.format = used == formats::FileFormat::kTimeKiller ? "timekiller" : "native";
  rep.level = *level;
  rep.transactions_checked = result.stats.transactions_checked;
  rep.transactions_skipped = result.stats.transactions_skipped;
  rep.violations = std::move(result.violations);
  rep.read_seconds = std::chrono::duration<double>(t1 - t0).count();
  rep.check_seconds = std::chrono::duration<double>(t2 - t1).count();
  if (json_) {
    report::WriteJsonReport(*h, rep, std::cout);
  } else {
    report::WriteTextReport(*h, rep, std::cout, max_detailed_);
  }
  std::cout.flush();
  return rep.valid() ? kExitValid : kExitViolations;
}

}  // namespace isowatch::cli
