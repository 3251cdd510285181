// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/check_command.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <stdlib.h>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/checkers/registry.h"
#include "isowatch/cli/command.h"
#include "isowatch/cli/read_flags.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/config/units.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/monitor/live_checker.h"
#include "isowatch/report/check_report.h"
#include "isowatch/sim/delivery.h"
#include "isowatch/windows/window_cutter.h"

namespace isowatch::cli {
namespace {

using verdict::IsolationLevel;

// Adds `r`, what a plug-in made of one history or window in `seconds`, to its
// outcome.
void AddResult(const checkers::CheckerResult& r, double seconds, report::CheckerOutcome& c) {
  c.complete = c.complete && r.complete;
  if (c.undecided.empty()) c.undecided = r.undecided;
  c.seconds += seconds;
  c.violations += r.violations.size();
  c.transactions_checked += r.transactions_checked;
  c.transactions_skipped += r.transactions_skipped;
  c.findings_out_of_scope += r.findings_out_of_scope;
  ++c.windows;
  if (!r.complete) ++c.incomplete_windows;
  for (const auto& [name, value] : r.stats) {
    auto it = std::find_if(c.stats.begin(), c.stats.end(),
                           [&name = name](const auto& s) { return s.first == name; });
    if (it == c.stats.end()) {
      c.stats.emplace_back(name, value);
    } else {
      it->second += value;
    }
  }
}

// Maps a window's transaction and key ids to the checked file's, by source id
// and key.
class FileIds {
 public:
  explicit FileIds(const history::History& h) : h_(h) {
    for (uint64_t i = 0; i < h.size(); ++i) txns_.emplace(h.txn_name(TxnId(i)), TxnId(i));
  }

  // Rewrites `v`, found in window history `w`, in the file's ids.
  void Translate(const history::History& w, verdict::Violation& v) const {
    for (TxnId& t : v.txns) {
      auto it = txns_.find(w.txn_name(t));
      if (it != txns_.end()) t = it->second;
    }
    if (!v.key.valid()) return;
    const history::KeyInfo& key = w.key(v.key);
    v.key = key.is_int ? h_.FindIntKey(key.payload)
                       : h_.FindBytesKey(w.bytes(static_cast<uint32_t>(key.payload)));
  }

