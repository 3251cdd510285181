// SPDX-License-Identifier: Apache-2.0
#include "isowatch/collect/replay.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/native.h"
#include "isowatch/ingest/arena_batch.h"
#include "isowatch/ingest/client.h"

namespace isowatch::collect {
namespace {

const char* ModelName(history::DataModel model) {
  switch (model) {
    case history::DataModel::kKeyValue:
      return "kv";
    case history::DataModel::kList:
      return "list";
    case history::DataModel::kMixed:
      break;
  }
  return "mixed";
}

void RelabelDatum(v1::Datum* d, int64_t key_offset) {
  if (d->kind_case() == v1::Datum::kInt) d->set_int_(d->int_() + key_offset);
}

void RelabelTxn(v1::Transaction* t, const Relabel& r) {
  if (!r.id_prefix.empty()) {
    std::string id = t->id_case() == v1::Transaction::kIdInt ? fmt::format("{}", t->id_int())
                                                             : std::string(t->id_str());
    t->set_id_str(r.id_prefix + id);
    std::string session = t->session_case() == v1::Transaction::kSessionInt
                              ? fmt::format("{}", t->session_int())
                              : std::string(t->session_str());
    t->set_session_str(r.id_prefix + session);
  }
  if (r.time_offset != 0) {
    if (t->has_start()) t->mutable_start()->set_physical(t->start().physical() + r.time_offset);
    if (t->has_commit()) t->mutable_commit()->set_physical(t->commit().physical() + r.time_offset);
  }
  if (r.key_offset != 0) {
    for (v1::Operation& op : *t->mutable_ops()) RelabelDatum(op.mutable_key(), r.key_offset);
  }
}

// Builds the batches of a replay one at a time, so that a long history is never held twice (as a
// history and as messages) and each batch can be built on its own arena.
class ReplayBatchBuilder {
 public:
  ReplayBatchBuilder(const history::History& h, const ReplayOptions& options)
      : h_(h), options_(options), schedule_(sim::BuildDeliverySchedule(h, options.delivery)) {}

  absl::Status Init() {
    RETURN_IF_ERROR(formats::EncodeHeader(h_, &header_));
    (*header_.mutable_metadata())["data_model"] = ModelName(h_.data_model());
    if (options_.relabel.key_offset != 0) {
      for (auto& r : *header_.mutable_initial()->mutable_registers()) {
        RelabelDatum(r.mutable_key(), options_.relabel.key_offset);
      }
      for (auto& l : *header_.mutable_initial()->mutable_lists()) {
        RelabelDatum(l.mutable_key(), options_.relabel.key_offset);
      }
    }
    // Until the first collected transaction has arrived, the schedule has no watermark to give;
    // the replay then promises what it can: nothing commits at or before the timestamp just
    // below the earliest commit of the file. So the stream is a stream with watermarks from its
    // first batch on, and none of its verdicts is finalised by the daemon's timeout.
    for (const history::Transaction& t : h_.txns()) {
      if (t.has_commit && (!floor_ || t.commit < *floor_)) floor_ = t.commit;
    }
    if (floor_) {
      floor_ = floor_->logical > std::numeric_limits<int64_t>::min()
                   ? history::Timestamp{floor_->physical, floor_->logical - 1}
                   : history::Timestamp{floor_->physical - 1, std::numeric_limits<int64_t>::max()};
    }
    return absl::OkStatus();
  }

  // At least one: an empty history is sent as one batch with the header.
  size_t size() const { return std::max<size_t>(schedule_.batches.size(), 1); }

  // Fills `batch` (empty) with batch `i` < size().
  absl::Status Build(size_t i, v1::IngestBatch* batch) const {
    batch->set_stream(options_.stream);
    if (i == 0) *batch->mutable_header() = header_;
    if (schedule_.batches.empty()) return absl::OkStatus();
    const sim::DeliveryBatch& b = schedule_.batches[i];
    const auto txns = schedule_.txns(b);
    batch->mutable_txns()->Reserve(static_cast<int>(txns.size()));
    for (TxnId id : txns) {
      v1::Transaction* t = batch->add_txns();
      RETURN_IF_ERROR(formats::EncodeTxn(h_, id, t));
      RelabelTxn(t, options_.relabel);
    }
    std::optional<history::Timestamp> watermark = b.watermark;
    if (!watermark && options_.delivery.watermarks) watermark = floor_;
    if (watermark) {
      batch->mutable_watermark()->set_physical(watermark->physical + options_.relabel.time_offset);
      batch->mutable_watermark()->set_logical(watermark->logical);
    }
    return absl::OkStatus();
  }

 private:
  const history::History& h_;
  const ReplayOptions& options_;
  const sim::DeliverySchedule schedule_;
  v1::Header header_;
  std::optional<history::Timestamp> floor_;
};

}  // namespace

absl::StatusOr<std::vector<v1::IngestBatch>> BuildReplayBatches(const history::History& h,
                                                                const ReplayOptions& options) {
  ReplayBatchBuilder builder(h, options);
  RETURN_IF_ERROR(builder.Init());
  std::vector<v1::IngestBatch> out(builder.size());
  for (size_t i = 0; i < out.size(); ++i) RETURN_IF_ERROR(builder.Build(i, &out[i]));
  return out;
}

absl::StatusOr<ReplayResult> Replay(const history::History& h, const ReplayOptions& options,
                                    const std::function<void(uint64_t)>& progress) {
  ReplayBatchBuilder builder(h, options);
  RETURN_IF_ERROR(builder.Init());
  ingest::ClientOptions client_options;
  client_options.max_in_flight = options.max_in_flight;
  client_options.connect_timeout = options.connect_timeout;
  client_options.auth = options.auth;
  ingest::IngestClient client(options.target, options.stream, client_options);
  ReplayResult result;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < builder.size(); ++i) {
    if (options.cancel != nullptr && options.cancel->load()) {
      result.interrupted = true;
      break;
    }
    std::shared_ptr<v1::IngestBatch> batch = ingest::NewArenaBatch();
    RETURN_IF_ERROR(builder.Build(i, batch.get()));
    const auto n = static_cast<uint64_t>(batch->txns_size());
    RETURN_IF_ERROR(client.Send(std::move(batch)));
    result.transactions += n;
    ++result.batches;
    if (progress) progress(result.transactions);
    if (options.send_rate_tps > 0) {
      const auto due =
          start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(static_cast<double>(result.transactions) /
                                                    options.send_rate_tps));
      std::this_thread::sleep_until(due);
    }
  }
  if (options.end_of_stream && !result.interrupted) {
    ASSIGN_OR_RETURN(result.refusals, client.Close());
  } else {
    ASSIGN_OR_RETURN(result.refusals, client.Detach());
  }
  result.durable_seq = client.durable_seq();
  result.reconnects = client.reconnects();
  result.duplicates = client.duplicates();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace isowatch::collect
