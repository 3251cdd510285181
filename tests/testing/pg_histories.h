// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "isowatch/history/transaction.h"

#include "tests/testing/test_history.h"

namespace isowatch::testing {

// A small history as PostgreSQL produces it (xids, snapshots `xmin:xmax:xip`, commit LSNs) and
// what Chronos reports for it at SI, summarised (Summarize) and sorted.
struct PgScenario {
  std::string name;
  TestHistory history;
  std::vector<std::string> si;
  uint64_t unjudged = 0;  // ChronosStats::snapshot_unjudged
};

inline void PrintTo(const PgScenario& s, std::ostream* os) { *os << s.name; }

inline std::vector<PgScenario> PgScenarios() {
  constexpr int64_t kX = 0;
  constexpr int64_t kY = 1;
  using history::TxnStatus;
  std::vector<PgScenario> out;
  {
    // Read committed lost update: T1 and T2 take the same snapshot (before either writes),
    // both read x and write it. T2 commits after T1 without seeing it.
    PgScenario s{.name = "lost_update"};
    s.history.Pg("T0", "a", 100, "100:100:", 10).W(kX, 1);
    s.history.Pg("T1", "b", 101, "101:101:", 20).R(kX, 1).W(kX, 2);
    s.history.Pg("T2", "c", 102, "101:101:", 30).R(kX, 1).W(kX, 3);
    s.history.Pg("T3", "a", 0, "103:103:", 40).R(kX, 3);
    s.si = {"NOCONFLICT T1,T2 k=0"};
    out.push_back(std::move(s));
  }
  {
    // Non-repeatable read at read committed: the second statement of T1 takes a new snapshot and
    // sees T2, but the recorded snapshot (the first statement's) does not: an EXT violation. T3
    // reads x twice and gets two values: INT.
    PgScenario s{.name = "non_repeatable_read"};
    s.history.Pg("T0", "a", 100, "100:100:", 10).W(kX, 1).W(kY, 1);
    s.history.Pg("T1", "b", 0, "101:101:", 30).R(kY, 1).R(kX, 2);
    s.history.Pg("T2", "c", 101, "101:101:", 20).W(kX, 2);
    s.history.Pg("T3", "d", 0, "101:101:", 25).R(kX, 1).R(kX, 2);
    s.si = {"EXT/uncommitted T1,T2 k=0", "INT T3 k=0"};
    out.push_back(std::move(s));
  }
  {
    // Read skew: T2 moves 1 from x to y; T1 reads x before and y after it.
    PgScenario s{.name = "read_skew"};
    s.history.Pg("T0", "a", 100, "100:100:", 10).W(kX, 5).W(kY, 5);
    s.history.Pg("T2", "b", 102, "101:101:", 20).R(kX, 5).R(kY, 5).W(kX, 4).W(kY, 6);
    s.history.Pg("T1", "c", 0, "101:101:", 30).R(kX, 5).R(kY, 6);
    s.si = {"EXT/uncommitted T1,T2 k=1"};
    out.push_back(std::move(s));
  }
  {
    // Repeatable read, valid: T1 and T2 write different keys concurrently; T3 sees both, T4
    // (a snapshot taken while both ran) sees neither. Read-only transactions have no xid.
    PgScenario s{.name = "repeatable_read_valid"};
    s.history.Pg("T1", "a", 101, "101:101:", 10).R(kX, std::nullopt).W(kX, 1);
    s.history.Pg("T2", "b", 102, "101:102:101", 20).R(kY, std::nullopt).W(kY, 1);
    s.history.Pg("T4", "d", 0, "101:103:101,102", 25).R(kX, std::nullopt).R(kY, std::nullopt);
    s.history.Pg("T3", "c", 0, "103:103:", 30).R(kX, 1).R(kY, 1);
    s.history.Pg("T5", "e", 105, "103:103:", 40).R(kX, 1).W(kX, 2);
    out.push_back(std::move(s));
  }
  {
    // WAL order differs from visibility order: T1 commits first in the WAL (LSN 10), T2 after
    // (LSN 20), but R's snapshot already sees T2 and not yet T1. Not a violation.
    PgScenario s{.name = "wal_order_near_miss"};
    s.history.Pg("T1", "a", 101, "101:101:", 10).W(kX, 1);
    s.history.Pg("T2", "b", 102, "101:102:101", 20).W(kY, 2);
    s.history.Pg("R", "c", 0, "101:103:101", 30).R(kX, std::nullopt).R(kY, 2);
    s.history.Pg("R2", "d", 0, "103:103:", 40).R(kX, 1).R(kY, 2);
    out.push_back(std::move(s));
  }
  {
    // Session: T2 follows T1 in session a, but its snapshot does not see T1. T4 follows the
    // read-only T3 (no xid): not judged.
    PgScenario s{.name = "session"};
    s.history.Pg("T1", "a", 101, "101:101:", 10).W(kX, 1);
    s.history.Pg("T2", "a", 0, "101:102:101", 20).R(kX, std::nullopt);
    s.history.Pg("T3", "b", 0, "102:102:", 30).R(kX, 1);
    s.history.Pg("T4", "b", 0, "102:102:", 40).R(kX, 1);
    s.si = {"SESSION T2,T1"};
    s.unjudged = 1;
    out.push_back(std::move(s));
  }
  {
    // Aborted and unknown writers install nothing: a read of an aborted write is EXT/aborted, a
    // read of a write of unknown outcome EXT too.
    PgScenario s{.name = "aborted_unknown"};
    s.history.Pg("T1", "a", 101, "101:101:", 10, TxnStatus::kAborted).W(kX, 9);
    s.history.Pg("T2", "b", 0, "102:102:", 15).R(kX, 9);
    s.history.Pg("T3", "c", 103, "103:103:", 20, TxnStatus::kUnknown).W(kY, 7);
    s.history.Pg("T4", "d", 0, "104:104:", 30).R(kY, 7);
    s.si = {"EXT/aborted T2,T1 k=0", "EXT/uncommitted T4,T3 k=1"};
    out.push_back(std::move(s));
  }
  {
    // Own writes: a transaction reads what it wrote (internal), never its own version through
    // its snapshot; an internal read that disagrees is INT.
    PgScenario s{.name = "own_writes"};
    s.history.Pg("T1", "a", 101, "101:101:", 10).R(kX, std::nullopt).W(kX, 1).R(kX, 1);
    s.history.Pg("T2", "b", 102, "102:102:", 20).R(kX, 1).W(kX, 2).R(kX, 3);
    s.history.Pg("T3", "c", 0, "103:103:", 30).R(kX, 2);
    s.si = {"INT T2 k=0"};
    out.push_back(std::move(s));
  }
  {
    // A writer without an xid: snapshot readers above it cannot be judged (counted, never an
    // alarm), nor the NoConflict pair it would form.
    PgScenario s{.name = "writer_without_xid"};
    s.history.Pg("T1", "a", 0, "100:100:", 10).W(kX, 1);
    s.history.Pg("T2", "b", 0, "101:101:", 20).R(kX, 7);
    s.history.Pg("T3", "c", 103, "101:101:", 30).W(kX, 2);
    s.unjudged = 2;
    out.push_back(std::move(s));
  }
  {
    // Lists: R sees T2's append (later in the WAL) and not T1's.
    PgScenario s{.name = "list_near_miss"};
    s.history.Pg("T0", "a", 100, "100:100:", 5).A(kX, 1);
    s.history.Pg("T1", "a", 101, "101:101:", 10).A(kX, 2);
    s.history.Pg("T2", "b", 102, "101:102:101", 20).A(kY, 3).A(kX, 3);
    s.history.Pg("R", "c", 0, "101:103:101", 30).L(kX, {1, 3});
    s.history.Pg("R2", "d", 0, "101:103:101", 35).L(kX, {1, 2, 3});
    s.si = {"EXT/uncommitted R2,T1 k=0", "NOCONFLICT T1,T2 k=0"};
    out.push_back(std::move(s));
  }
  {
    // Mixed: a transaction with a start timestamp and one with a snapshot write x concurrently.
    PgScenario s{.name = "mixed"};
    s.history.Pg("T1", "a", 101, "101:101:", 10).W(kX, 1);
    s.history.Txn("U", "b", 15, 30).Xid(103).R(kX, 1).W(kX, 3);
    s.history.Pg("T2", "c", 102, "102:102:", 20).R(kX, 1).W(kX, 2);
    s.si = {"NOCONFLICT T2,U k=0"};
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace isowatch::testing
