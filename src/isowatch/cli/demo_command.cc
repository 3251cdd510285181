// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/demo_command.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>
#include <string>

#include <fmt/format.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/cli/command.h"
#include "isowatch/report/check_report.h"

namespace isowatch::cli {
namespace {

sim::WorkloadOptions DemoDefaults() {
  sim::WorkloadOptions o;
  o.sessions = 24;
  o.txns = 20000;
  o.keys = 1000;
  o.seed = 2026;
  o.count_committed = true;
  return o;
}

// A violation as "EXT/before 12,7 k=3"; the NOCONFLICT pair in a canonical order.
std::string Canonical(std::string anomaly, report::ExtKind kind, std::vector<std::string> txns,
                      std::string key) {
  if (anomaly == "NOCONFLICT") std::sort(txns.begin(), txns.end());
  std::string out = anomaly;
  if (kind != report::ExtKind::kNone) out += fmt::format("/{}", report::ExtKindName(kind));
  out += " " + fmt::format("{}", fmt::join(txns, ","));
  if (!key.empty()) out += " k=" + key;
  return out;
}

}  // namespace

DemoCommand::DemoCommand() : sim_(DemoDefaults()) {}

CLI::App* DemoCommand::Register(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "demo", "Simulate a database with faults switched on part-way, check it, print the report");
  sim_.Register(*cmd);
  cmd->add_option("--max-detailed", max_detailed_, "Violations shown in full");
  return cmd;
}

int DemoCommand::Run() {
  auto options = sim_.Options();
  if (!options.ok()) {
    std::cerr << "isowatch demo: " << options.status().message() << "\n";
    return kExitBadInput;
  }
  if (options->faults.empty()) {
    // Halfway through, the simulated database starts losing updates, serving stale snapshots
    // and breaking session order.
    uint64_t half = options->txns / 2;
    options->faults = {{sim::Fault::kLostUpdate, 0.002, half},
                       {sim::Fault::kStaleSnapshot, 0.002, half},
                       {sim::Fault::kSessionOrder, 0.001, half}};
  }
  std::cout << fmt::format(
      "isowatch demo: simulating {} transactions ({} sessions, {} keys, {} ops each) on a store "
      "that provides {}\n",
      options->txns, options->sessions, options->keys, options->ops_per_txn,
      report::IsolationLevelName(options->level));
  for (const auto& f : options->faults) {
    std::cout << fmt::format("  fault {} at rate {} from the {}th transaction begun on\n",
                             sim::FaultName(f.fault), f.rate, f.from_txn);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto result = sim::Simulate(*options);
  if (!result.ok()) {
    std::cerr << "isowatch demo: " << result.status().message() << "\n";
    return kExitBadInput;
  }
  auto t1 = std::chrono::steady_clock::now();
  const history::History& h = result->history;
  checkers::ChronosResult checked = checkers::RunChronos(h, {.level = options->level});
  auto t2 = std::chrono::steady_clock::now();
  std::cout << fmt::format("  {} committed, {} aborted; simulated in {:.2f} s\n\n",
                           result->committed, result->aborted,
                           std::chrono::duration<double>(t1 - t0).count());

  std::set<std::string> found;
  for (const auto& v : checked.violations) {
    std::vector<std::string> ids;
    for (TxnId id : v.txns) ids.emplace_back(h.txn_name(id));
    found.insert(Canonical(report::AnomalyName(v.anomaly), v.ext_kind, std::move(ids),
                           v.key.valid() ? h.KeyToString(v.key) : ""));
  }
  std::set<std::string> expected;
  for (const auto& e : result->expected) {
    expected.insert(Canonical(report::AnomalyName(e.anomaly), e.ext_kind, e.txns,
                              e.key ? fmt::format("{}", *e.key) : ""));
  }

  report::CheckReport rep;
  rep.source = "simulated history";
  rep.format = "simulator";
  rep.level = options->level;
  rep.transactions_checked = checked.stats.transactions_checked;
  rep.transactions_skipped = checked.stats.transactions_skipped;
  rep.violations = std::move(checked.violations);
  // Show one violation of each kind first, so the detailed part covers every fault.
  std::set<std::pair<report::Anomaly, report::ExtKind>> seen;
  std::stable_partition(rep.violations.begin(), rep.violations.end(),
                        [&seen](const report::Violation& v) {
                          return seen.insert({v.anomaly, v.ext_kind}).second;
                        });
  rep.read_seconds = 0;
  rep.check_seconds = std::chrono::duration<double>(t2 - t1).count();
  report::WriteTextReport(h, rep, std::cout, max_detailed_);

  size_t missed = 0;
  for (const auto& e : expected) missed += found.count(e) == 0 ? 1 : 0;
  size_t unexpected = 0;
  for (const auto& f : found) unexpected += expected.count(f) == 0 ? 1 : 0;
  std::cout << fmt::format(
      "ground truth: {} violations injected, {} reported, {} missed, {} unexpected: {}\n",
      expected.size(), found.size(), missed, unexpected,
      missed == 0 && unexpected == 0 ? "every injected fault found, no false alarm" : "MISMATCH");
  return missed == 0 && unexpected == 0 ? kExitValid : kExitViolations;
}

}  // namespace isowatch::cli
