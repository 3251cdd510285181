// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <CLI/CLI.hpp>

#include "isowatch/sim/simulator.h"

namespace isowatch::cli {

// The simulator's workload flags, shared by `gen` and `demo`.
class SimFlags {
 public:
  explicit SimFlags(sim::WorkloadOptions defaults) : options_(std::move(defaults)) {}

  void Register(CLI::App& cmd);
  // The workload options the flags describe. Errors (InvalidArgument): a bad value.
  absl::StatusOr<sim::WorkloadOptions> Options() const;

 private:
  sim::WorkloadOptions options_;
  std::string dist_ = "zipfian";
  std::string data_ = "kv";
  std::string level_ = "si";
  std::vector<std::string> faults_;
};

}  // namespace isowatch::cli
