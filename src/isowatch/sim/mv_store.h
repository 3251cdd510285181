// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "isowatch/history/value.h"

namespace isowatch::sim {

// The simulated database: a timestamp oracle and, per key, the chain of committed versions.
// It stores what was committed and answers snapshot reads; the concurrency control (which
// transaction may commit) is the caller's.
//
// Invariants:
//  1. The oracle is a counter; Now() is its value and Tick() advances it by one. A snapshot at t
//     sees exactly the versions with commit timestamp <= t.
//  2. Each key's chain is ordered by commit timestamp, strictly increasing (one version per
//     committing transaction per key).
//  3. Register keys: a version holds the writer's final value and, if the writer wrote the key
//     more than once, its first (overwritten) value. Written values are positive integers; the
//     initial value of every register is absent.
//  4. List keys: all appended elements of a key, in commit order, live in one array; a version
//     holds the array's length after its writer's appends. Every list starts empty.
//  5. Writers are transaction handles (indices in begin order), opaque to the store.
// Thread-compatible.
class MvStore {
 public:
  struct Version {
    int64_t cts = 0;
    // Registers: the writer's final value. Lists: the number of elements visible through this
    // version.
    int64_t data = 0;
    // Registers: a value the writer wrote to the key and then overwrote itself; 0 if none.
    int64_t intermediate = 0;
    uint32_t writer = 0;

    history::Value value() const { return history::Value::Int(data); }
  };
  struct AbortedWrite {
    history::Value value;  // a value (register) or element (list) the writer left behind
    uint32_t writer = 0;
  };

  // Keys 0..keys-1 exist from the start; EnsureKey adds more.
  MvStore(uint64_t keys, bool lists);

  // Makes `key` (and every smaller one) exist, initially absent or empty.
  void EnsureKey(uint64_t key);

  int64_t Now() const { return clock_; }
  int64_t Tick() { return ++clock_; }

  // The newest version of `key` with cts <= ts; nullptr: the initial state.
  const Version* Visible(uint64_t key, int64_t ts) const;
  // The version before `v` in its key's chain; nullptr: the initial state.
  const Version* Previous(uint64_t key, const Version* v) const;
  // The newest version of `key`, nullptr if none.
  const Version* Newest(uint64_t key) const;
  // Commit timestamp of the newest version of `key`, or the minimum if there is none.
  int64_t LastCommit(uint64_t key) const { return heads_[key].cts; }
  // All versions of `key`, oldest first.
  std::span<const Version> Chain(uint64_t key) const { return chains_[key]; }

  // Registers: the value of `key` in the snapshot at ts (absent for the initial state).
  history::Value ReadRegister(uint64_t key, int64_t ts) const;
  // Lists: the elements of `key` visible through version `v` (nullptr: empty).
  std::span<const history::Value> ListThrough(uint64_t key, const Version* v) const;
  // Lists: the elements of `key` in the snapshot at ts.
  std::span<const history::Value> ReadList(uint64_t key, int64_t ts) const {
    return ListThrough(key, Visible(key, ts));
  }

  // The newest version of register `key` with cts <= ts whose writer overwrote one of its own
  // values there; nullptr if none.
  const Version* VisibleWithIntermediate(uint64_t key, int64_t ts) const;

  // Installs a committed register write. REQUIRES: cts greater than every cts of `key`.
  // `intermediate` is 0 if the writer wrote the key once.
  void InstallRegister(uint64_t key, int64_t cts, uint32_t writer, int64_t final_value,
                       int64_t intermediate);
  // Installs a committed transaction's appends to list `key`, in order. REQUIRES: as above.
  void InstallList(uint64_t key, int64_t cts, uint32_t writer,
                   std::span<const history::Value> elements);

  // Remembers a write of an aborted transaction (the newest one per key is kept), for the
  // aborted-read fault.
  void RecordAbortedWrite(uint64_t key, history::Value value, uint32_t writer);
  std::optional<AbortedWrite> LastAbortedWrite(uint64_t key) const;

 private:
  // The newest version's commit timestamp and data per key, dense, so that the common cases (the
  // conflict checks, a snapshot that sees the newest version) touch one cache line.
  struct Head {
    int64_t cts = std::numeric_limits<int64_t>::min();
    int64_t data = 0;
  };

  int64_t clock_ = 0;
  std::vector<Head> heads_;
  std::vector<std::vector<Version>> chains_;
  // Registers: per key, indices in chains_[key] of versions with an intermediate value.
  std::vector<std::vector<uint32_t>> with_intermediate_;
  // Lists: per key, every committed element in commit order.
  std::vector<std::vector<history::Value>> elements_;
  std::vector<AbortedWrite> aborted_;
  std::vector<uint8_t> has_aborted_;
  bool lists_;
};

}  // namespace isowatch::sim
