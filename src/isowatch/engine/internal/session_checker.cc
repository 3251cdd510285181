// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/session_checker.h"

#include <optional>

#include "isowatch/axioms/explain.h"
#include "isowatch/axioms/snapshot_rules.h"
#include "isowatch/common/check.h"

namespace isowatch::engine::internal {

void SessionChecker::OnArrival(TxnId id, const history::Transaction& t) {
  Session& ss = sessions_[t.session.value()];
  // Positions below base were all delivered: a second transaction at one of them (bad input) is
  // left out of its session.
  if (t.seq < ss.base) return;
  const size_t index = t.seq - ss.base;
  const bool participates = ctx_.Participates(t);
  if (index >= ss.entries.size()) {
    // A position too far past the session's first missing one would make the window hold every
    // position in between: the transaction is left out of its session, counted.
    if (index - ss.prefix >= kMaxSessionLead) {
      if (participates) ++ctx_.stats().session_unjudged;
      return;
    }
    ss.entries.resize(index + 1);
  }
  ss.entries[index] = Session::Entry{id, participates};
  ++entries_;
  if (participates) CheckBack(ss, t.seq, id);
  // The first participant after this one may now reach its predecessor.
  for (uint32_t seq = t.seq + 1;; ++seq) {
    const Session::Entry* next = ss.At(seq);
    if (next == nullptr) break;
    if (next->participates) {
      CheckBack(ss, seq, next->id);
      break;
    }
  }
  // Keep only what a future arrival can still need: from the newest participant of the delivered
  // prefix on.
  if (index != ss.prefix) return;
  while (ss.prefix < ss.entries.size() && ss.entries[ss.prefix].id.valid()) {
    if (ss.entries[ss.prefix].participates) {
      ss.anchor = ss.prefix;
      ss.has_anchor = true;
    }
    ++ss.prefix;
  }
  if (ss.has_anchor && ss.anchor > 0) {
    ss.entries.drop_front(ss.anchor);
    ss.base += static_cast<uint32_t>(ss.anchor);
    ss.prefix -= ss.anchor;
    entries_ -= ss.anchor;
    ss.anchor = 0;
  }
}

void SessionChecker::CheckBack(const Session& ss, uint32_t seq, TxnId id) {
  for (uint32_t s = seq; s-- > 0;) {
    const Session::Entry* prev_entry = ss.At(s);
    if (prev_entry == nullptr) return;  // not delivered yet: checked when it arrives
    if (!prev_entry->participates) continue;
    const TxnId prev = prev_entry->id;
    const std::optional<bool> broken = axioms::SessionBroken(ctx_.h(), ctx_.level(), id, prev);
    if (!broken) {
      ++ctx_.stats().snapshot_unjudged;
    } else if (*broken) {
      ctx_.Emit(axioms::ExplainSession(ctx_.h(), ctx_.level(), id, prev));
    }
    return;
  }
}

void SessionChecker::CheckInvariants() const {
  const history::History& h = ctx_.h();
  uint64_t entries = 0;
  for (size_t s = 0; s < sessions_.size(); ++s) {
    const Session& ss = sessions_[s];
    ISOWATCH_CHECK(ss.prefix <= ss.entries.size(), "a session's prefix past its window");
    ISOWATCH_CHECK(ss.prefix == ss.entries.size() || !ss.entries[ss.prefix].id.valid(),
                   "a session's delivered prefix stops short");
    ISOWATCH_CHECK(
        !ss.has_anchor || (ss.anchor == 0 && !ss.entries.empty() && ss.entries[0].participates),
        "a session's anchor is not its window's first participant");
    for (size_t i = 0; i < ss.entries.size(); ++i) {
      const Session::Entry& e = ss.entries[i];
      if (!e.id.valid()) {
        ISOWATCH_CHECK(i >= ss.prefix, "a hole in a session's delivered prefix");
        continue;
      }
      ++entries;
      ISOWATCH_CHECK(e.id.value() < h.size() && h.has_txn(e.id),
                     "a session's window holds a transaction the history does not");
      const history::Transaction& t = h.txn(e.id);
      ISOWATCH_CHECK(t.session.value() == s && t.seq == ss.base + i,
                     "a transaction at another session's position");
      ISOWATCH_CHECK(e.participates == ctx_.Participates(t), "a session entry's role is stale");
      // Once the prefix holds a participant, the window starts at the newest one.
      ISOWATCH_CHECK(!(i > 0 && i < ss.prefix && e.participates) || !ss.has_anchor,
                     "a participant of the delivered prefix after the anchor");
    }
  }
  ISOWATCH_CHECK(entries == entries_, "session entry count out of step");
}

}  // namespace isowatch::engine::internal
