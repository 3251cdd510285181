// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/durable_log.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/synchronization/notification.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::monitor {

DurableLog::DurableLog(store::Store* store, server::DaemonMetrics* metrics,
                       internal::BatchQueue* queue, const common::Clock* clock,
                       history::DataModel default_model)
    : store_(store), metrics_(metrics), queue_(queue), clock_(clock), conflicts_(default_model) {}

DurableLog::~DurableLog() { Stop(); }

void DurableLog::RestoreConflicts(const history::HistoryBuilder& builder) {
  absl::MutexLock order(&append_mu_);
  conflicts_.StartFrom(builder);
}

void DurableLog::RedecideConflicts(const v1::IngestBatch& logged, std::span<const uint32_t> all) {
  absl::MutexLock order(&append_mu_);
  conflicts_.Decide(logged, all);
}

void DurableLog::Start() {
  syncer_ = std::thread([this] { RunSyncer(); });
}

void DurableLog::Stop() {
  {
    absl::MutexLock l(&sync_mu_);
    stopping_ = true;
  }
  if (syncer_.joinable()) syncer_.join();
}

ingest::StreamPosition DurableLog::Position(std::string_view stream) const {
  ingest::StreamPosition p;
  // A stream may be claimed and have no record yet (nothing written).
  if (absl::StatusOr<uint64_t> epoch = store_->StreamEpoch(stream); epoch.ok()) {
    p.epoch = *epoch;
  } else {
    spdlog::error("{}", common::StdView(epoch.status().message()));
  }
  absl::StatusOr<store::StreamRecord> r = store_->GetStream(stream);
  if (!r.ok()) return p;
  p.durable_seq = r->durable_seq;
  p.watermark = r->watermark;
  p.closed = r->closed;
  return p;
}

absl::StatusOr<ingest::DurableBatch> DurableLog::DurableBatchOf(std::string_view stream,
                                                                uint64_t seq) const {
  ASSIGN_OR_RETURN(const std::string bytes, store_->BatchMemo(stream, seq));
  v1::BatchMemo memo;
  if (!memo.ParseFromString(bytes)) {
    return absl::DataLossError(
        fmt::format("the memo kept with batch {} of stream \"{}\" does not decode", seq, stream));
  }
  ingest::DurableBatch out;
  out.refusals.assign(memo.refusals().begin(), memo.refusals().end());
  if (memo.has_content_fingerprint()) out.content_fingerprint = memo.content_fingerprint();
  return out;
}

absl::StatusOr<uint64_t> DurableLog::ClaimStream(std::string_view stream) {
  return store_->ClaimStream(stream);
}

absl::StatusOr<ingest::SinkAck> DurableLog::AppendAndWait(ingest::ValidatedBatch batch, bool wait) {
  // Written by the syncer before it notifies, read here after: the notification orders them.
  struct Result {
    absl::Notification done;
    absl::StatusOr<ingest::SinkAck> durable;
  };
  auto result = std::make_shared<Result>();
  RETURN_IF_ERROR(Append(std::move(batch), wait, [result](absl::StatusOr<ingest::SinkAck> durable) {
                    result->durable = std::move(durable);
                    result->done.Notify();
                  }).status());
  result->done.WaitForNotification();
  return result->durable;
}

