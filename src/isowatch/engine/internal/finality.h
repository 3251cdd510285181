// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/internal/engine_context.h"
#include "isowatch/history/history.h"

namespace isowatch::engine::internal {

// Invariants:
//  1. final_point() never decreases. After Advance() it is the minimum watermark over the open
//     streams (the highest commit timestamp delivered once every stream is closed, Min while there
//     is none), unless it was already higher.
//  2. A stream with an explicit watermark keeps no arrivals.
//  3. advances() counts the times Advance() raised the final point; a stream's watermark never
//     decreases.

// The final point F (docs/engine.md, "Finality"): the streams, their watermarks (explicit, or
// implicit: a transaction of a stream without watermarks that arrived finality_timeout_ms ago
// lifts the stream's to its commit timestamp), and F, the minimum over the open streams. Every
// verdict of a read at or below F is final. Says nothing about what becomes final: the parts
// that hold provisional state act on each advance.
//
// Once every stream is closed, F is the highest commit timestamp delivered, not Max: every
// transaction delivered is then final (a read's point is at or below its own commit), and a
// stream that opens later still holds F back for what it will deliver above that.
//
// Engine-thread only. Owns the streams and the clock the options do not give.
class Finality {
 public:
  struct Stream {
    std::string name;
    bool closed = false;
    bool has_watermark = false;  // sent an explicit watermark
    history::Timestamp watermark = history::Timestamp::Min();
    // Streams without explicit watermarks: commit timestamps by arrival time; a transaction that
    // arrived finality_timeout_ms ago lifts the implicit watermark to its commit timestamp.
    std::deque<std::pair<int64_t, history::Timestamp>> arrivals;
  };

  explicit Finality(EngineContext& ctx)
      : ctx_(ctx),
        clock_(ctx.options().clock != nullptr ? ctx.options().clock : &common::SystemClock::Get()) {
  }
  Finality(const Finality&) = delete;
  Finality& operator=(const Finality&) = delete;

  history::Timestamp final_point() const { return final_point_; }
  uint64_t advances() const { return advances_; }
  // The final point lowered by `keep` physical units: Max while the final point is Max, Min where
  // it would fall below the first timestamp.
  history::Timestamp BelowFinal(int64_t keep) const;

  StreamId AddStream(std::string name);
  Stream& stream(StreamId id) { return streams_[id]; }
  std::span<const Stream> streams() const { return streams_; }

  // A transaction of `s` arrived: counts it if late (and if below the final point), and queues it
  // for the timeout if `s` sends no watermarks.
  void OnArrival(Stream& s, const history::Transaction& t) {
    if (!t.has_commit) return;
    highest_commit_ = std::max(highest_commit_, t.commit);
    if (s.watermark > history::Timestamp::Min() && t.commit <= s.watermark) {
      ++ctx_.stats().late_arrivals;
    }
    if (t.commit <= final_point_) ++ctx_.stats().below_final_arrivals;
    if (!s.has_watermark) s.arrivals.emplace_back(clock_->NowMs(), t.commit);
  }
  // `s` promises that every transaction with commit <= `watermark` was delivered. Ignored below
  // its previous one.
  void ApplyWatermark(Stream& s, const history::Timestamp& watermark);
  void Close(StreamId id) { streams_[id].closed = true; }
  void CloseAll();
  // Lifts the implicit watermarks whose transactions timed out.
  void Tick();

  // Raises the final point to the minimum watermark over the open streams. Returns whether it
  // moved (then advances() has grown by one).
  bool Advance();

  // RestoreCheckpoint: a stream as it was saved. REQUIRES: nothing delivered yet.
  void RestoreStream(Stream s) { streams_.push_back(std::move(s)); }
  // The highest commit timestamp delivered (Min: none), for checkpoints.
  history::Timestamp highest_commit() const { return highest_commit_; }
  // RestoreCheckpoint: the highest commit timestamp delivered before the checkpoint.
  void RestoreHighestCommit(const history::Timestamp& t) { highest_commit_ = t; }

  void CheckInvariants() const;

 private:
  EngineContext& ctx_;
  const common::Clock* clock_;
  std::vector<Stream> streams_;
  history::Timestamp final_point_ = history::Timestamp::Min();
  history::Timestamp highest_commit_ = history::Timestamp::Min();
  uint64_t advances_ = 0;
  // The target of Advance(): the minimum watermark over the open streams, the highest commit
  // when none is open, Min without streams.
  history::Timestamp Target() const;
};

}  // namespace isowatch::engine::internal
