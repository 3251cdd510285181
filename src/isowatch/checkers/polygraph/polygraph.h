// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::polygraph {

// Which snapshot isolation (docs/checkers/polygraph.md, "Variants"). Real time is the clients'
// invocation and completion times (history::Transaction::invoke_time, complete_time): T precedes
// U if T completed before U was invoked.
enum class SiVariant : uint8_t {
  kAdya = 0,           // a total order of begins and commits explains every read
  kGeneralized = 1,    // and it commits in real-time order, and a transaction does not read from
                       // one that completed after it was invoked (old snapshots allowed)
  kStrongSession = 2,  // generalized (when the history has real time), and each transaction
                       // begins after its session predecessor committed
  kStrong = 3,         // and each transaction begins after every one that precedes it in real time
                       // (and its session predecessor) committed: the latest snapshot
};

// "adya", "generalized", "strong-session", "strong"
const char* SiVariantName(SiVariant variant);

// The SAT solver behind the search (docs/checkers/polygraph.md, "The solver").
enum class SatBackend : uint8_t {
  kCadical = 0,
  kCryptoMiniSat = 1,
};

const char* SatBackendName(SatBackend backend);  // "cadical", "cryptominisat"

struct PolygraphOptions {
  // Any of serializability and snapshot isolation.
  std::vector<verdict::IsolationLevel> levels = {verdict::IsolationLevel::kSnapshotIsolation,
                                                 verdict::IsolationLevel::kSerializable};
  SiVariant si_variant = SiVariant::kAdya;
  SatBackend solver = SatBackend::kCadical;
  // The clients' clock error δ, in the history's time unit (HistoryInfo::time_unit): under the
  // real-time variants T precedes U only if T completed more than δ before U was invoked, so a
  // real-time inversion of δ or less is taken for drift and not reported (docs/checkers/
  // polygraph.md, "Variants"). Not negative.
  int64_t clock_drift = 0;
  // Fixes constraints whose other order closes a cycle before solving (complete: it changes no
  // verdict). Off only to show that in tests.
  bool prune = true;
  // When to stop; nullptr: never. Not owned.
  const CheckLimits* limits = nullptr;
  // Transactions with a smaller index (a window's lead-in) are judged but not counted in
  // PolygraphResult::counted.
  uint64_t first_counted = 0;
  // The most constraint edges the model may hold (16 bytes each, and about as much again in the
  // search); a history that needs more is left undecided. Smaller only in tests.
  size_t max_constraint_edges = size_t{1} << 24;
  // A key with more chains of writers than this is hot: the constraints between its chains are
  // added only as a candidate order needs them (docs/checkers/polygraph.md, "Hot keys"). It
  // changes no verdict; SIZE_MAX: none is.
  size_t lazy_chains = 16;
};

struct PolygraphResult {
  // False: out of time or the history cannot be judged (`undecided` says why; empty when out of
  // time). Violations are then empty.
  bool complete = true;
  std::string undecided;
  // Sorted (verdict::SortViolations). Findings before the graph (internal, aborted,
  // intermediate and thin-air reads, lost updates) name every level judged
  // (verdict::Violation::levels); a cycle names the level whose graph it is in.
  std::vector<verdict::Violation> violations;
  // Transactions judged, from PolygraphOptions::first_counted on: the committed ones and those
  // of unknown outcome judged committed because a read saw their writes.
  size_t counted = 0;
  // Counts for reports: the model's, then the search's per level ("ser_constraints", ...).
  std::vector<std::pair<std::string, uint64_t>> stats;
};

// Checks whether `h` is serializable or snapshot-isolated without timestamps, by deciding
// whether some order of its writes explains every read: a polygraph of the dependencies the
// reads show and the unknown write orders as constraints, pruned and then solved with a SAT
// solver that is handed a clause for every cycle of its models (docs/checkers/polygraph.md).
// Needs register keys with unique written values. NP-complete in general; time is spent mostly
// on the constraints pruning leaves, which are few on histories from real databases.
PolygraphResult CheckPolygraph(const history::History& h, const PolygraphOptions& options = {});

}  // namespace isowatch::checkers::polygraph
