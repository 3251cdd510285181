// SPDX-License-Identifier: Apache-2.0
#include "isowatch/store/store.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "spdlog/spdlog.h"

#include "isowatch/common/status_macros.h"
#include "isowatch/rocks/rocksdb_memory.h"
#include "isowatch/rocks/rocksdb_status.h"
#include "isowatch/store/internal/codec.h"
#include "isowatch/store/internal/database.h"

namespace isowatch::store {
namespace {

using internal::DecodeNumberKey;
using internal::EncodeNumberKey;
using internal::kCheckpointKey;
using internal::kCounterTotalsKey;
using internal::kLogStartKey;
using internal::kWindowsDoneKey;
using internal::ToAbsl;
using internal::ToSlice;
using internal::ToView;
using rocks::FromRocksStatus;
using rocks::RocksDbMemory;

std::string StreamLabel(std::string_view name) { return fmt::format("stream \"{}\"", name); }

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir, StoreOptions options) {
  auto handles = std::make_unique<Handles>();
  RETURN_IF_ERROR(internal::OpenDatabase(dir, options, kFormatVersion, handles.get()));
  std::unique_ptr<Store> store(new Store(std::move(handles), options));
  RETURN_IF_ERROR(store->Load());
  return store;
}

Store::Store(std::unique_ptr<Handles> handles, StoreOptions options)
    : handles_(std::move(handles)), options_(options) {}

Store::~Store() = default;

absl::Status Store::Load() {
  rocksdb::DB& db = *handles_->db;
  const rocksdb::ReadOptions read_options;

  uint64_t first_position = 1;
  {
    std::string value;
    const rocksdb::Status s = db.Get(read_options, handles_->meta, ToSlice(kLogStartKey), &value);
    if (s.ok()) {
      ASSIGN_OR_RETURN(first_position, DecodeNumberKey(value));
      first_position = std::max<uint64_t>(first_position, 1);
    } else if (!s.IsNotFound()) {
      return FromRocksStatus(s, "reading the log start");
    }
  }

  uint64_t checkpoint_generation = 0;
  {
    std::string value;
    const rocksdb::Status s = db.Get(read_options, handles_->meta, ToSlice(kCheckpointKey), &value);
    if (s.ok()) {
      ASSIGN_OR_RETURN(const internal::CheckpointMeta meta, internal::DecodeCheckpointMeta(value));
      checkpoint_generation = meta.generation;
    } else if (!s.IsNotFound()) {
      return FromRocksStatus(s, "reading the checkpoint record");
    }
  }

  uint64_t next_position = first_position;
  {
    std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(read_options, handles_->log));
    it->SeekToLast();
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the log"));
    if (it->Valid()) {
      ASSIGN_OR_RETURN(const uint64_t last, DecodeNumberKey(ToView(it->key())));
      next_position = std::max(next_position, last + 1);
    }
  }

  uint64_t next_violation = 1;
  {
    std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(read_options, handles_->violations));
    it->SeekToLast();
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the violations"));
    if (it->Valid()) {
      ASSIGN_OR_RETURN(const uint64_t last, DecodeNumberKey(ToView(it->key())));
      next_violation = last + 1;
    }
  }

  absl::flat_hash_map<std::string, std::unique_ptr<StreamState>> streams;
  std::vector<std::string> names;
  {
    std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(read_options, handles_->streams));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::string name(ToView(it->key()));
      ASSIGN_OR_RETURN(internal::StreamValue value,
                       internal::DecodeStreamValue(ToView(it->value())));
      if (value.id == 0) {
        return absl::DataLossError(fmt::format("{} has stream id 0", StreamLabel(name)));
      }
      if (names.size() < value.id) names.resize(value.id);
      if (!names[value.id - 1].empty()) {
        return absl::DataLossError(fmt::format("{} and {} share the stream id {}",
                                               StreamLabel(names[value.id - 1]), StreamLabel(name),
                                               value.id));
      }
      names[value.id - 1] = name;
      auto state = std::make_unique<StreamState>();
      {
        absl::MutexLock lock(&state->mu);
        state->record = StreamRecord{.name = name,
                                     .id = value.id,
                                     .durable_seq = value.durable_seq,
                                     .watermark = value.watermark,
                                     .closed = value.closed,
                                     .header = std::move(value.header)};
      }
      streams.emplace(std::move(name), std::move(state));
    }
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the streams"));
  }

  {
    absl::MutexLock lock(&violations_mu_);
    next_violation_ = next_violation;
    violation_count_.store(next_violation - 1, std::memory_order_release);
  }
  RETURN_IF_ERROR(LoadViolationCounts(next_violation - 1));
  {
    absl::MutexLock lock(&truncate_mu_);
    checkpoint_generation_ = checkpoint_generation;
  }
  absl::MutexLock lock(&mu_);
  first_position_ = first_position;
  next_position_ = next_position;
  streams_ = std::move(streams);
  stream_names_ = std::move(names);
  return absl::OkStatus();
}

