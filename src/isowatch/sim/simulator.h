// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"
#include "isowatch/workload/key_chooser.h"

namespace isowatch::sim {

// Faults the simulated store can inject; each causes a known violation (docs/simulator.md).
enum class Fault {
  kLostUpdate,           // commit without the first-committer-wins check
  kStaleSnapshot,        // read from a snapshot older than the start timestamp (clock skew)
  kFracturedVisibility,  // see only part of a committed transaction's writes
  kSessionOrder,         // start before the session predecessor committed
  kAbortedRead,          // read a value written by an aborted transaction
  kIntermediateRead,     // read a value another transaction overwrote before committing
  kNonRepeatableRead,    // a repeated read returns a newer committed value
};

inline constexpr int kFaultCount = 7;
inline constexpr std::array<Fault, kFaultCount> kAllFaults = {
    Fault::kLostUpdate,       Fault::kStaleSnapshot, Fault::kFracturedVisibility,
    Fault::kSessionOrder,     Fault::kAbortedRead,   Fault::kIntermediateRead,
    Fault::kNonRepeatableRead};

const char* FaultName(Fault fault);  // "lost-update", "stale-snapshot", ...
std::optional<Fault> ParseFault(std::string_view name);

struct FaultSpec {
  Fault fault;
  double rate = 0.01;  // probability per eligible transaction
  // Only transactions at or after this index (in begin order) are eligible: lets a run switch a
  // fault on part-way through.
  uint64_t from_txn = 0;
};

// Workload parameters (seed 000, Table I) and the store's behaviour.
struct WorkloadOptions {
  uint32_t sessions = 24;
  uint64_t txns = 10000;
  // If true, `txns` counts committed transactions: aborted ones are retried with new ones until
  // that many have committed (as a client that retries until success would).
  bool count_committed = false;
  uint32_t ops_per_txn = 8;
  double read_ratio = 0.5;
  uint64_t keys = 1000;
  workload::Distribution dist = workload::Distribution::kZipfian;
  double zipf_theta = 0.99;
  history::DataModel data = history::DataModel::kKeyValue;
  verdict::IsolationLevel level = verdict::IsolationLevel::kSnapshotIsolation;
  std::vector<FaultSpec> faults;
  uint64_t seed = 1;
  // Record aborted transactions in the history (status ABORTED).
  bool record_aborted = true;
  // Probability that a client gives up a transaction at its commit (so aborted transactions
  // always exist, whatever the contention).
  double client_abort_rate = 0.02;
  // Probability that an operation reuses a key the transaction already planned to touch (so
  // repeated reads and double writes occur).
  double key_reuse_rate = 0.1;
  // Stale snapshots lag the start timestamp by 1..max_stale_lag ticks of the oracle.
  uint32_t max_stale_lag = 64;
  // Lists only: once this many appends have been planned to a list key, the key is retired and
  // its slot of the distribution moves to a fresh key (slot + keys * generation), so lists, and
  // the list reads that copy them, stay short in long runs. 0: keys are never retired.
  uint32_t max_appends_per_key = 0;
};

// A violation the checker must report for this history (docs/simulator.md: ground truth).
struct ExpectedViolation {
  verdict::Anomaly anomaly;
  verdict::ExtKind ext_kind = verdict::ExtKind::kNone;  // EXT only
  std::vector<std::string> txns;                        // ids, ordered as verdict::Violation::txns
  std::optional<int64_t> key;                           // absent for SESSION
  Fault cause;
};

struct SimResult {
  history::History history;
  std::vector<ExpectedViolation> expected;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  // Per fault (indexed by static_cast<int>(Fault)): committed transactions in which the store
  // actually misbehaved (docs/simulator.md says when each fault counts as injected).
  std::array<uint64_t, kFaultCount> injected{};
};

// Runs the workload against an in-process multi-version store with a timestamp oracle.
// Deterministic for a given `options` (seed included). Errors: invalid options.
absl::StatusOr<SimResult> Simulate(const WorkloadOptions& options);

// Writes the ground truth as JSON: {"level": ..., "expected": [{"anomaly", "ext_kind", "txns",
// "key", "cause"}...]}.
void WriteGroundTruth(const SimResult& result, verdict::IsolationLevel level, std::ostream& out);

}  // namespace isowatch::sim
