// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "isowatch/ingest/batch_sink.h"
#include "isowatch/ingest/txn_fingerprint.h"

namespace isowatch::ingest {

// A BatchSink held in memory: every submitted batch is "durable" at once and kept. It can be made
// full: then Submit waits until it is not, and TrySubmit refuses with ResourceExhausted. Its state
// outlives the servers that use it, as a store outlives a daemon's restarts. Thread-safe.
class FakeBatchSink final : public BatchSink {
 public:
  StreamPosition Position(std::string_view stream) override {
    absl::MutexLock lock(&mu_);
    auto it = positions_.find(std::string(stream));
    return it == positions_.end() ? StreamPosition{} : it->second;
  }

  absl::StatusOr<SinkAck> Submit(ValidatedBatch batch) override {
    absl::MutexLock lock(&mu_);
    ++waiting_;
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !full_; };
    mu_.Await(absl::Condition(&room));
    --waiting_;
    return ApplyLocked(std::move(batch));
  }

  absl::StatusOr<SinkAck> TrySubmit(ValidatedBatch batch) override {
    absl::MutexLock lock(&mu_);
    if (full_) {
      ++rejected_;
      return absl::ResourceExhaustedError("the ingest queue is full");
    }
    return ApplyLocked(std::move(batch));
  }

  // The content fingerprint the batch had (and no refusals: this sink keeps none).
  absl::StatusOr<DurableBatch> DurableBatchOf(std::string_view stream, uint64_t seq) override {
    absl::MutexLock lock(&mu_);
    for (const ValidatedBatch& b : batches_) {
      if (b.batch->stream() == stream && b.batch->seq() == seq) {
        return DurableBatch{.content_fingerprint = b.content_fingerprint};
      }
    }
    return DurableBatch{};
  }

  absl::StatusOr<uint64_t> ClaimStream(std::string_view stream) override {
    absl::MutexLock lock(&mu_);
    return ++positions_[std::string(stream)].epoch;
  }

  void SetFull(bool full) {
    absl::MutexLock lock(&mu_);
    full_ = full;
  }

  // Waits until `n` Submit calls are waiting for room, or `timeout` passes; true in the first case.
  bool AwaitWaiting(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiting_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

  // Waits until the stream's durable seq reaches `seq`, or `timeout` passes.
  bool AwaitDurable(const std::string& stream, uint64_t seq, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, &stream, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = positions_.find(stream);
      return it != positions_.end() && it->second.durable_seq >= seq;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

  uint64_t rejected() const {
    absl::MutexLock lock(&mu_);
    return rejected_;
  }

  // Every batch applied, in order.
  std::vector<ValidatedBatch> batches() const {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

  // How many times each (stream, seq) was applied.
  std::map<std::pair<std::string, uint64_t>, int> applied_counts() const {
    absl::MutexLock lock(&mu_);
    std::map<std::pair<std::string, uint64_t>, int> counts;
    for (const ValidatedBatch& b : batches_) ++counts[{b.batch->stream(), b.batch->seq()}];
    return counts;
  }

  // How many times each accepted transaction id was applied.
  std::map<std::string, int> txn_counts() const {
    absl::MutexLock lock(&mu_);
    std::map<std::string, int> counts;
    for (const ValidatedBatch& b : batches_) {
      for (uint32_t i : b.accepted) ++counts[TxnIdString(b.batch->txns(static_cast<int>(i)))];
    }
    return counts;
  }

 private:
  SinkAck ApplyLocked(ValidatedBatch batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    StreamPosition& p = positions_[batch.batch->stream()];
    p.durable_seq = batch.batch->seq();
    if (batch.batch->has_watermark()) {
      p.watermark = history::Timestamp{batch.batch->watermark().physical(),
                                       batch.batch->watermark().logical()};
    }
    if (batch.batch->end_of_stream()) p.closed = true;
    batches_.push_back(std::move(batch));
    return SinkAck{.durable_seq = p.durable_seq};
  }

  mutable absl::Mutex mu_;
  bool full_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, StreamPosition> positions_ ABSL_GUARDED_BY(mu_);
  std::vector<ValidatedBatch> batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isowatch::ingest
