// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/simulator.h"

#include <cmath>

#include <fmt/format.h>

#include "isowatch/sim/simulation.h"

namespace isowatch::sim {
namespace {

bool IsProbability(double p) { return p >= 0.0 && p <= 1.0; }  // false for NaN

absl::Status Validate(const WorkloadOptions& o) {
  constexpr uint64_t kMaxKeys = uint64_t{1} << 28;
  constexpr uint64_t kMaxTxns = (uint64_t{1} << 32) - 2;
  if (o.sessions == 0 || o.sessions > (1u << 20)) {
    return absl::InvalidArgumentError(fmt::format("sessions must be in 1..{}", 1u << 20));
  }
  if (o.txns > kMaxTxns) {
    return absl::InvalidArgumentError(fmt::format("txns must be at most {}", kMaxTxns));
  }
  if (o.ops_per_txn == 0 || o.ops_per_txn > (1u << 16)) {
    return absl::InvalidArgumentError(fmt::format("ops_per_txn must be in 1..{}", 1u << 16));
  }
  if (o.keys == 0 || o.keys > kMaxKeys) {
    return absl::InvalidArgumentError(fmt::format("keys must be in 1..{}", kMaxKeys));
  }
  if (!IsProbability(o.read_ratio)) {
    return absl::InvalidArgumentError("read_ratio must be in [0, 1]");
  }
  if (!IsProbability(o.client_abort_rate)) {
    return absl::InvalidArgumentError("client_abort_rate must be in [0, 1]");
  }
  if (!IsProbability(o.key_reuse_rate)) {
    return absl::InvalidArgumentError("key_reuse_rate must be in [0, 1]");
  }
  if (o.dist == workload::Distribution::kZipfian &&
      !(o.zipf_theta > 0.0 && std::isfinite(o.zipf_theta))) {
    return absl::InvalidArgumentError("zipf_theta must be positive");
  }
  if (o.max_stale_lag == 0) return absl::InvalidArgumentError("max_stale_lag must be positive");
  if (o.max_appends_per_key != 0 && o.data != history::DataModel::kList) {
    return absl::InvalidArgumentError("max_appends_per_key applies to list data only");
  }
  for (const FaultSpec& f : o.faults) {
    const int index = static_cast<int>(f.fault);
    if (index < 0 || index >= kFaultCount) {
      return absl::InvalidArgumentError(fmt::format("unknown fault {}", index));
    }
    if (!IsProbability(f.rate)) {
      return absl::InvalidArgumentError(
          fmt::format("the rate of fault {} must be in [0, 1]", FaultName(f.fault)));
    }
    if (f.fault == Fault::kIntermediateRead && o.data == history::DataModel::kList) {
      return absl::InvalidArgumentError(
          "fault intermediate-read needs key-value data: appends have no intermediate values");
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kLostUpdate:
      return "lost-update";
    case Fault::kStaleSnapshot:
      return "stale-snapshot";
    case Fault::kFracturedVisibility:
      return "fractured-visibility";
    case Fault::kSessionOrder:
      return "session-order";
    case Fault::kAbortedRead:
      return "aborted-read";
    case Fault::kIntermediateRead:
      return "intermediate-read";
    case Fault::kNonRepeatableRead:
      return "non-repeatable-read";
  }
  return "?";
}

std::optional<Fault> ParseFault(std::string_view name) {
  for (Fault f : kAllFaults) {
    if (name == FaultName(f)) return f;
  }
  return std::nullopt;
}

absl::StatusOr<SimResult> Simulate(const WorkloadOptions& options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  return Simulation(options).Run();
}

}  // namespace isowatch::sim
