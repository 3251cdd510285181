// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/history/transaction.h"

#include "tests/testing/test_history.h"

namespace isowatch::testing {

// A model of PostgreSQL's MVCC at repeatable read: transactions of a few sessions interleave; a
// writer gets its xid at its start, and a snapshot sees exactly the transactions that had
// committed when it was taken; a write to a key a concurrent transaction committed aborts (first
// committer wins). Faults: a read that returns an older version than the snapshot's, and a
// commit that skips the first-committer-wins check (a lost update).
struct PgModelOptions {
  uint64_t seed = 1;
  int txns = 300;
  int sessions = 6;
  int keys = 6;
  double stale_read = 0;
  double lost_update = 0;
};

struct PgModelTxn {
  std::string id;
  int session = 0;
  uint64_t xid = 0;
  std::string snapshot;
  std::vector<uint64_t> sees;  // committed xids when the snapshot was taken
  uint64_t xmin = 0;
  std::vector<std::tuple<bool, int, std::optional<int64_t>>> ops;  // (write, key, value)
  int remaining = 0;
  bool read_only = false;
};

inline TestHistory PgModel(const PgModelOptions& o, int* faults) {
  std::mt19937_64 rng(o.seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  // Per key, the committed versions in commit order: (writer xid, value).
  std::vector<std::vector<std::pair<uint64_t, int64_t>>> versions(static_cast<size_t>(o.keys));
  std::vector<uint64_t> committed;  // xids, sorted
  std::vector<uint64_t> active;     // xids of open writers
  std::vector<bool> session_busy(static_cast<size_t>(o.sessions), false);
  std::vector<PgModelTxn> open;
  TestHistory out;
  uint64_t next_xid = 100;
  int64_t lsn = 0;
  int started = 0;
  *faults = 0;
  auto visible = [](const PgModelTxn& t, uint64_t xid) {
    return std::binary_search(t.sees.begin(), t.sees.end(), xid);
  };
  while (started < o.txns || !open.empty()) {
    const bool begin = started < o.txns && open.size() < 4 && (open.empty() || chance(0.4));
    if (begin) {
      const int session = pick(o.sessions);
      if (session_busy[static_cast<size_t>(session)]) continue;
      PgModelTxn t;
      t.id = fmt::format("t{}", started++);
      t.session = session;
      t.read_only = chance(0.3);
      // The snapshot: xmax is the next xid, xip the open writers, xmin the oldest of them.
      const uint64_t xmax = next_xid;
      t.xmin = active.empty() ? xmax : *std::min_element(active.begin(), active.end());
      std::vector<uint64_t> xip = active;
      std::sort(xip.begin(), xip.end());
      t.snapshot = fmt::format("{}:{}:{}", t.xmin, xmax, fmt::join(xip, ","));
      t.sees = committed;
      if (!t.read_only) {
        t.xid = next_xid++;
        active.push_back(t.xid);
      }
      t.remaining = 1 + pick(4);
      session_busy[static_cast<size_t>(session)] = true;
      open.push_back(std::move(t));
      continue;
    }
    if (open.empty()) continue;
    const size_t i = static_cast<size_t>(pick(static_cast<int>(open.size())));
    PgModelTxn& t = open[i];
    if (t.remaining > 0) {
      --t.remaining;
      const int key = pick(o.keys);
      if (!t.read_only && chance(0.5)) {
        t.ops.emplace_back(true, key, static_cast<int64_t>(t.xid * 100 + t.ops.size()));
        continue;
      }
      // Own write first, else the newest version the snapshot sees (or an older one: a fault).
      std::optional<int64_t> value;
      bool own = false;
      for (const auto& [write, k, v] : t.ops) {
        if (write && k == key) {
          value = v;
          own = true;
        }
      }
      if (!own) {
        const auto& chain = versions[static_cast<size_t>(key)];
        std::vector<int64_t> seen;
        for (const auto& [xid, v] : chain) {
          if (visible(t, xid)) seen.push_back(v);
        }
        if (!seen.empty()) value = seen.back();
        if (!seen.empty() && chance(o.stale_read)) {
          value = seen.size() >= 2 ? std::optional<int64_t>(seen[seen.size() - 2]) : std::nullopt;
          ++*faults;
        }
      }
      t.ops.emplace_back(false, key, value);
      continue;
    }
    // Commit, unless a key it wrote was committed by a transaction it does not see.
    bool conflict = false;
    for (const auto& [write, k, v] : t.ops) {
      if (!write) continue;
      for (const auto& [xid, value] : versions[static_cast<size_t>(k)]) {
        if (!visible(t, xid)) conflict = true;
      }
    }
    if (conflict && chance(o.lost_update)) {
      conflict = false;
      ++*faults;
    }
    lsn += 10;
    out.Pg(t.id, fmt::format("s{}", t.session), t.xid, t.snapshot, lsn,
           conflict ? history::TxnStatus::kAborted : history::TxnStatus::kCommitted);
    for (const auto& [write, k, v] : t.ops) {
      if (write) {
        out.W(k, *v);
      } else {
        out.R(k, v);
      }
    }
    if (!conflict) {
      for (const auto& [write, k, v] : t.ops) {
        if (!write) continue;
        auto& chain = versions[static_cast<size_t>(k)];
        if (!chain.empty() && chain.back().first == t.xid) {
          chain.back().second = *v;
        } else {
          chain.emplace_back(t.xid, *v);
        }
      }
      if (t.xid != 0)
        committed.insert(std::upper_bound(committed.begin(), committed.end(), t.xid), t.xid);
    }
    active.erase(std::remove(active.begin(), active.end(), t.xid), active.end());
    session_busy[static_cast<size_t>(t.session)] = false;
    open.erase(open.begin() + static_cast<ptrdiff_t>(i));
  }
  return out;
}

}  // namespace isowatch::testing
