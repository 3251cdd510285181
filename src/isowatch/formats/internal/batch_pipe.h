// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the readers: a bounded hand-off of reusable batches from one producer thread to one
// consumer thread.

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace isowatch::formats::internal {

// A fixed pool of `Batch` objects passed between a producer and a consumer: the producer takes an
// empty batch, fills it and sends it; the consumer receives it, uses it and gives it back. Batches
// are reused, so whatever capacity they grew stays with them.
//
// Invariants (all under mu_):
//  1. Every batch of the pool is in exactly one place: free_, full_, or held by one side.
//  2. Once closed (the producer is done) Receive hands out what is in full_, then nullptr.
//  3. Once cancelled (the consumer stops early) TakeEmpty returns nullptr, so the producer stops.
//
// Thread-safe: one producer and one consumer. Owns the batches.
template <typename Batch>
class BatchPipe {
 public:
  // `batches`: the pool's size (at least 1).
  explicit BatchPipe(size_t batches) {
    pool_.reserve(batches);
    for (size_t i = 0; i < batches; ++i) {
      pool_.push_back(std::make_unique<Batch>());
      free_.push_back(pool_.back().get());
    }
  }
  BatchPipe(const BatchPipe&) = delete;
  BatchPipe& operator=(const BatchPipe&) = delete;

  // Producer: an empty batch to fill, waiting for one; nullptr once cancelled.
  Batch* TakeEmpty() {
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(this, &BatchPipe::CanTakeEmpty));
    if (cancelled_) return nullptr;
    Batch* b = free_.back();
    free_.pop_back();
    return b;
  }
  // Producer: TakeEmpty without waiting. Returns false if it would wait; else true, with the
  // batch in `*b` (nullptr once cancelled).
  bool TryTakeEmpty(Batch** b) {
    absl::MutexLock l(&mu_);
    if (!CanTakeEmpty()) return false;
    *b = nullptr;
    if (cancelled_) return true;
    *b = free_.back();
    free_.pop_back();
    return true;
  }
  // Producer: hands a filled batch (from TakeEmpty) to the consumer.
  void Send(Batch* b) {
    absl::MutexLock l(&mu_);
    full_.push_back(b);
  }
  // Producer: no more batches will be sent.
  void Close() {
    absl::MutexLock l(&mu_);
    closed_ = true;
  }

  // Consumer: the next batch sent, waiting for one; nullptr once closed and empty.
  Batch* Receive() {
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(this, &BatchPipe::CanReceive));
    if (full_.empty()) return nullptr;
    Batch* b = full_.front();
    full_.pop_front();
    return b;
  }
  // Consumer: gives back a batch from Receive.
  void Release(Batch* b) {
    absl::MutexLock l(&mu_);
    free_.push_back(b);
  }
  // Consumer: wants no more batches; the producer's next TakeEmpty returns nullptr.
  void Cancel() {
    absl::MutexLock l(&mu_);
    cancelled_ = true;
  }

 private:
  bool CanTakeEmpty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || !free_.empty();
  }
  bool CanReceive() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !full_.empty(); }

  std::vector<std::unique_ptr<Batch>> pool_;  // set at construction
  absl::Mutex mu_;
  std::vector<Batch*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Batch*> full_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace isowatch::formats::internal
