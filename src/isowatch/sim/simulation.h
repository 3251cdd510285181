// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/value.h"
#include "isowatch/sim/mv_store.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/sim/truth_auditor.h"
#include "isowatch/sim/txn_log.h"
#include "isowatch/workload/key_chooser.h"
#include "isowatch/workload/rng.h"

namespace isowatch::sim {

// One run of the workload (docs/simulator.md): sessions issue transactions against an MvStore,
// a seeded scheduler interleaves their steps (begin, one operation, commit), the concurrency
// control is snapshot isolation or serializable OCC, and faults make chosen transactions
// misbehave. Every completed transaction is recorded in a HistoryBuilder; every committed one
// is audited for the violations it must cause.
//
// Single use: construct, then Run() once. Thread-compatible.
class Simulation {
 public:
  // REQUIRES: `options` passed Simulate()'s validation.
  explicit Simulation(const WorkloadOptions& options);

  absl::StatusOr<SimResult> Run() &&;

 private:
  static constexpr int kNoFault = -1;

  struct PlannedOp {
    bool read = false;
    uint64_t key = 0;
  };
  // What a running transaction knows about one key.
  struct KeyState {
    uint64_t key = 0;
    bool read = false;           // it has read the key
    bool wrote = false;          // it has written or appended to the key
    bool snapshot_read = false;  // a read of the key consulted the store
    int64_t validate_from = 0;   // SER: the key must not change after this timestamp
    history::Value view;         // registers: last value read or written
    int64_t final_value = 0;     // registers: last value written (0: none)
    int64_t intermediate = 0;    // registers: first value written and then overwritten (0: none)
    std::vector<history::Value> list_view;  // lists: last read, then own appends since
    std::vector<history::Value> appends;    // lists: own appends
  };
  struct OpenTxn {
    uint32_t handle = 0;
    int64_t seq = 0;
    std::vector<PlannedOp> plan;
    size_t next = 0;
    int fault = kNoFault;
    bool fired = false;          // the fault changed what the store did
    int64_t real_start = 0;      // the oracle's time at begin
    int64_t snapshot_ts = 0;     // what reads see (the recorded start)
    int64_t stale_ts = 0;        // stale-snapshot: what external reads see instead
    std::vector<KeyState> keys;  // first keys_used entries are live
    size_t keys_used = 0;
    std::vector<TxnOp> ops;
    std::vector<history::Value> list_pool;
  };
  struct Session {
    uint32_t index = 0;
    std::string name;
    int64_t next_seq = 0;
    std::optional<uint32_t> last_committed;
    bool busy = false;
    OpenTxn txn;
  };

  bool Lists() const { return options_.data == history::DataModel::kList; }
  bool Ser() const { return options_.level == verdict::IsolationLevel::kSerializable; }
  bool Has(const OpenTxn& t, Fault f) const { return t.fault == static_cast<int>(f); }

  // Whether another transaction may begin (WorkloadOptions::txns, count_committed).
  bool MayBegin() const;
  void Begin(Session& s);
  // The key (store index) for an operation drawn from the distribution.
  uint64_t DrawKey(bool append);
  // The key as named in the history.
  int64_t KeyName(uint64_t key) const {
    return key_names_.empty() ? static_cast<int64_t>(key) : key_names_[key];
  }
  void ChooseFault(Session& s, OpenTxn& t);
  bool Eligible(Fault f, const Session& s, const OpenTxn& t) const;
  void Execute(OpenTxn& t);
  KeyState& Key(OpenTxn& t, uint64_t key);
  void ReadRegister(OpenTxn& t, KeyState& ks);
  // The (possibly faulty) snapshot value of register `key`.
  history::Value ExternalRegister(OpenTxn& t, uint64_t key);
  void ReadList(OpenTxn& t, KeyState& ks);
  // Appends the (possibly faulty) snapshot of list `key` to `out`.
  void ExternalList(OpenTxn& t, uint64_t key, std::vector<history::Value>& out);
  // Whether the store's concurrency control refuses the commit.
  bool Conflicts(const OpenTxn& t) const;
  absl::Status Complete(Session& s);
  absl::Status Record(const Session& s, const OpenTxn& t);

  WorkloadOptions options_;
  workload::Rng rng_;
  workload::KeyChooser chooser_;
  MvStore store_;
  TxnLog log_;
  TruthAuditor auditor_;
  history::HistoryBuilder builder_;
  std::vector<KeyId> key_ids_;  // interned history key per simulated key
  // max_appends_per_key: the store indexes keys densely; per slot of the distribution, the
  // index of its current key, its generation and the appends planned to it; per index, the key's
  // name in the history (slot + keys * generation).
  std::vector<uint64_t> slot_key_;
  std::vector<uint64_t> slot_generation_;
  std::vector<uint32_t> slot_appends_;
  std::vector<int64_t> key_names_;
  std::vector<Session> sessions_;
  uint64_t begun_ = 0;
  uint64_t busy_ = 0;  // sessions with a transaction in flight
  uint64_t next_id_ = 0;
  SimResult result_;
  std::vector<ExpectedViolation> findings_;  // scratch
};

}  // namespace isowatch::sim
