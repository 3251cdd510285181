// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "isowatch/ingest/batch_sink.h"

namespace isowatch::ingest {

// A BatchSink whose SubmitAsync only takes batches: they become durable when the test calls
// Sync (all taken so far, in order, then their callbacks run) or fail when it calls Fail. It
// records which batches were synced, so a test can check that no ack came before its sync.
// Submit and TrySubmit make a batch durable at once. Thread-safe.
class ManualSyncSink final : public BatchSink {
 public:
  StreamPosition Position(std::string_view stream) override {
    absl::MutexLock lock(&mu_);
    auto it = durable_.find(std::string(stream));
    return it == durable_.end() ? StreamPosition{} : StreamPosition{.durable_seq = it->second};
  }

  absl::StatusOr<uint64_t> Submit(ValidatedBatch batch) override {
    absl::MutexLock lock(&mu_);
    return MakeDurableLocked(batch);
  }

  absl::StatusOr<uint64_t> TrySubmit(ValidatedBatch batch) override {
    return Submit(std::move(batch));
  }

  absl::Status SubmitAsync(ValidatedBatch batch, DurableCallback on_durable) override {
    absl::MutexLock lock(&mu_);
    taken_.emplace_back(std::move(batch), std::move(on_durable));
    ++taken_total_;
    return absl::OkStatus();
  }

  // Waits until `n` batches in all were taken by SubmitAsync, or `timeout` passes.
  bool AwaitTaken(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return taken_total_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

  // Makes every batch taken so far durable, in order, then calls their callbacks. Returns how
  // many there were.
  size_t Sync() {
    std::vector<std::pair<DurableCallback, uint64_t>> calls;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [batch, callback] : taken_) {
        calls.emplace_back(std::move(callback), MakeDurableLocked(batch));
      }
      taken_.clear();
    }
    for (auto& [callback, durable] : calls) callback(durable);
    return calls.size();
  }

  // Fails every batch taken so far with `status`. Returns how many there were.
  size_t Fail(const absl::Status& status) {
    std::vector<DurableCallback> calls;
    {
      absl::MutexLock lock(&mu_);
      for (auto& entry : taken_) calls.push_back(std::move(entry.second));
      taken_.clear();
    }
    for (DurableCallback& callback : calls) callback(status);
    return calls.size();
  }

  bool IsDurable(const std::string& stream, uint64_t seq) const {
    absl::MutexLock lock(&mu_);
    return synced_.contains({stream, seq});
  }

  // Every batch made durable, in order.
  std::vector<ValidatedBatch> durable_batches() const {
    absl::MutexLock lock(&mu_);
    return durable_batches_;
  }

 private:
  uint64_t MakeDurableLocked(const ValidatedBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint64_t& seq = durable_[batch.batch->stream()];
    seq = batch.batch->seq();
    synced_.insert({batch.batch->stream(), seq});
    durable_batches_.push_back(batch);
    return seq;
  }

  mutable absl::Mutex mu_;
  std::vector<std::pair<ValidatedBatch, DurableCallback>> taken_ ABSL_GUARDED_BY(mu_);
  size_t taken_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> durable_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, uint64_t>> synced_ ABSL_GUARDED_BY(mu_);
  std::vector<ValidatedBatch> durable_batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isowatch::ingest
