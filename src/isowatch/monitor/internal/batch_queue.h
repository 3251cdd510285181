// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "isowatch/v1/ingest.pb.h"

namespace isowatch::monitor::internal {

// A batch made durable, on its way to the engine thread.
struct DurableBatch {
  // Every transaction of it is to be applied. Shared with the ingest service's parse (arena).
  std::shared_ptr<const v1::IngestBatch> batch;
  // Wall-clock time (Unix milliseconds) it became durable: its transactions' arrival.
  int64_t received_ms = 0;
};

// The bounded hand-off from the ingest threads, through the log, to the engine thread. An ingest
// thread reserves a slot before it appends its batch to the log; the syncer frees the slot and
// queues the batch by its log position once it is durable; the engine thread takes the batches
// in log order.
//
// Invariants (all under mu_):
//  1. Reserve never lets size() + reserved_ exceed the capacity: past it, a Reserve waits for
//     room, or fails without `wait`.
//  2. Take hands batches out in increasing log position; next_position_ is one past the last
//     position handed out (or the position recovery ended at).
//  3. The lowest queued batch, at position p, is ready when p == next_position_, or when no slot
//     is reserved: a gap that no reserved batch can fill is a position the store gave out and did
//     not write (a failed append), skipped rather than waited for.
//  4. Once draining, Reserve fails with Unavailable, and Take reports the end only when nothing
//     is queued or reserved: no batch that was given a slot is lost.
//
// Thread-safe. Holds the batches until the engine thread takes them.
class BatchQueue {
 public:
  // `capacity`: the most batches reserved and queued at once (at least 1).
  explicit BatchQueue(size_t capacity);
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Takes a slot for a batch about to be appended to the log, waiting for room when `wait`.
  // Errors: Unavailable (draining), ResourceExhausted (full, and not `wait`).
  absl::Status Reserve(bool wait);
  // Gives back a slot whose batch was not appended.
  void Unreserve();
  // Gives back `slots` slots, the batches of which were synced (or failed to be), and queues
  // `durable`, each at its log position (at most `slots` of them). Leaves `durable` empty.
  void Publish(size_t slots, std::vector<std::pair<uint64_t, DurableBatch>>& durable);

  // Waits until a batch is ready (invariant 3), the queue drains, or `timeout` passes, then moves
  // every ready batch to `out` in log order. Returns true when draining with nothing left,
  // queued or reserved: the caller's last round. Called by one thread (the engine thread).
  bool Take(absl::Duration timeout, std::vector<DurableBatch>* out);
  // Refuses reservations from now on (invariant 4) and wakes whoever waits. Idempotent.
  void Drain();

  bool draining() const;
  // Batches queued: durable and not yet taken.
  size_t size() const;
  // The next log position to apply: every batch below it has been taken.
  uint64_t next_position() const;
  // After recovery: the log below `position` has been applied.
  void set_next_position(uint64_t position);

 private:
  bool Full() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool RoomOrDraining() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool Ready() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool ReadyOrDraining() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, DurableBatch> queue_ ABSL_GUARDED_BY(mu_);  // by log position
  // Slots taken by batches being appended or waiting for their sync.
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_position_ ABSL_GUARDED_BY(mu_) = 1;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace isowatch::monitor::internal
