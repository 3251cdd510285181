// SPDX-License-Identifier: Apache-2.0
#include "collectors/common/workload_shape.h"

#include <algorithm>

#include <fmt/format.h>

namespace isowatch::collectors {

void SetCanaryShape(WorkloadShape& shape, std::string& dist) {
  shape.sessions = 2;
  shape.keys = 8;
  shape.txns = 0;
  shape.rate_tps = 5;
  shape.dist = workload::Distribution::kUniform;
  dist = "uniform";
}

void AddWorkloadShapeFlags(CLI::App& cmd, WorkloadShape& shape, std::string& dist) {
  cmd.add_option("--sessions", shape.sessions, "Client sessions (connections)")
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--keys", shape.keys, "Keys (rows) the workload uses")
      ->check(CLI::Range(1, 1 << 30));
  cmd.add_option("--ops-per-txn", shape.ops_per_txn, "Operations per transaction")
      ->check(CLI::Range(1, 10000));
  cmd.add_option("--read-ratio", shape.read_ratio, "Proportion of reads")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--dist", dist, "Key distribution: uniform, zipfian, hotspot")
      ->check(CLI::IsMember({"uniform", "zipfian", "hotspot"}));
  cmd.add_option("--zipf-theta", shape.zipf_theta, "Skew of the zipfian distribution")
      ->check(CLI::Range(0.01, 10.0));
  cmd.add_option("--seed", shape.seed, "Seed of the workload's choices");
}

void ApplyWorkloadDist(const std::string& dist, WorkloadShape& shape) {
  shape.dist = dist == "uniform"   ? workload::Distribution::kUniform
               : dist == "hotspot" ? workload::Distribution::kHotspot
                                   : workload::Distribution::kZipfian;
}

WorkloadSession::WorkloadSession(const WorkloadShape& shape, uint32_t index)
    : shape_(shape),
      index_(index),
      rng_(shape.seed * 1000003 + index),
      keys_(shape.dist, std::max<uint64_t>(shape.keys, 1), shape.zipf_theta),
      name_(fmt::format("r{}s{}", shape.run, index)) {}

void WorkloadSession::Run(
    const std::atomic<bool>& stop, std::atomic<uint64_t>& next,
    const std::function<bool(const std::vector<workload::PlannedOp>&)>& attempt) {
  workload::Pacer pacer(shape_.sessions, shape_.rate_tps);
  while (!stop.load(std::memory_order_relaxed)) {
    const uint64_t n = next.fetch_add(1, std::memory_order_relaxed);
    if (shape_.txns != 0 && n >= shape_.txns) break;
    const std::vector<workload::PlannedOp> plan =
        workload::PlanTxn(rng_, keys_, shape_.ops_per_txn, shape_.read_ratio);
    for (uint32_t tries = 0;; ++tries) {
      const bool again = attempt(plan);
      if (!again || tries >= shape_.max_retries || stop.load(std::memory_order_relaxed)) break;
    }
    pacer.Wait();
  }
}

int64_t WorkloadSession::NextValue() {
  return (static_cast<int64_t>(shape_.run & 0xffff) << 47) |
         (static_cast<int64_t>(index_ & 0xfff) << 35) | static_cast<int64_t>(++counter_);
}

}  // namespace isowatch::collectors