absl::Status Store::CheckWritable() const {
  absl::MutexLock lock(&mu_);
  if (write_error_.ok()) return absl::OkStatus();
  return absl::Status(
      write_error_.code(),
      fmt::format("the store refuses writes after a failed write (reopen it): {}",
                  std::string_view(write_error_.message().data(), write_error_.message().size())));
}

absl::Status Store::Remember(absl::Status status) {
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    if (write_error_.ok()) write_error_ = status;
  }
  return status;
}

absl::Status Store::Write(rocksdb::WriteBatch& batch, bool sync, std::string_view what) {
  RETURN_IF_ERROR(CheckWritable());
  rocksdb::WriteOptions write_options;
  write_options.sync = sync;
  return Remember(FromRocksStatus(handles_->db->Write(write_options, &batch), what));
}

Store::StreamState* Store::FindStream(std::string_view name, bool create) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(ToAbsl(name));
  if (it != streams_.end()) return it->second.get();
  if (!create) return nullptr;
  auto state = std::make_unique<StreamState>();
  StreamState* raw = state.get();
  stream_names_.emplace_back(name);
  {
    absl::MutexLock state_lock(&raw->mu);
    raw->record.name = std::string(name);
    raw->record.id = static_cast<uint32_t>(stream_names_.size());
  }
  streams_.emplace(std::string(name), std::move(state));
  return raw;
}

absl::StatusOr<uint64_t> Store::AppendBatch(std::string_view stream, uint64_t seq,
                                            std::optional<history::Timestamp> watermark,
                                            bool end_of_stream, std::string_view bytes, bool sync,
                                            std::string_view memo) {
  if (stream.empty()) return absl::InvalidArgumentError("a stream needs a non-empty name");
  RETURN_IF_ERROR(CheckWritable());
  StreamState* state = FindStream(stream, /*create=*/seq == 1);
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        fmt::format("{}: batch {} does not follow the durable batch 0 (a stream starts at 1)",
                    StreamLabel(stream), seq));
  }

  absl::MutexLock write_lock(&state->write_mu);
  StreamRecord next;
  {
    absl::MutexLock lock(&state->mu);
    next = state->record;
  }
  if (next.closed) {
    return absl::FailedPreconditionError(
        fmt::format("{} is closed: its end-of-stream batch {} is durable", StreamLabel(stream),
                    next.durable_seq));
  }
  if (seq != next.durable_seq + 1) {
    return absl::FailedPreconditionError(
        fmt::format("{}: batch {} does not follow the durable batch {}", StreamLabel(stream), seq,
                    next.durable_seq));
  }
  next.durable_seq = seq;
  if (watermark.has_value() && (!next.watermark.has_value() || *watermark > *next.watermark)) {
    next.watermark = watermark;
  }
  next.closed = end_of_stream;

  uint64_t position = 0;
  {
    absl::MutexLock lock(&mu_);
    position = next_position_++;
  }
  rocksdb::WriteBatch batch;
  const std::string key = EncodeNumberKey(position);
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->log, key,
                                internal::EncodeLogValue({.stream_id = next.id,
                                                          .seq = seq,
                                                          .watermark = watermark,
                                                          .end_of_stream = end_of_stream,
                                                          .bytes = bytes})),
                      "encoding a log entry"));
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->streams, ToSlice(stream),
                                internal::EncodeStreamValue({.id = next.id,
                                                             .durable_seq = next.durable_seq,
                                                             .watermark = next.watermark,
                                                             .closed = next.closed,
                                                             .header = next.header})),
                      "encoding a stream record"));
  if (!memo.empty()) {
    // The memo that falls out of the kept ones goes in the same write: one point deletion, as
    // every batch has a memo.
    if (seq > kKeptRefusalBatches) {
      RETURN_IF_ERROR(FromRocksStatus(
          batch.Delete(handles_->refusals,
                       internal::EncodeRefusalsKey(next.id, seq - kKeptRefusalBatches)),
          "forgetting an old batch memo"));
    }
    RETURN_IF_ERROR(FromRocksStatus(
        batch.Put(handles_->refusals, internal::EncodeRefusalsKey(next.id, seq), ToSlice(memo)),
        "encoding a batch memo"));
  }
  RETURN_IF_ERROR(Write(batch, sync && options_.sync_writes,
                        fmt::format("appending batch {} of {}", seq, StreamLabel(stream))));
  {
    absl::MutexLock lock(&state->mu);
    state->record = std::move(next);
  }
  return position;
}