 private:
  const history::History& h_;
  std::unordered_map<std::string_view, TxnId> txns_;
};

checkers::CheckLimits LimitsFor(int64_t time_limit_ms) {
  if (time_limit_ms <= 0) return checkers::CheckLimits();
  return checkers::CheckLimits(checkers::CheckLimits::Clock::now() +
                               std::chrono::milliseconds(time_limit_ms));
}

// The plug-ins that judge `level` on some history, for a message that names them.
std::string PluginsJudging(IsolationLevel level) {
  std::vector<std::string_view> names;
  for (const checkers::CheckerInfo& info : checkers::RegisteredCheckers()) {
    if (std::find(info.levels.begin(), info.levels.end(), level) != info.levels.end() &&
        !info.requirements.commit_timestamps) {
      names.emplace_back(info.name);
    }
  }
  return fmt::format("{}", fmt::join(names, " or "));
}

// Keeps `h` until the process exits, without freeing it. A large list history holds a vector
// per key; freeing them one by one took about 0.08 s after the 1M list-append check had printed
// its report, where the kernel drops the process's memory whole at exit anyway. Held from a
// static, so that it stays reachable and leak checkers do not report it.
void KeepUntilExit(history::History&& h) {
  static auto* const kKept = new std::vector<history::History>();
  kKept->push_back(std::move(h));
}

}  // namespace

CLI::App* CheckCommand::Register(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("check", "Check a history file for isolation violations");
  cmd->add_option("FILE", file_, "History file")->required();
  level_option_ = cmd->add_option("--level", level_,
                                  "Isolation level to check: si, ser, rc, rr, ra or tcc "
                                  "(default si). Without --checker, chronos judges si and ser "
                                  "on histories with commit timestamps, and otherwise the first "
                                  "plug-in that judges the level on the history is picked; with "
                                  "--checker, every plug-in is restricted to it (default: each "
                                  "its own levels)")
                      ->check(CLI::IsMember({"si", "ser", "rc", "rr", "ra", "tcc"}));
  read_.Register(*cmd);
  cmd->add_flag("--json", json_, "Print one JSON object instead of the human report");
  cmd->add_option("--max-detailed", max_detailed_,
                  "Violations shown in full in the human report (0 = all)");
  cmd->add_flag("--online", online_,
                "Check with the online engine, delivering the history with "
                "simulated delays");
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
                  "Online: keep versions this far below the final point "
                  "(timestamp units), "
                  "for transactions longer than any seen before them")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--memory-budget", memory_budget_,
                  "Online: engine memory above which collected versions move to a spill on "
                  "disk, e.g. 256MiB (default: no budget)");
  cmd->add_flag("--spill-collected", spill_collected_,
                "Online: spill every collected version, so that transactions "
                "of any length are "
                "checked exactly (no horizon misses)");
  cmd->add_option("--spill-retention", spill_retention_,
                  "Online: keep spilled versions this far below the final "
                  "point (timestamp "
                  "units) and drop older ones (default 0: keep them all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--spill-dir", spill_dir_,
                  "Online: directory of the spill (cleared first; default: a "
                  "temporary one)");
  CLI::Option* checker =
      cmd->add_option("--checker", checker_list_,
                      "Check with these plug-in checkers, e.g. adya,chronos (list them with "
                      "`isowatch checkers`); exit 3 if none found a violation but one ran out "
                      "of time");
  checker->excludes("--online");
  cmd->add_option("--checker-option", checker_options_,
                  "A plug-in's option, NAME.OPTION=VALUE (repeatable), e.g. "
                  "adya.levels=si,ser")
      ->needs(checker);
  cmd->add_option("--time-limit-ms", time_limit_ms_,
                  "Time each plug-in may spend on the history (default: none); "
                  "out of time, its "
                  "verdict is UNKNOWN")
      ->check(CLI::PositiveNumber)
      ->needs(checker);
  CLI::Option* window = cmd->add_option("--window", window_,
                                        "Cut the history into windows of this many transactions, "
                                        "in commit order, "
                                        "and run the plug-ins on each (docs/windows.md)")
                            ->check(CLI::PositiveNumber)
                            ->needs(checker);
  cmd->add_option("--window-overlap", window_overlap_,
                  "Lead-in: each window also carries up to this many of the "
                  "previous window's "
                  "transactions")
      ->needs(window);
  return cmd;
}

