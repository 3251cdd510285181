// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/engine/internal/front_window.h"
#include "isowatch/history/history.h"

namespace isowatch::engine::internal {

// Invariants, per session:
//  1. entries[i] holds position base + i: the transaction delivered there, or an invalid id if
//     none has been yet. entries[0, prefix) are all delivered, and entries[prefix] is not.
//  2. If has_anchor, entries[anchor] is the newest participant among the delivered prefix, and
//     anchor == 0: everything before it has been dropped.
//  3. Each pair of consecutive participants has been judged exactly once, when its second member
//     or the last missing position between them arrived.
// And entries() is the number of delivered entries over all sessions.

// The Session axiom online (docs/engine.md, "What an arrival re-checks", case 4; "Session
// positions"): per session, a window of the transactions delivered by position, from the newest
// participant of the delivered prefix on; judges each committed transaction against its nearest
// committed predecessor once every position between them has arrived. A position 16,384 or more
// past the session's first missing one is left out of its session, counted.
//
// Engine-thread only. Owns the windows.
class SessionChecker {
 public:
  explicit SessionChecker(EngineContext& ctx) : ctx_(ctx), sessions_(ctx.h().session_count()) {}
  SessionChecker(const SessionChecker&) = delete;
  SessionChecker& operator=(const SessionChecker&) = delete;

  size_t size() const { return sessions_.size(); }
  // Makes room for the sessions the history added.
  void Grow() { sessions_.resize(ctx_.h().session_count()); }

  // Transaction `id` (`t`) was delivered: places it in its session's window and judges the pairs
  // its arrival completes.
  void OnArrival(TxnId id, const history::Transaction& t);
  // Whether `id` (`t`) sits in its session's window: a later session successor is checked
  // against it.
  bool Holds(TxnId id, const history::Transaction& t) const {
    if (t.session.value() >= sessions_.size()) return false;
    const Session::Entry* e = sessions_[t.session.value()].At(t.seq);
    return e != nullptr && e->id == id;
  }

  // Checkpoints: the first position each session's window holds.
  uint32_t base(size_t session) const { return sessions_[session].base; }
  void set_base(size_t session, uint32_t base) { sessions_[session].base = base; }

  uint64_t entries() const { return entries_; }
  uint64_t MemoryBytes() const {
    return entries_ * sizeof(Session::Entry) * 2 + sessions_.capacity() * sizeof(Session);
  }
  void CheckInvariants() const;

 private:
  // How far past the first position of a session not delivered yet a position may lie and still
  // be checked against its session neighbours.
  static constexpr size_t kMaxSessionLead = size_t{1} << 14;

  struct Session {
    struct Entry {
      TxnId id;
      bool participates = false;
    };
    uint32_t base = 0;
    FrontWindow<Entry> entries;  // from `base` on
    size_t prefix = 0;
    size_t anchor = 0;
    bool has_anchor = false;

    const Entry* At(uint32_t seq) const {
      if (seq < base || seq - base >= entries.size() || !entries[seq - base].id.valid()) {
        return nullptr;
      }
      return &entries[seq - base];
    }
  };

  // Checks transaction `id` at position `seq` against its nearest committed predecessor, once
  // every transaction between them has arrived.
  void CheckBack(const Session& ss, uint32_t seq, TxnId id);

  EngineContext& ctx_;
  std::vector<Session> sessions_;  // by session
  uint64_t entries_ = 0;
};

}  // namespace isowatch::engine::internal
