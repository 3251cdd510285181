// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/gen_command.h"

#include <fstream>
#include <iostream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/cli/command.h"
#include "isowatch/formats/byte_values.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/history/without_timestamps.h"

namespace isowatch::cli {

GenCommand::GenCommand() : sim_(sim::WorkloadOptions{}) {}

CLI::App* GenCommand::Register(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("gen", "Generate a history with the built-in simulator");
  cmd->add_option("--out", out_, "History file to write")->required();
  const std::vector<std::string> writable = formats::FormatNames(/*writable_only=*/true);
  cmd->add_option("--format", format_,
                  fmt::format("Output format: {} (default timekiller)", fmt::join(writable, ", ")))
      ->check(CLI::IsMember(writable));
  cmd->add_option("--truth", truth_, "Ground-truth file (default: OUT.truth.json)");
  cmd->add_option("--values", values_,
                  "Values as integers (int) or as the byte strings \"v<integer>\" (bytes)")
      ->check(CLI::IsMember({"int", "bytes"}));
  cmd->add_flag("--drop-timestamps", drop_timestamps_,
                "Write the history without its timestamps, as a black-box history (needed by "
                "text, cobra, dbcop and viper)");
  sim_.Register(*cmd);
  return cmd;
}

int GenCommand::Run() {
  auto options = sim_.Options();
  if (!options.ok()) {
    std::cerr << "isowatch gen: " << options.status().message() << "\n";
    return kExitBadInput;
  }
  auto result = sim::Simulate(*options);
  if (!result.ok()) {
    std::cerr << "isowatch gen: " << result.status().message() << "\n";
    return kExitBadInput;
  }
  if (values_ == "bytes") {
    absl::StatusOr<history::History> converted = formats::WithByteValues(result->history);
    if (!converted.ok()) {
      std::cerr << "isowatch gen: " << converted.status().message() << "\n";
      return kExitInternalError;
    }
    result->history = *std::move(converted);
  }
  if (drop_timestamps_) {
    absl::StatusOr<history::History> bare = history::WithoutTimestamps(result->history);
    if (!bare.ok()) {
      std::cerr << "isowatch gen: " << bare.status().message() << "\n";
      return kExitInternalError;
    }
    result->history = *std::move(bare);
  }
  if (auto st =
          formats::WriteHistoryFile(result->history, out_, *formats::ParseFileFormat(format_));
      !st.ok()) {
    std::cerr << "isowatch gen: " << st.message() << "\n";
    return kExitBadInput;
  }
  std::string truth = truth_.empty() ? out_ + ".truth.json" : truth_;
  std::ofstream out(truth, std::ios::trunc);
  sim::WriteGroundTruth(*result, options->level, out);
  out.close();
  if (!out) {
    std::cerr << fmt::format("isowatch gen: {}: write failed\n", truth);
    return kExitBadInput;
  }
  std::cout << fmt::format(
      "wrote {} ({} committed, {} aborted transactions) and {} ({} expected "
      "violations)\n",
      out_, result->committed, result->aborted, truth, result->expected.size());
  return kExitValid;
}

}  // namespace isowatch::cli
