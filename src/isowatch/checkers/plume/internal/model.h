// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "isowatch/checkers/plugin.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/history/range_read.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::plume {

// The initial transaction t0: it wrote every key's initial value and precedes every other one.
inline constexpr uint32_t kInit = UINT32_MAX;

// A read of another transaction's write (or of an initial value): one record of the write-read
// relation, t_writer -> t_reader on `key`.
struct ExtRead {
  KeyId key;
  uint32_t writer = kInit;  // node, or kInit
  uint32_t pos = 0;         // of the read in its transaction's operations
  uint32_t writer_pos = 0;  // of the write in the writer's operations (unused for kInit)
};

// The judged transactions of a history as nodes 0..n-1, in history order, with what the causal
// order and the forced commit-order edges are built from (docs/checkers/plume.md, "The model").
//
// Invariants:
//  1. Every node is a committed transaction, or one of unknown outcome a committed node read from.
//  2. position[u] is u's 1-based place among its session's nodes; session_nodes[s][position-1]
//     is u.
//  3. ext[ext_begin[u], ext_begin[u+1]) are u's reads of other transactions' writes, in program
//     order; writer != u.
//  4. writers[k] lists the nodes that write key k, sorted by (session, position).
//  5. wr_pred[wr_begin[u], wr_begin[u+1]) are the distinct nodes u read from (no kInit), sorted.
struct Model {
  std::vector<TxnId> txn;
  std::vector<uint32_t> session;
  std::vector<uint32_t> position;
  std::vector<std::vector<uint32_t>> session_nodes;
  std::vector<uint32_t> ext_begin;
  std::vector<ExtRead> ext;
  absl::flat_hash_map<KeyId, std::vector<uint32_t>> writers;
  std::vector<uint32_t> wr_begin;
  std::vector<uint32_t> wr_pred;
  // Version-order edges of list keys (from, to, key): from's append precedes to's in the list.
  struct Ww {
    uint32_t from;
    uint32_t to;
    KeyId key;
  };
  std::vector<Ww> ww;
  // Counts for the result (docs/checkers/plume.md, "What it cannot judge").
  uint64_t unknown_committed = 0;  // of unknown outcome, read from, so judged as committed
  uint64_t unknown_dropped = 0;    // of unknown outcome, never read from, so judged aborted
  uint64_t unobserved_reads = 0;   // reads whose result was never seen
  uint64_t ambiguous_reads = 0;    // reads of a (key, value) written more than once
  uint64_t duplicate_writes = 0;   // (key, value) pairs written by more than one transaction

  size_t size() const { return txn.size(); }
  std::span<const ExtRead> ExtReads(uint32_t u) const {
    return std::span<const ExtRead>(ext).subspan(ext_begin[u], ext_begin[u + 1] - ext_begin[u]);
  }
  std::span<const uint32_t> WrPreds(uint32_t u) const {
    return std::span<const uint32_t>(wr_pred).subspan(wr_begin[u], wr_begin[u + 1] - wr_begin[u]);
  }
  // u comes before v in their session (false across sessions, and for u == v).
  bool SessionBefore(uint32_t u, uint32_t v) const {
    return session[u] == session[v] && position[u] < position[v];
  }
  // Whether node u writes `key`.
  bool Writes(uint32_t u, KeyId key) const;
  // The last node of session s that writes `key` at a position <= max_position, or kInit.
  uint32_t LastWriterUpTo(KeyId key, uint32_t s, uint32_t max_position) const;
};

// Builds the model of `h` and appends the findings that need no causal order to `out`: TAP-a to
// TAP-f and TAP-j, and for lists duplicate elements and reads that are no prefix of the key's
// longest read. `levels` is the set of judged levels (bit per level, LevelBit); findings that
// violate none of them are not appended. Polls `poll`; when it expires the model is partial.
Model BuildModel(const history::History& h, uint8_t levels, LimitPoller& poll,
                 std::vector<verdict::Violation>* out);

// Level bits: read committed, read atomic, causal consistency.
inline constexpr uint8_t kRc = 1;
inline constexpr uint8_t kRa = 2;
inline constexpr uint8_t kTcc = 4;
uint8_t LevelBit(verdict::IsolationLevel level);

// The levels that forbid `tap` (docs/checkers/plume.md, "What each level forbids").
uint8_t Forbidding(verdict::Anomaly tap);

// Fills v.level and v.levels from the levels in `bits`; false if `bits` is empty.
bool SetLevels(uint8_t bits, verdict::Violation* v);

}  // namespace isowatch::checkers::plume
