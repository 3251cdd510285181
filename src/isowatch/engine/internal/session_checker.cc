// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/session_checker.h"

#include <optional>

#include "isowatch/checkers/chronos/internal/explain.h"
#include "isowatch/checkers/chronos/internal/snapshot_rules.h"

namespace isowatch::engine::internal {

void SessionChecker::OnArrival(TxnId id, const history::Transaction& t) {
  Session& ss = sessions_[t.session.value()];
  if (t.seq < ss.base) return;  // cannot happen: positions below base were all delivered
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
    const std::optional<bool> broken =
        checkers::internal::SessionBroken(ctx_.h(), ctx_.level(), id, prev);
    if (!broken) {
      ++ctx_.stats().snapshot_unjudged;
    } else if (*broken) {
      ctx_.Emit(checkers::internal::ExplainSession(ctx_.h(), ctx_.level(), id, prev));
    }
    return;
  }
}

}  // namespace isowatch::engine::internal
