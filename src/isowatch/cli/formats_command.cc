// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/formats_command.h"

#include <iostream>
#include <vector>

#include <fmt/format.h>

#include "isowatch/cli/command.h"
#include "isowatch/common/string_view.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/history/without_timestamps.h"

namespace isowatch::cli {

CLI::App* FormatsCommand::Register(CLI::App& app) {
  return app.add_subcommand("formats", "List the history formats isowatch reads and writes");
}

int FormatsCommand::Run() {
  for (const formats::FormatDescription& d : formats::Formats()) {
    std::cout << fmt::format("{:<12} {}\n{:<12} input: {}; carries: {}; {}\n", d.name, d.summary,
                             "", d.directory ? "a directory" : "a file", d.carries,
                             d.writable ? "read and written" : "read only");
  }
  std::cout << "--format auto (the default) decides from the content; docs/history-format.md "
               "describes each format\n";
  return kExitValid;
}

CLI::App* ConvertCommand::Register(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("convert", "Read a history and write it in another format");
  cmd->add_option("IN", in_, "History to read (a file, or a directory for directory formats)")
      ->required();
  cmd->add_option("OUT", out_, "Where to write it")->required();
  const std::vector<std::string> writable = formats::FormatNames(/*writable_only=*/true);
  cmd->add_option("--to", to_, fmt::format("Format to write: {}", fmt::join(writable, ", ")))
      ->required()
      ->check(CLI::IsMember(writable));
  cmd->add_flag("--drop-timestamps", drop_timestamps_,
                "Leave out start and commit timestamps, xids and snapshots, for formats that "
                "cannot say them (text, cobra, dbcop, viper)");
  read_.Register(*cmd);
  return cmd;
}

int ConvertCommand::Run() {
  auto options = read_.Options();
  if (!options.ok()) {
    std::cerr << "isowatch convert: " << options.status().message() << "\n";
    return kExitBadInput;
  }
  formats::FileFormat used = formats::FileFormat::kAuto;
  auto h = formats::ReadHistoryFile(in_, read_.format(), *options, &used);
  if (!h.ok()) {
    std::cerr << "isowatch convert: " << h.status().message() << "\n";
    return kExitBadInput;
  }
  if (drop_timestamps_) {
    h = history::WithoutTimestamps(*h);
    if (!h.ok()) {
      std::cerr << "isowatch convert: " << h.status().message() << "\n";
      return kExitBadInput;
    }
  }
  const formats::FileFormat to = *formats::ParseFileFormat(to_);
  if (absl::Status st = formats::WriteHistoryFile(*h, out_, to); !st.ok()) {
    std::cerr << fmt::format("isowatch convert: {} as {}: {}\n", out_, to_,
                             common::StdView(st.message()));
    return kExitBadInput;
  }
  std::cout << fmt::format("{} ({}): {} transactions written to {} ({})\n", in_,
                           formats::FileFormatName(used), h->size(), out_, to_);
  for (const history::SourceNote& note : h->info().notes) {
    std::cout << fmt::format("note: {} {}, e.g. {}\n", note.count, note.kind, note.example);
  }
  return kExitValid;
}

}  // namespace isowatch::cli
