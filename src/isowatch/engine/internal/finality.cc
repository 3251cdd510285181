// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/internal/finality.h"

#include <algorithm>
#include <limits>

#include "isowatch/common/check.h"

namespace isowatch::engine::internal {

using history::Timestamp;

Timestamp Finality::BelowFinal(int64_t keep) const {
  if (final_point_ == Timestamp::Max()) return Timestamp::Max();
  if (final_point_.physical < std::numeric_limits<int64_t>::min() + keep) return Timestamp::Min();
  return Timestamp{final_point_.physical - keep, std::numeric_limits<int64_t>::min()};
}

StreamId Finality::AddStream(std::string name) {
  streams_.push_back(Stream{.name = std::move(name)});
  return static_cast<StreamId>(streams_.size() - 1);
}

void Finality::ApplyWatermark(Stream& s, const Timestamp& watermark) {
  if (s.has_watermark && !(watermark > s.watermark)) return;
  s.has_watermark = true;
  s.watermark = watermark;
  s.arrivals.clear();
}

void Finality::CloseAll() {
  for (Stream& s : streams_) s.closed = true;
}

void Finality::Tick() {
  const int64_t now = clock_->NowMs();
  for (Stream& s : streams_) {
    if (s.has_watermark) continue;
    while (!s.arrivals.empty() &&
           s.arrivals.front().first + ctx_.options().finality_timeout_ms <= now) {
      s.watermark = std::max(s.watermark, s.arrivals.front().second);
      s.arrivals.pop_front();
    }
  }
}

Timestamp Finality::Target() const {
  Timestamp f = Timestamp::Max();
  bool open = false;
  for (const Stream& s : streams_) {
    if (s.closed) continue;
    open = true;
    f = std::min(f, s.watermark);
  }
  // Not Max: a stream that opens later must still hold back what it delivers.
  return open ? f : highest_commit_;
}

bool Finality::Advance() {
  const Timestamp f = Target();
  if (f <= final_point_) return false;
  final_point_ = f;
  ++advances_;
  return true;
}

void Finality::CheckInvariants() const {
  for (const Stream& s : streams_) {
    ISOWATCH_CHECK(!s.has_watermark || s.arrivals.empty(),
                   "a stream with explicit watermarks keeps arrivals");
  }
  ISOWATCH_CHECK(final_point_ >= Target(), "the final point is below the open streams' watermarks");
  ISOWATCH_CHECK(final_point_ == Timestamp::Min() || advances_ > 0,
                 "the final point moved without an advance");
}

}  // namespace isowatch::engine::internal
