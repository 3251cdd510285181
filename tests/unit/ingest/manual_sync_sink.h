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
#include "isowatch/ingest/txn_fingerprint.h"
#include "isowatch/ingest/validate.h"

namespace isowatch::ingest {

// A BatchSink whose SubmitAsync only takes batches: they become durable when the test calls
// Sync (all taken so far, in order, then their callbacks run) or fail when it calls Fail. It
// records which batches were synced, so a test can check that no ack came before its sync.
// Submit and TrySubmit make a batch durable at once. It refuses, as the daemon refuses history
// conflicts, the accepted transactions whose ids RefuseIds named. Thread-safe.
class ManualSyncSink final : public BatchSink {
 public:
  StreamPosition Position(std::string_view stream) override {
    absl::MutexLock lock(&mu_);
    StreamPosition p;
    if (auto it = durable_.find(std::string(stream)); it != durable_.end()) {
      p.durable_seq = it->second;
    }
    if (auto it = epochs_.find(std::string(stream)); it != epochs_.end()) p.epoch = it->second;
    return p;
  }

  absl::StatusOr<uint64_t> ClaimStream(std::string_view stream) override {
    absl::MutexLock lock(&mu_);
    return ++epochs_[std::string(stream)];
  }

  absl::StatusOr<SinkAck> Submit(ValidatedBatch batch) override {
    absl::MutexLock lock(&mu_);
    std::vector<v1::Refusal> refusals = RefuseLocked(batch);
    return SinkAck{.durable_seq = MakeDurableLocked(batch), .refusals = std::move(refusals)};
  }

  absl::StatusOr<SinkAck> TrySubmit(ValidatedBatch batch) override {
    return Submit(std::move(batch));
  }

  absl::StatusOr<std::vector<v1::Refusal>> SubmitAsync(ValidatedBatch batch,
                                                       DurableCallback on_durable) override {
    absl::MutexLock lock(&mu_);
    std::vector<v1::Refusal> refusals = RefuseLocked(batch);
    taken_.push_back(Taken{
        .batch = std::move(batch), .refusals = refusals, .on_durable = std::move(on_durable)});
    ++taken_total_;
    return refusals;
  }

  // From now on, refuses the accepted transactions with these ids (TxnIdString).
  void RefuseIds(std::set<std::string> ids) {
    absl::MutexLock lock(&mu_);
    refused_ids_ = std::move(ids);
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
    std::vector<std::pair<DurableCallback, SinkAck>> calls;
    {
      absl::MutexLock lock(&mu_);
      for (Taken& t : taken_) {
        calls.emplace_back(
            std::move(t.on_durable),
            SinkAck{.durable_seq = MakeDurableLocked(t.batch), .refusals = std::move(t.refusals)});
      }
      taken_.clear();
    }
    for (auto& [callback, ack] : calls) callback(std::move(ack));
    return calls.size();
  }

  // Fails every batch taken so far with `status`. Returns how many there were.
  size_t Fail(const absl::Status& status) {
    std::vector<DurableCallback> calls;
    {
      absl::MutexLock lock(&mu_);
      for (Taken& t : taken_) calls.push_back(std::move(t.on_durable));
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
  struct Taken {
    ValidatedBatch batch;
    std::vector<v1::Refusal> refusals;
    DurableCallback on_durable;
  };

  // Refuses the accepted transactions named by RefuseIds, and leaves them out of `batch`.
  std::vector<v1::Refusal> RefuseLocked(ValidatedBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<v1::Refusal> refusals;
    std::vector<uint32_t> kept;
    std::vector<uint64_t> fingerprints;
    for (size_t i = 0; i < batch.accepted.size(); ++i) {
      const uint32_t index = batch.accepted[i];
      const std::string id = TxnIdString(batch.batch->txns(static_cast<int>(index)));
      if (refused_ids_.contains(id)) {
        refusals.push_back(MakeRefusal(batch.batch->seq(), index, id, v1::KEY_KIND_CONFLICT,
                                       "refused by the sink"));
        continue;
      }
      kept.push_back(index);
      fingerprints.push_back(batch.fingerprints[i]);
    }
    batch.accepted = std::move(kept);
    batch.fingerprints = std::move(fingerprints);
    return refusals;
  }

  uint64_t MakeDurableLocked(const ValidatedBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint64_t& seq = durable_[batch.batch->stream()];
    seq = batch.batch->seq();
    synced_.insert({batch.batch->stream(), seq});
    durable_batches_.push_back(batch);
    return seq;
  }

  mutable absl::Mutex mu_;
  std::vector<Taken> taken_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> refused_ids_ ABSL_GUARDED_BY(mu_);
  size_t taken_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> durable_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> epochs_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, uint64_t>> synced_ ABSL_GUARDED_BY(mu_);
  std::vector<ValidatedBatch> durable_batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isowatch::ingest