absl::StatusOr<std::vector<v1::Refusal>> DurableLog::Append(
    ingest::ValidatedBatch vb, bool wait, ingest::BatchSink::DurableCallback on_durable) {
  const int64_t started_us = clock_->NowMicros();
  RETURN_IF_ERROR(queue_->Reserve(wait));
  // From here to the hand-over, the order of the log is fixed: batches decide their history
  // conflicts in the order in which they are appended, which is the order the live history
  // applies them in.
  absl::MutexLock order(&append_mu_);
  const v1::IngestBatch& in = *vb.batch;
  ingest::ConflictRegistry::Decision decision = conflicts_.Decide(in, vb.accepted);
  // What the log keeps: the transactions kept with the batch's header, watermark and end.
  // When every transaction is kept that is the batch itself, and the bytes the collector sent
  // are kept as they are (when the service has them); else the batch is encoded again.
  std::shared_ptr<const v1::IngestBatch> logged;
  std::string bytes;
  if (!vb.whole_batch_refused && decision.kept.size() == static_cast<size_t>(in.txns_size())) {
    bytes = vb.wire.empty() ? in.SerializeAsString() : std::move(vb.wire);
    logged = std::move(vb.batch);
  } else {
    auto filtered = std::make_shared<v1::IngestBatch>();
    filtered->set_stream(in.stream());
    filtered->set_seq(in.seq());
    if (in.has_header()) *filtered->mutable_header() = in.header();
    if (in.has_watermark()) *filtered->mutable_watermark() = in.watermark();
    filtered->set_end_of_stream(in.end_of_stream());
    if (!vb.whole_batch_refused) {
      for (uint32_t index : decision.kept) {
        if (index < static_cast<uint32_t>(in.txns_size())) {
          *filtered->add_txns() = in.txns(static_cast<int>(index));
        }
      }
    }
    bytes = filtered->SerializeAsString();
    logged = std::move(filtered);
  }
  std::optional<history::Timestamp> watermark;
  if (logged->has_watermark()) {
    watermark = history::Timestamp{logged->watermark().physical(), logged->watermark().logical()};
  }
  // The ack's refusals and the batch's content, kept with it so that the ack of the batch sent
  // again repeats them, and another batch under its (stream, seq) is told apart.
  v1::BatchMemo memo;
  for (v1::Refusal& r : ingest::MergeRefusals(vb.refusals, decision.refusals)) {
    *memo.add_refusals() = std::move(r);
  }
  memo.set_content_fingerprint(vb.content_fingerprint);
  const std::string memo_bytes = memo.SerializeAsString();
  // Unsynced: the syncer makes it durable together with whatever else was appended meanwhile.
  absl::StatusOr<uint64_t> position =
      store_->AppendBatch(logged->stream(), logged->seq(), watermark, logged->end_of_stream(),
                          bytes, /*sync=*/false, memo_bytes);
  if (!position.ok()) {
    conflicts_.Undo();
    queue_->Unreserve();
    return position.status();
  }
  {
    absl::MutexLock l(&sync_mu_);
    const uint64_t seq = logged->seq();
    unsynced_.push_back(
        Unsynced{.position = *position,
                 .durable = internal::DurableBatch{.batch = std::move(logged), .received_ms = 0},
                 .seq = seq,
                 .refusals = decision.refusals,
                 .on_durable = std::move(on_durable),
                 .started_us = started_us});
  }
  return std::move(decision.refusals);
}

bool DurableLog::HasWorkOrStopping() const { return !unsynced_.empty() || stopping_; }

void DurableLog::RunSyncer() {
  std::vector<Unsynced> work;
  std::vector<std::pair<uint64_t, internal::DurableBatch>> durable;
  while (true) {
    {
      absl::MutexLock l(&sync_mu_);
      sync_mu_.Await(absl::Condition(this, &DurableLog::HasWorkOrStopping));
      if (unsynced_.empty()) break;
      work.swap(unsynced_);
    }
    // Covers every batch of `work`: each was appended before it was handed over.
    const absl::Status synced = store_->SyncLog();
    if (!synced.ok()) {
      // The conflict registry keeps what it decided for these batches: the store now refuses
      // every append, and the restart that follows rebuilds the registry from the log as it is.
      spdlog::error("syncing the ingest log failed: {}", common::StdView(synced.message()));
    } else {
      const int64_t now_ms = clock_->NowUnixMs();
      for (Unsynced& u : work) {
        u.durable.received_ms = now_ms;
        durable.emplace_back(u.position, std::move(u.durable));
      }
    }
    queue_->Publish(work.size(), durable);
    const int64_t done_us = clock_->NowMicros();
    for (Unsynced& u : work) {
      if (synced.ok()) {
        metrics_->ingest_batch_latency().Observe(static_cast<double>(done_us - u.started_us) / 1e6);
        u.on_durable(ingest::SinkAck{.durable_seq = u.seq, .refusals = std::move(u.refusals)});
      } else {
        u.on_durable(synced);
      }
    }
    work.clear();
  }
}

}  // namespace isowatch::monitor
