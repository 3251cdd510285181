// SPDX-License-Identifier: Apache-2.0
#include "isowatch/collect/replay.h"

#include <chrono>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/native.h"
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

}  // namespace

absl::StatusOr<std::vector<v1::IngestBatch>> BuildReplayBatches(const history::History& h,
                                                                const ReplayOptions& options) {
  const engine::DeliverySchedule schedule = engine::BuildDeliverySchedule(h, options.delivery);
  std::vector<v1::IngestBatch> out;
  out.reserve(schedule.batches.size() + 1);
  v1::Header header;
  RETURN_IF_ERROR(formats::EncodeHeader(h, &header));
  (*header.mutable_metadata())["data_model"] = ModelName(h.data_model());
  if (options.relabel.key_offset != 0) {
    for (auto& r : *header.mutable_initial()->mutable_registers()) {
      RelabelDatum(r.mutable_key(), options.relabel.key_offset);
    }
    for (auto& l : *header.mutable_initial()->mutable_lists()) {
      RelabelDatum(l.mutable_key(), options.relabel.key_offset);
    }
  }
  // Until the first collected transaction has arrived, the schedule has no watermark to give;
  // the replay then promises what it can: nothing commits at or before the timestamp just below
  // the earliest commit of the file. So the stream is a stream with watermarks from its first
  // batch on, and none of its verdicts is finalised by the daemon's timeout.
  std::optional<history::Timestamp> floor;
  for (const history::Transaction& t : h.txns()) {
    if (t.has_commit && (!floor || t.commit < *floor)) floor = t.commit;
  }
  if (floor) {
    floor = floor->logical > std::numeric_limits<int64_t>::min()
                ? history::Timestamp{floor->physical, floor->logical - 1}
                : history::Timestamp{floor->physical - 1, std::numeric_limits<int64_t>::max()};
  }
  for (const engine::DeliveryBatch& b : schedule.batches) {
    v1::IngestBatch batch;
    batch.set_stream(options.stream);
    if (out.empty()) *batch.mutable_header() = header;
    for (TxnId id : schedule.txns(b)) {
      v1::Transaction* t = batch.add_txns();
      RETURN_IF_ERROR(formats::EncodeTxn(h, id, t));
      RelabelTxn(t, options.relabel);
    }
    std::optional<history::Timestamp> watermark = b.watermark;
    if (!watermark && options.delivery.watermarks) watermark = floor;
    if (watermark) {
      batch.mutable_watermark()->set_physical(watermark->physical + options.relabel.time_offset);
      batch.mutable_watermark()->set_logical(watermark->logical);
    }
    out.push_back(std::move(batch));
  }
  if (out.empty()) {
    v1::IngestBatch batch;
    batch.set_stream(options.stream);
    *batch.mutable_header() = header;
    out.push_back(std::move(batch));
  }
  return out;
}

absl::StatusOr<ReplayResult> Replay(const history::History& h, const ReplayOptions& options,
                                    const std::function<void(uint64_t)>& progress) {
  ASSIGN_OR_RETURN(std::vector<v1::IngestBatch> batches, BuildReplayBatches(h, options));
  ingest::ClientOptions client_options;
  client_options.max_in_flight = options.max_in_flight;
  ingest::IngestClient client(options.target, options.stream, client_options);
  ReplayResult result;
  const auto start = std::chrono::steady_clock::now();
  for (v1::IngestBatch& batch : batches) {
    if (options.cancel != nullptr && options.cancel->load()) break;
    const auto n = static_cast<uint64_t>(batch.txns_size());
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
  if (options.end_of_stream) {
    ASSIGN_OR_RETURN(result.refusals, client.Close());
  } else {
    result.refusals = client.TakeRefusals();
  }
  result.reconnects = client.reconnects();
  result.duplicates = client.duplicates();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace isowatch::collect