int CheckCommand::Run() {
  auto read_options = read_.Options();
  if (!read_options.ok()) {
    std::cerr << "isowatch check: " << read_options.status().message() << "\n";
    return kExitBadInput;
  }
  const formats::ReadOptions& options = *read_options;
  auto level = verdict::ParseIsolationLevel(level_);
  bool plugins = !checker_list_.empty();
  const bool timestamp_level =
      *level == IsolationLevel::kSnapshotIsolation || *level == IsolationLevel::kSerializable;
  if (!plugins && online_ && !timestamp_level) {
    std::cerr << fmt::format(
        "isowatch check: --level {} is judged by the plug-ins only: add "
        "--checker {}\n",
        level_, PluginsJudging(*level));
    return kExitBadInput;
  }

  auto t0 = std::chrono::steady_clock::now();
  formats::FileFormat used = formats::FileFormat::kAuto;
  auto h = formats::ReadHistoryFile(file_, read_.format(), options, &used);
  if (!h.ok()) {
    std::cerr << "isowatch check: " << h.status().message() << "\n";
    return kExitBadInput;
  }
  auto t1 = std::chrono::steady_clock::now();
  report::CheckReport rep;
  rep.source = file_;
  rep.format = h->info().format.empty() ? formats::FileFormatName(used) : h->info().format;
  rep.level = *level;
  // Chronos and the online engine order transactions by commit timestamp; a
  // history without them goes to the plug-ins that judge it without
  // (docs/checkers/plugins.md).
  const bool without_timestamps = h->size() > 0 && !h->has_commit_timestamps();
  if (online_ && without_timestamps) {
    std::cerr << fmt::format(
        "isowatch check: {} ({}) has no commit timestamps, and the online "
        "engine orders "
        "transactions by them; check it without --online\n",
        file_, rep.format);
    return kExitBadInput;
  }
  if (!plugins && !online_ && (without_timestamps || !timestamp_level)) {
    // The first plug-in that judges the level on this history (docs/checkers/plugins.md,
    // "Which checker judges what").
    const checkers::HistoryShape shape = checkers::HistoryShape::Of(*h);
    const std::vector<const checkers::CheckerInfo*> fit = checkers::CheckersFor(*level, shape);
    if (fit.empty()) {
      std::cerr << fmt::format(
          "isowatch check: no checker judges {} on {} ({}); `isowatch checkers` lists what each "
          "judges\n",
          level_, file_, shape.Describe());
      return kExitBadInput;
    }
    const std::string_view picked = fit.front()->name;
    checker_list_ = std::string(picked);
    force_level_ = true;
    plugins = true;
    rep.picked = without_timestamps
                     ? fmt::format(
                           "{} at {}, since the history has no commit timestamps, which chronos "
                           "needs (chronos skipped)",
                           picked, level_)
                     : fmt::format("{}, since chronos does not judge {}", picked, level_);
  }
  if (plugins) {
    if (absl::Status status = RunCheckers(*h, rep); !status.ok()) {
      std::cerr << "isowatch check: " << status.message() << "\n";
      return kExitBadInput;
    }
  } else if (online_) {
    const sim::DeliveryOptions delivery{.mean_ms = mean_ms_,
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
    // A spill when a budget or spilling everything asks for one, in a directory
    // of its own.
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
    const sim::DeliverySchedule schedule = sim::BuildDeliverySchedule(*h, delivery);
    sim::OnlineResult result = sim::RunOnline(*h, schedule,
                                              {.engine = {.level = *level,
                                                          .finality_timeout_ms = timeout_ms_,
                                                          .retention = retention_,
                                                          .spill = spill.get(),
                                                          .spill_collected = spill_collected_,
                                                          .memory_budget = budget,
                                                          .spill_retention = spill_retention_}});
    if (spill != nullptr) {
      std::cerr << fmt::format(
          "isowatch check: spill: {} versions written, {} pruned, {} reloads, "
          "{} keys evicted, "
          "{} restored, engine memory at most {} bytes\n",
          result.stats.spilled_versions, result.stats.spill_pruned, result.stats.reloads,
          result.stats.evicted_keys, result.stats.restored_keys, result.max_memory_bytes);
      spill.reset();
      if (!temp_dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(temp_dir, ec);
      }
    }
    verdict::SortViolations(result.violations);
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
  KeepUntilExit(*std::move(h));
  if (!rep.violations.empty()) return kExitViolations;
  return rep.complete() ? kExitValid : kExitUnknown;
}

absl::StatusOr<std::vector<std::unique_ptr<checkers::Checker>>> CheckCommand::CreateCheckers()
    const {
  ASSIGN_OR_RETURN(std::vector<std::string> names, checkers::ParseCheckerList(checker_list_));
  std::map<std::string, checkers::CheckerOptions, std::less<>> options;
  for (const std::string& text : checker_options_) {
    const size_t dot = text.find('.');
    const size_t eq = text.find('=');
    if (dot == std::string::npos || eq == std::string::npos || dot > eq) {
      return absl::InvalidArgumentError(
          fmt::format("--checker-option '{}': expected NAME.OPTION=VALUE", text));
    }
    std::string name = text.substr(0, dot);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(fmt::format(
          "--checker-option '{}': {} is not among --checker {}", text, name, checker_list_));
    }
    if (!options[name].emplace(text.substr(dot + 1, eq - dot - 1), text.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(
          fmt::format("--checker-option '{}': that option is given twice", text));
    }
  }
  if (level_option_->count() > 0 || force_level_) {
    const IsolationLevel level = *verdict::ParseIsolationLevel(level_);
    for (const std::string& name : names) {
      const checkers::CheckerInfo& info = *checkers::FindChecker(name);
      if (std::find(info.levels.begin(), info.levels.end(), level) == info.levels.end()) {
        return absl::InvalidArgumentError(
            fmt::format("--level {}: the {} checker cannot judge it", level_, name));
      }
      if (!options[name].emplace("levels", level_).second) {
        return absl::InvalidArgumentError(
            fmt::format("--level and --checker-option {}.levels: give one of them", name));
      }
    }
  }
  std::vector<std::unique_ptr<checkers::Checker>> out;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(std::unique_ptr<checkers::Checker> checker,
                     checkers::CreateChecker(name, options[name]));
    out.push_back(std::move(checker));
  }
  return out;
}

absl::Status CheckCommand::RunCheckers(const history::History& h, report::CheckReport& rep) const {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<checkers::Checker>> plugins, CreateCheckers());
  if (level_option_->count() == 0 && !force_level_) rep.level.reset();
  std::vector<std::string_view> names;
  names.reserve(plugins.size());
  for (const auto& checker : plugins) names.push_back(checker->name());
  rep.checker = fmt::format("{}", fmt::join(names, ","));
  for (const auto& checker : plugins) {
    report::CheckerOutcome& outcome = rep.checkers.emplace_back();
    outcome.name = std::string(checker->name());
    outcome.levels = checker->levels();
    // A checker that needs what the history lacks says so and is skipped.
    if (checkers::FindChecker(checker->name())->requirements.commit_timestamps && h.size() > 0 &&
        !h.has_commit_timestamps()) {
      outcome.complete = false;
      outcome.skipped =
          "it orders transactions by commit timestamp, and the "
          "history has none";
    }
  }
  FileIds ids(h);
  std::set<std::string> reported;
  // Runs every plug-in on `part` (a window with `scope`, or the whole history)
  // and adds what they find to the report.
  auto check = [&](const history::History& part, const checkers::WindowScope* scope,
                   bool defective = false) {
    for (size_t i = 0; i < plugins.size(); ++i) {
      if (!rep.checkers[i].skipped.empty()) continue;
      const auto start = std::chrono::steady_clock::now();
      checkers::CheckerResult r;
      if (defective) {
        r.complete = false;  // a window the cutter could not build: UNKNOWN
      } else {
        r = plugins[i]->Check(part, scope, LimitsFor(time_limit_ms_));
      }
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      AddResult(r, took.count(), rep.checkers[i]);
      for (verdict::Violation& v : r.violations) {
        if (scope != nullptr) {
          // The same finding in two overlapping windows is reported once, as
          // the daemon stores it once: by its stable id.
          if (!reported.insert(monitor::StableViolationId(part, v)).second) {
            --rep.checkers[i].violations;
            continue;
          }
          ids.Translate(part, v);
        }
        rep.violations.push_back(std::move(v));
      }
    }
  };
  if (window_ == 0) {
    check(h, nullptr);
  } else {
    // The transactions in placement order (commit, else start, else after the
    // one before them in the file), sealing behind each new timestamp: each
    // window is checked, and dropped, as soon as it is cut, so memory holds
    // about one window at a time.
    std::vector<std::pair<history::Timestamp, uint32_t>> order;
    order.reserve(h.size());
    history::Timestamp running = history::Timestamp::Min();
    for (uint32_t i = 0; i < h.size(); ++i) {
      const history::Transaction& t = h.txn(TxnId(i));
      const history::Timestamp key = t.has_commit ? t.commit : t.has_start ? t.start : running;
      running = std::max(running, key);
      order.emplace_back(key, i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    windows::WindowCutter cutter(
        {.transactions = window_, .overlap = static_cast<int64_t>(window_overlap_)});
    for (size_t j = 0; j < order.size(); ++j) {
      cutter.Add(h, TxnId(order[j].second));
      if (j + 1 < order.size() && order[j + 1].first == order[j].first) continue;
      for (const windows::Window& w : cutter.Seal(h, order[j].first)) {
        check(w.history, &w.scope, !w.defect.empty());
      }
    }
    for (const windows::Window& w : cutter.Flush(h)) check(w.history, &w.scope, !w.defect.empty());
    rep.window_transactions = window_;
    rep.window_overlap = window_overlap_;
  }
  for (const report::CheckerOutcome& c : rep.checkers) {
    rep.transactions_checked = std::max(rep.transactions_checked, c.transactions_checked);
  }
  rep.transactions_skipped = h.size() - std::min(h.size(), rep.transactions_checked);
  return absl::OkStatus();
}

}  // namespace isowatch::cli
