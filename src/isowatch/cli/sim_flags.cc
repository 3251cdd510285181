// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/sim_flags.h"

#include <charconv>

#include <fmt/format.h>

namespace isowatch::cli {

void SimFlags::Register(CLI::App& cmd) {
  cmd.add_option("--sessions", options_.sessions, "Concurrent sessions");
  cmd.add_option("--txns", options_.txns, "Transactions in total (see --committed)");
  cmd.add_flag("--committed", options_.count_committed,
               "--txns counts committed transactions: aborted ones are retried");
  cmd.add_option("--ops-per-txn", options_.ops_per_txn, "Operations per transaction");
  cmd.add_option("--read-ratio", options_.read_ratio, "Proportion of reads (0..1)");
  cmd.add_option("--keys", options_.keys, "Number of keys");
  cmd.add_option("--dist", dist_, "Key distribution: uniform, zipfian, hotspot")
      ->check(CLI::IsMember({"uniform", "zipfian", "hotspot"}));
  cmd.add_option("--data", data_, "Data kind: kv or list")->check(CLI::IsMember({"kv", "list"}));
  cmd.add_option("--max-appends-per-key", options_.max_appends_per_key,
                 "Lists only: retire a key after this many appends and use a fresh one in its "
                 "place, so lists stay short in long runs (0: never)");
  cmd.add_option("--level", level_, "Isolation level the store provides: si or ser")
      ->check(CLI::IsMember({"si", "ser"}));
  cmd.add_option("--fault", faults_,
                 "Fault to inject, NAME[:RATE[:FROM_TXN]] (repeatable): lost-update, "
                 "stale-snapshot, fractured-visibility, session-order, aborted-read, "
                 "intermediate-read, non-repeatable-read");
  cmd.add_option("--seed", options_.seed, "Random seed");
}

absl::StatusOr<sim::WorkloadOptions> SimFlags::Options() const {
  sim::WorkloadOptions o = options_;
  o.dist = dist_ == "uniform"   ? workload::Distribution::kUniform
           : dist_ == "hotspot" ? workload::Distribution::kHotspot
                                : workload::Distribution::kZipfian;
  o.data = data_ == "list" ? history::DataModel::kList : history::DataModel::kKeyValue;
  o.level = level_ == "ser" ? verdict::IsolationLevel::kSerializable
                            : verdict::IsolationLevel::kSnapshotIsolation;
  for (const std::string& spec : faults_) {
    std::string_view rest = spec;
    auto next = [&rest]() {
      size_t colon = rest.find(':');
      std::string_view part = rest.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      return part;
    };
    std::string_view name = next();
    auto fault = sim::ParseFault(name);
    if (!fault) return absl::InvalidArgumentError(fmt::format("--fault: unknown fault {}", name));
    sim::FaultSpec fs{.fault = *fault};
    if (std::string_view rate = next(); !rate.empty()) {
      // std::from_chars for double is in libstdc++ 12.
      auto [ptr, ec] = std::from_chars(rate.data(), rate.data() + rate.size(), fs.rate);
      if (ec != std::errc() || ptr != rate.data() + rate.size() || fs.rate < 0 || fs.rate > 1) {
        return absl::InvalidArgumentError(
            fmt::format("--fault {}: rate must be a number in [0, 1], not {}", name, rate));
      }
    }
    if (std::string_view from = next(); !from.empty()) {
      auto [ptr, ec] = std::from_chars(from.data(), from.data() + from.size(), fs.from_txn);
      if (ec != std::errc() || ptr != from.data() + from.size()) {
        return absl::InvalidArgumentError(
            fmt::format("--fault {}: FROM_TXN must be an integer, not {}", name, from));
      }
    }
    o.faults.push_back(fs);
  }
  return o;
}

}  // namespace isowatch::cli
