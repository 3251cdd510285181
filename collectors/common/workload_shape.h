// SPDX-License-Identifier: Apache-2.0
#pragma once

// What the collectors' workloads share, whatever their database: the shape of the load (sessions,
// transactions, operations, keys, pace, retries), its command-line flags, and what each of its
// sessions keeps to plan transactions and name what it writes (docs/collectors/postgres.md and
// docs/collectors/tidb.md, "Workload").

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "isowatch/workload/key_chooser.h"
#include "isowatch/workload/rng.h"
#include "isowatch/workload/session_plan.h"

namespace isowatch::collectors {

// `sessions` connections, each running transactions of `ops_per_txn` reads and writes (or
// appends) on `keys` keys drawn from `dist`. A plain value.
struct WorkloadShape {
  uint32_t sessions = 8;
  // Transactions to run, retries not counted (each retry is one more); 0 = until stopped.
  uint64_t txns = 1000;
  uint32_t ops_per_txn = 4;
  double read_ratio = 0.5;
  uint64_t keys = 100;
  workload::Distribution dist = workload::Distribution::kZipfian;
  double zipf_theta = 0.99;
  // Transactions per second over all sessions; 0 = as fast as they go.
  double rate_tps = 0;
  // Times a transaction the database aborted for a conflict runs again (each attempt is a
  // transaction of its own, recorded as such).
  uint32_t max_retries = 0;
  uint64_t seed = 1;
  // The collector's run number (its state directory counts starts): session names, transaction
  // ids and the values written are unique across runs.
  uint32_t run = 0;
};

// A canary's shape: 2 sessions on 8 uniform keys, 5 transactions per second, until stopped.
// `dist` is the --dist flag's text (AddWorkloadShapeFlags), set to match.
void SetCanaryShape(WorkloadShape& shape, std::string& dist);

// Adds to `cmd` the flags of the shape that every collector has in the same words: --sessions,
// --keys, --ops-per-txn, --read-ratio, --dist (its text into `dist`, for ApplyWorkloadDist),
// --zipf-theta and --seed. `shape` and `dist` must outlive the parse; the defaults are what they
// hold when this is called.
void AddWorkloadShapeFlags(CLI::App& cmd, WorkloadShape& shape, std::string& dist);

// Sets shape.dist from --dist's text (which the flag checked).
void ApplyWorkloadDist(const std::string& dist, WorkloadShape& shape);

// What one session of a workload keeps whatever its database: its random choices, its keys, its
// name and the counter of the values it writes. Thread-compatible: one per session.
class WorkloadSession {
 public:
  // REQUIRES: `shape` outlives the session.
  WorkloadSession(const WorkloadShape& shape, uint32_t index);

  // Runs the session's transactions: takes their numbers from `next`, which the sessions share,
  // until `stop` or the shape's count, at the pace of the shape's rate; `attempt` runs one
  // attempt of a planned transaction and says whether to run it again, which happens at most
  // max_retries times.
  void Run(const std::atomic<bool>& stop, std::atomic<uint64_t>& next,
           const std::function<bool(const std::vector<workload::PlannedOp>&)>& attempt);

  // A value no other write of the history writes: the run, the session and a counter.
  int64_t NextValue();

  uint32_t index() const { return index_; }
  // "r<run>s<index>".
  const std::string& name() const { return name_; }

 private:
  const WorkloadShape& shape_;
  const uint32_t index_;
  workload::Rng rng_;
  workload::KeyChooser keys_;
  const std::string name_;
  uint64_t counter_ = 0;
};

}  // namespace isowatch::collectors