absl::Status Store::SyncLog() {
  absl::MutexLock sync_lock(&sync_mu_);
  RETURN_IF_ERROR(CheckWritable());
  if (!options_.sync_writes) return absl::OkStatus();
  return Remember(FromRocksStatus(handles_->db->SyncWAL(), "syncing the log"));
}

absl::Status Store::ReadLog(uint64_t from_position,
                            absl::FunctionRef<absl::Status(const LogEntry&)> callback) const {
  std::unique_ptr<rocksdb::Iterator> it(
      handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->log));
  // Streams are known in memory before their first entry is written, so every stream of the
  // iterator's view is in this copy.
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    names = stream_names_;
  }
  for (it->Seek(EncodeNumberKey(from_position)); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const uint64_t position, DecodeNumberKey(ToView(it->key())));
    ASSIGN_OR_RETURN(const internal::LogValue value, internal::DecodeLogValue(ToView(it->value())));
    if (value.stream_id == 0 || value.stream_id > names.size() ||
        names[value.stream_id - 1].empty()) {
      return absl::DataLossError(
          fmt::format("log entry {} names stream id {}, which the store does not know", position,
                      value.stream_id));
    }
    const LogEntry entry{.position = position,
                         .stream = names[value.stream_id - 1],
                         .stream_id = value.stream_id,
                         .seq = value.seq,
                         .watermark = value.watermark,
                         .end_of_stream = value.end_of_stream,
                         .bytes = value.bytes};
    RETURN_IF_ERROR(callback(entry));
  }
  return FromRocksStatus(it->status(), "reading the log");
}

absl::Status Store::TruncateLogBefore(uint64_t position) {
  absl::MutexLock truncate_lock(&truncate_mu_);
  uint64_t first = 0;
  {
    absl::MutexLock lock(&mu_);
    if (position > next_position_) {
      return absl::InvalidArgumentError(
          fmt::format("cannot truncate the log before position {}: the next position is {}",
                      position, next_position_));
    }
    first = first_position_;
  }
  if (position <= first) return absl::OkStatus();
  rocksdb::WriteBatch batch;
  return WriteTruncation(batch, position, fmt::format("truncating the log before {}", position));
}

absl::Status Store::WriteTruncation(rocksdb::WriteBatch& batch, uint64_t position,
                                    std::string_view what) {
  RETURN_IF_ERROR(FromRocksStatus(
      batch.DeleteRange(handles_->log, EncodeNumberKey(0), EncodeNumberKey(position)),
      "encoding a log truncation"));
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->meta, ToSlice(kLogStartKey), EncodeNumberKey(position)),
                      "encoding a log truncation"));
  // What the truncated entries led to (violations, a checkpoint) must be durable before they go.
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(
      Remember(FromRocksStatus(handles_->db->SyncWAL(), "syncing before a log truncation")));
  RETURN_IF_ERROR(Write(batch, /*sync=*/true, what));
  {
    absl::MutexLock lock(&mu_);
    first_position_ = std::max(first_position_, position);
  }
  // The range deletion hides the entries at once; their space comes back as compactions rewrite
  // them. Table files that hold nothing but truncated entries go now (best effort: a failure only
  // leaves them to compaction).
  const std::string begin = EncodeNumberKey(0);
  const std::string end = EncodeNumberKey(position);
  const rocksdb::Slice begin_slice(begin), end_slice(end);
  if (const rocksdb::Status s =
          rocksdb::DeleteFilesInRange(handles_->db.get(), handles_->log, &begin_slice, &end_slice);
      !s.ok()) {
    spdlog::warn("store: the log's table files below position {} stay until compaction: {}",
                 position, s.ToString());
  }
  return absl::OkStatus();
}

uint64_t Store::next_log_position() const {
  absl::MutexLock lock(&mu_);
  return next_position_;
}

absl::Status Store::SetWindowsDone(uint64_t count) {
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->meta, ToSlice(kWindowsDoneKey), EncodeNumberKey(count)),
                      "encoding the windows done"));
  return Write(batch, /*sync=*/false, "recording the windows done");
}

absl::StatusOr<uint64_t> Store::WindowsDone() const {
  std::string value;
  const rocksdb::Status s =
      handles_->db->Get(rocksdb::ReadOptions(), handles_->meta, ToSlice(kWindowsDoneKey), &value);
  if (s.IsNotFound()) return 0;
  RETURN_IF_ERROR(FromRocksStatus(s, "reading the windows done"));
  return DecodeNumberKey(value);
}

absl::Status Store::SetCounterTotals(std::string_view blob) {
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->meta, ToSlice(kCounterTotalsKey), ToSlice(blob)),
                      "encoding the counter totals"));
  return Write(batch, /*sync=*/false, "recording the counter totals");
}

