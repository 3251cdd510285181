// SPDX-License-Identifier: Apache-2.0
// The store's checkpoint (store.h, PutCheckpoint and GetCheckpoint): a blob stored in chunks with
// its checksum, in the write that truncates the log it covers.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <xxhash.h>

#include "fmt/format.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "rocksdb/snapshot.h"
#include "rocksdb/write_batch.h"

#include "isowatch/common/status_macros.h"
#include "isowatch/rocks/rocksdb_status.h"
#include "isowatch/store/internal/codec.h"
#include "isowatch/store/internal/database.h"
#include "isowatch/store/store.h"

namespace isowatch::store {
namespace {

using internal::kCheckpointKey;
using internal::ToSlice;
using internal::ToView;
using rocks::FromRocksStatus;

}  // namespace

absl::Status Store::PutCheckpoint(uint64_t log_position, std::string_view blob) {
  absl::MutexLock truncate_lock(&truncate_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (log_position < first_position_ || log_position > next_position_) {
      return absl::InvalidArgumentError(
          fmt::format("a checkpoint at log position {} is outside the log's positions [{}, {}]",
                      log_position, first_position_, next_position_));
    }
  }
  const internal::CheckpointMeta meta{
      .generation = checkpoint_generation_ + 1,
      .log_position = log_position,
      .size = blob.size(),
      .chunks =
          static_cast<uint32_t>((blob.size() + kCheckpointChunkBytes - 1) / kCheckpointChunkBytes),
      .checksum = XXH3_64bits(blob.data(), blob.size())};
  rocksdb::WriteBatch batch;
  // Every earlier generation's chunks go (there is at most one).
  RETURN_IF_ERROR(FromRocksStatus(
      batch.DeleteRange(handles_->checkpoint, internal::EncodeCheckpointChunkKey(0, 0),
                        internal::EncodeCheckpointChunkKey(meta.generation, 0)),
      "encoding a checkpoint"));
  for (uint32_t i = 0; i < meta.chunks; ++i) {
    const std::string_view chunk = blob.substr(i * kCheckpointChunkBytes, kCheckpointChunkBytes);
    RETURN_IF_ERROR(FromRocksStatus(
        batch.Put(handles_->checkpoint, internal::EncodeCheckpointChunkKey(meta.generation, i),
                  ToSlice(chunk)),
        "encoding a checkpoint"));
  }
  RETURN_IF_ERROR(FromRocksStatus(
      batch.Put(handles_->meta, ToSlice(kCheckpointKey), internal::EncodeCheckpointMeta(meta)),
      "encoding a checkpoint"));
  // The online violations summarised before it are final for good: the engine restored from it
  // does not find them again (invariant 5).
  RETURN_IF_ERROR(DeleteSummaryDeltas(batch));
  RETURN_IF_ERROR(WriteTruncation(
      batch, log_position,
      fmt::format("storing checkpoint {} at log position {}", meta.generation, log_position)));
  checkpoint_generation_ = meta.generation;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<CheckpointRecord>> Store::GetCheckpoint() const {
  // One consistent view: a checkpoint stored meanwhile deletes this one's chunks.
  rocksdb::ManagedSnapshot snapshot(handles_->db.get());
  rocksdb::ReadOptions read_options;
  read_options.snapshot = snapshot.snapshot();
  std::string value;
  const rocksdb::Status s =
      handles_->db->Get(read_options, handles_->meta, ToSlice(kCheckpointKey), &value);
  if (s.IsNotFound()) return std::nullopt;
  RETURN_IF_ERROR(FromRocksStatus(s, "reading the checkpoint record"));
  ASSIGN_OR_RETURN(const internal::CheckpointMeta meta, internal::DecodeCheckpointMeta(value));
  const std::string label = fmt::format("checkpoint {}", meta.generation);
  if (meta.chunks != (meta.size + kCheckpointChunkBytes - 1) / kCheckpointChunkBytes) {
    return absl::DataLossError(
        fmt::format("{}: {} chunks cannot hold {} bytes", label, meta.chunks, meta.size));
  }
  CheckpointRecord record{.generation = meta.generation, .log_position = meta.log_position};
  record.blob.reserve(meta.size);
  std::unique_ptr<rocksdb::Iterator> it(
      handles_->db->NewIterator(read_options, handles_->checkpoint));
  it->Seek(internal::EncodeCheckpointChunkKey(meta.generation, 0));
  for (uint32_t i = 0; i < meta.chunks; ++i, it->Next()) {
    const uint64_t expected =
        std::min<uint64_t>(kCheckpointChunkBytes, meta.size - record.blob.size());
    if (!it->Valid() ||
        ToView(it->key()) != internal::EncodeCheckpointChunkKey(meta.generation, i) ||
        it->value().size() != expected) {
      RETURN_IF_ERROR(FromRocksStatus(it->status(), fmt::format("reading {}", label)));
      return absl::DataLossError(fmt::format("{}: chunk {} of {} is missing or not {} bytes", label,
                                             i, meta.chunks, expected));
    }
    record.blob.append(ToView(it->value()));
  }
  if (XXH3_64bits(record.blob.data(), record.blob.size()) != meta.checksum) {
    return absl::DataLossError(
        fmt::format("{}: the checksum does not match its {} bytes", label, meta.size));
  }
  return record;
}

}  // namespace isowatch::store
