// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/internal/batch_queue.h"

#include <algorithm>

#include <fmt/format.h>

namespace isowatch::monitor::internal {

BatchQueue::BatchQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

bool BatchQueue::Full() const { return queue_.size() + reserved_ >= capacity_; }

bool BatchQueue::RoomOrDraining() const { return !Full() || draining_; }

bool BatchQueue::Ready() const {
  if (queue_.empty()) return false;
  return queue_.begin()->first == next_position_ || reserved_ == 0;
}

bool BatchQueue::ReadyOrDraining() const { return Ready() || draining_; }

absl::Status BatchQueue::Reserve(bool wait) {
  absl::MutexLock l(&mu_);
  if (draining_) return absl::UnavailableError("isowatchd is shutting down");
  if (Full()) {
    if (!wait) {
      return absl::ResourceExhaustedError(
          fmt::format("the ingest queue is full ({} batches); retry later", capacity_));
    }
    mu_.Await(absl::Condition(this, &BatchQueue::RoomOrDraining));
    if (draining_) return absl::UnavailableError("isowatchd is shutting down");
  }
  ++reserved_;
  return absl::OkStatus();
}

void BatchQueue::Unreserve() {
  absl::MutexLock l(&mu_);
  --reserved_;
}

void BatchQueue::Publish(size_t slots, std::vector<std::pair<uint64_t, DurableBatch>>& durable) {
  absl::MutexLock l(&mu_);
  reserved_ -= slots;
  for (auto& [position, batch] : durable) queue_.emplace(position, std::move(batch));
  durable.clear();
}

bool BatchQueue::Take(absl::Duration timeout, std::vector<DurableBatch>* out) {
  absl::MutexLock l(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &BatchQueue::ReadyOrDraining), timeout);
  while (Ready()) {
    auto it = queue_.begin();
    next_position_ = it->first + 1;
    out->push_back(std::move(it->second));
    queue_.erase(it);
  }
  return draining_ && queue_.empty() && reserved_ == 0;
}

void BatchQueue::Drain() {
  absl::MutexLock l(&mu_);
  draining_ = true;
}

bool BatchQueue::draining() const {
  absl::MutexLock l(&mu_);
  return draining_;
}

size_t BatchQueue::size() const {
  absl::MutexLock l(&mu_);
  return queue_.size();
}

uint64_t BatchQueue::next_position() const {
  absl::MutexLock l(&mu_);
  return next_position_;
}

void BatchQueue::set_next_position(uint64_t position) {
  absl::MutexLock l(&mu_);
  next_position_ = position;
}

}  // namespace isowatch::monitor::internal