absl::StatusOr<std::string> Store::CounterTotals() const {
  std::string value;
  const rocksdb::Status s =
      handles_->db->Get(rocksdb::ReadOptions(), handles_->meta, ToSlice(kCounterTotalsKey), &value);
  if (s.IsNotFound()) return std::string();
  RETURN_IF_ERROR(FromRocksStatus(s, "reading the counter totals"));
  return value;
}

uint64_t Store::first_log_position() const {
  absl::MutexLock lock(&mu_);
  return first_position_;
}

absl::StatusOr<StreamRecord> Store::GetStream(std::string_view name) const {
  const StreamState* state = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(ToAbsl(name));
    if (it == streams_.end()) {
      return absl::NotFoundError(fmt::format("no {}", StreamLabel(name)));
    }
    state = it->second.get();
  }
  absl::MutexLock lock(&state->mu);
  return state->record;
}

absl::StatusOr<std::string> Store::BatchMemo(std::string_view stream, uint64_t seq) const {
  uint32_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(ToAbsl(stream));
    if (it == streams_.end()) return std::string();
    absl::MutexLock state_lock(&it->second->mu);
    const uint64_t durable = it->second->record.durable_seq;
    // Beyond the kept ones: a stale memo of a store written before memos were point-deleted.
    if (seq > durable || seq + kKeptRefusalBatches <= durable) return std::string();
    id = it->second->record.id;
  }
  std::string value;
  const rocksdb::Status s = handles_->db->Get(rocksdb::ReadOptions(), handles_->refusals,
                                              internal::EncodeRefusalsKey(id, seq), &value);
  if (s.IsNotFound()) return std::string();
  RETURN_IF_ERROR(FromRocksStatus(
      s, fmt::format("reading the memo of batch {} of {}", seq, StreamLabel(stream))));
  return value;
}

absl::StatusOr<uint64_t> Store::ClaimStream(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("a stream needs a non-empty name");
  RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&claim_mu_);
  ASSIGN_OR_RETURN(const uint64_t epoch, StreamEpoch(name));
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(FromRocksStatus(
      batch.Put(handles_->epochs, ToSlice(name), EncodeNumberKey(epoch + 1)), "encoding an epoch"));
  // Synced whatever sync_writes says: an epoch handed out twice would let two writers in.
  RETURN_IF_ERROR(Write(batch, /*sync=*/true, fmt::format("claiming {}", StreamLabel(name))));
  return epoch + 1;
}

absl::StatusOr<uint64_t> Store::StreamEpoch(std::string_view name) const {
  std::string value;
  const rocksdb::Status s =
      handles_->db->Get(rocksdb::ReadOptions(), handles_->epochs, ToSlice(name), &value);
  if (s.IsNotFound()) return 0;
  RETURN_IF_ERROR(
      FromRocksStatus(s, fmt::format("reading the writer epoch of {}", StreamLabel(name))));
  absl::StatusOr<uint64_t> epoch = DecodeNumberKey(value);
  if (!epoch.ok()) {
    return absl::DataLossError(
        fmt::format("the writer epoch of {} does not decode", StreamLabel(name)));
  }
  return *epoch;
}

std::vector<StreamRecord> Store::ListStreams() const {
  std::vector<StreamRecord> records;
  absl::MutexLock lock(&mu_);
  records.reserve(streams_.size());
  for (const std::string& name : stream_names_) {
    if (name.empty()) continue;  // an id whose stream never became durable
    const StreamState& state = *streams_.at(name);
    absl::MutexLock state_lock(&state.mu);
    records.push_back(state.record);
  }
  return records;
}

absl::Status Store::SetStreamHeader(std::string_view name, std::string_view header) {
  if (name.empty()) return absl::InvalidArgumentError("a stream needs a non-empty name");
  RETURN_IF_ERROR(CheckWritable());
  StreamState* state = FindStream(name, /*create=*/true);
  absl::MutexLock write_lock(&state->write_mu);
  StreamRecord next;
  {
    absl::MutexLock lock(&state->mu);
    next = state->record;
  }
  next.header = std::string(header);
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->streams, ToSlice(name),
                                internal::EncodeStreamValue({.id = next.id,
                                                             .durable_seq = next.durable_seq,
                                                             .watermark = next.watermark,
                                                             .closed = next.closed,
                                                             .header = next.header})),
                      "encoding a stream record"));
  RETURN_IF_ERROR(Write(batch, options_.sync_writes,
                        fmt::format("setting the header of {}", StreamLabel(name))));
  absl::MutexLock lock(&state->mu);
  state->record = std::move(next);
  return absl::OkStatus();
}

RocksDbMemory Store::rocksdb_memory() const { return handles_->memory.Measure(*handles_->db); }

}  // namespace isowatch::store
