// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/check_command.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdlib.h>
#include <system_error>

#include <fmt/format.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/cli/command.h"
#include "isowatch/cli/read_flags.h"
#include "isowatch/config/units.h"
#include "isowatch/engine/delivery.h"
#include "isowatch/engine/version_spill.h"
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
  cmd->add_flag("--online", online_,
                "Check with the online engine, delivering the history with simulated delays");
  cmd->add_option("--mean-ms", mean_ms_, "Online: mean delay of a transaction, ms")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--sigma-ms", sigma_ms_, "Online: standard deviation of the delay, ms")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch", batch_, "Online: transactions per delivered batch")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", seed_, "Online: seed of the delays");
  cmd->add_option("--rate", rate_tps_, "Online: collection rate, transactions per second")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-watermarks", no_watermarks_,
                "Online: send no watermarks; verdicts become final by timeout");
  cmd->add_option("--timeout-ms", timeout_ms_,
                  "Online: finality timeout of streams without watermarks, ms")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--retention", retention_,
                  "Online: keep versions this far below the final point (timestamp units), "
                  "for transactions longer than any seen before them")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--memory-budget", memory_budget_,
                  "Online: engine memory above which collected versions move to a spill on "
                  "disk, e.g. 256MiB (default: no budget)");
  cmd->add_flag("--spill-collected", spill_collected_,
                "Online: spill every collected version, so that transactions of any length are "
                "checked exactly (no horizon misses)");
  cmd->add_option("--spill-dir", spill_dir_,
                  "Online: directory of the spill (cleared first; default: a temporary one)");
  return cmd;
}

int CheckCommand::Run() {
  auto read_options = ParseReadFlags(initial_value_, initial_txn_);
  if (!read_options.ok()) {
    std::cerr << "isowatch check: " << read_options.status().message() << "\n";
    return kExitBadInput;
  }
  const formats::ReadOptions& options = *read_options;
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
  report::CheckReport rep;
  rep.source = file_;
  rep.format = used == formats::FileFormat::kTimeKiller ? "timekiller" : "native";
  rep.level = *level;
  if (online_) {
    const engine::DeliveryOptions delivery{.mean_ms = mean_ms_,
                                           .sigma_ms = sigma_ms_,
                                           .batch = batch_,
                                           .seed = seed_,
                                           .rate_tps = rate_tps_,
                                           .watermarks = !no_watermarks_};
    uint64_t budget = 0;
    if (!memory_budget_.empty()) {
      auto parsed = config::ParseByteSize(memory_budget_);
      if (!parsed.ok()) {
        std::cerr << "isowatch check: --memory-budget: " << parsed.status().message() << "\n";
        return kExitBadInput;
      }
      budget = *parsed;
    }
    // A spill when a budget or spilling everything asks for one, in a directory of its own.
    std::unique_ptr<engine::RocksVersionSpill> spill;
    std::string temp_dir;
    if (budget > 0 || spill_collected_) {
      std::string dir = spill_dir_;
      if (dir.empty()) {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "isowatch-spill-XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) {
          std::cerr << "isowatch check: cannot create a temporary spill directory\n";
          return kExitBadInput;
        }
        dir = temp_dir = pattern;
      }
      auto opened = engine::RocksVersionSpill::Open(dir);
      if (!opened.ok()) {
        std::cerr << "isowatch check: " << opened.status().message() << "\n";
        return kExitBadInput;
      }
      spill = *std::move(opened);
    }
    const engine::DeliverySchedule schedule = engine::BuildDeliverySchedule(*h, delivery);
    engine::OnlineResult result = engine::RunOnline(*h, *level, schedule,
                                                    {.finality_timeout_ms = timeout_ms_,
                                                     .retention = retention_,
                                                     .spill = spill.get(),
                                                     .spill_collected = spill_collected_,
                                                     .memory_budget = budget});
    if (spill != nullptr) {
      std::cerr << fmt::format(
          "isowatch check: spill: {} versions written, {} reloads, engine memory at most {} "
          "bytes\n",
          result.stats.spilled_versions, result.stats.reloads, result.max_memory_bytes);
      spill.reset();
      if (!temp_dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(temp_dir, ec);
      }
    }
    engine::SortViolations(result.violations);
    rep.checker = "online";
    rep.transactions_checked = result.stats.checked;
    rep.transactions_skipped = h->size() - std::min<size_t>(h->size(), result.stats.checked);
    rep.violations = std::move(result.violations);
    rep.online = report::OnlineCounts{.mean_ms = mean_ms_,
                                      .sigma_ms = sigma_ms_,
                                      .batch = batch_,
                                      .seed = seed_,
                                      .rate_tps = rate_tps_,
                                      .watermarks = !no_watermarks_,
                                      .timeout_ms = timeout_ms_,
                                      .retention = retention_,
                                      .batches = result.batches,
                                      .max_disorder_ms = schedule.max_disorder_ms,
                                      .flip_flops = result.stats.flip_flops,
                                      .late_arrivals = result.stats.late_arrivals,
                                      .duplicates = result.stats.duplicates,
                                      .horizon_misses = result.stats.horizon_misses,
                                      .repeated_reports = result.repeated_reports,
                                      .max_provisional_reads = result.max_provisional_reads,
                                      .max_retained_versions = result.max_retained_versions,
                                      .max_retained_txns = result.max_retained_txns};
  } else {
    checkers::ChronosResult result = checkers::RunChronos(*h, {.level = *level});
    rep.transactions_checked = result.stats.transactions_checked;
    rep.transactions_skipped = result.stats.transactions_skipped;
    rep.violations = std::move(result.violations);
  }
  auto t2 = std::chrono::steady_clock::now();
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
