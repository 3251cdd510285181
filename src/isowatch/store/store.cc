// SPDX-License-Identifier: Apache-2.0
#include "isowatch/store/store.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>
#include <xxhash.h>

#include "absl/strings/string_view.h"
#include "fmt/format.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "rocksdb/snapshot.h"
#include "rocksdb/write_batch.h"
#include "spdlog/spdlog.h"

#include "isowatch/common/status_macros.h"
#include "isowatch/rocks/rocksdb_memory.h"
#include "isowatch/rocks/rocksdb_status.h"
#include "isowatch/store/internal/codec.h"

namespace isowatch::store {
namespace {

using internal::DecodeNumberKey;
using internal::EncodeNumberKey;
using rocks::FromRocksStatus;
using rocks::RocksDbMemory;
using rocks::RocksDbMemoryBudget;

constexpr std::string_view kMetaCf = "meta";
constexpr std::string_view kLogCf = "log";
constexpr std::string_view kStreamsCf = "streams";
constexpr std::string_view kViolationsCf = "violations";
constexpr std::string_view kViolationIdsCf = "violation_ids";
constexpr std::string_view kRefusalsCf = "refusals";
constexpr std::string_view kCheckpointCf = "checkpoint";
constexpr std::array<std::string_view, 7> kOwnCfs = {
    kMetaCf, kLogCf, kStreamsCf, kViolationsCf, kViolationIdsCf, kRefusalsCf, kCheckpointCf};

constexpr std::string_view kFormatVersionKey = "format_version";
constexpr std::string_view kLogStartKey = "log_start";
constexpr std::string_view kWindowsDoneKey = "windows_done";
constexpr std::string_view kCheckpointKey = "checkpoint";

rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }
std::string_view ToView(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }
absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool Matches(const ViolationFilter& filter, const ViolationRecord& record) {
  if (filter.level && record.level != *filter.level) return false;
  if (filter.anomaly && record.anomaly != *filter.anomaly) return false;
  if (filter.checker && record.checker != *filter.checker) return false;
  if (filter.stream && std::find(record.streams.begin(), record.streams.end(), *filter.stream) ==
                           record.streams.end()) {
    return false;
  }
  if (filter.since_unix_ms && record.finalised_unix_ms < *filter.since_unix_ms) return false;
  if (filter.until_unix_ms && record.finalised_unix_ms >= *filter.until_unix_ms) return false;
  return true;
}

std::string EncodePageToken(uint64_t insertion_number) {
  return fmt::format("{:016x}", insertion_number);
}

absl::StatusOr<uint64_t> DecodePageToken(std::string_view token) {
  uint64_t number = 0;
  const char* end = token.data() + token.size();
  if (token.size() == 16) {
    const auto [ptr, ec] = std::from_chars(token.data(), end, number, 16);
    if (ec == std::errc() && ptr == end) return number;
  }
  return absl::InvalidArgumentError(
      "page_token: not a token of this server (expected the next_page_token of an earlier page: "
      "16 hexadecimal digits)");
}

std::string StreamLabel(std::string_view name) { return fmt::format("stream \"{}\"", name); }

// RocksDB's memory (docs/store-format.md, "Memory"): the memtables of all column families
// together, and the blocks read back (recovery, violation queries).
constexpr size_t kMemtableBytes = 64 << 20;
constexpr size_t kBlockCacheBytes = 16 << 20;

// LZ4 where this RocksDB has it, else its default, Snappy.
rocksdb::CompressionType LogCompression() {
  static const bool kHasLz4 = [] {
    const std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
    return std::find(supported.begin(), supported.end(), rocksdb::kLZ4Compression) !=
           supported.end();
  }();
  return kHasLz4 ? rocksdb::kLZ4Compression : rocksdb::kSnappyCompression;
}

// The log takes every ingested batch: memtables large enough that flushes stay rare, and room
// for several while one is being flushed. The other column families take little.
rocksdb::ColumnFamilyOptions CfOptions(const RocksDbMemoryBudget& budget, std::string_view name) {
  rocksdb::ColumnFamilyOptions options;
  if (name == kLogCf) {
    budget.ApplyTo(options, 16 << 20, 4);
    // Every ingested batch goes through a flush, on the daemon's own cores: LZ4 compresses it in
    // about half the time Snappy (RocksDB's default) takes (bench/README.md, "The sustained
    // rate"). Files written before keep their compression; every block names its own.
    options.compression = LogCompression();
  } else if (name == kViolationsCf) {
    budget.ApplyTo(options, 4 << 20, 2);
  } else {
    budget.ApplyTo(options, 1 << 20, 2);
  }
  return options;
}

}  // namespace

// The RocksDB database and its column family handles. Destroys the handles, then closes the
// database.
struct Store::Handles {
  RocksDbMemoryBudget memory{kMemtableBytes, kBlockCacheBytes};
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> all;  // every opened or created handle
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  rocksdb::ColumnFamilyHandle* log = nullptr;
  rocksdb::ColumnFamilyHandle* streams = nullptr;
  rocksdb::ColumnFamilyHandle* violations = nullptr;
  rocksdb::ColumnFamilyHandle* violation_ids = nullptr;
  rocksdb::ColumnFamilyHandle* refusals = nullptr;
  rocksdb::ColumnFamilyHandle* checkpoint = nullptr;

  ~Handles() {
    if (db == nullptr) return;
    for (rocksdb::ColumnFamilyHandle* h : all) {
      // Destroying a handle only releases memory; a failure leaves nothing to undo.
      db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    db->Close().PermitUncheckedError();
  }

  rocksdb::ColumnFamilyHandle* Find(std::string_view name) const {
    for (rocksdb::ColumnFamilyHandle* h : all) {
      if (h->GetName() == name) return h;
    }
    return nullptr;
  }
};

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir, StoreOptions options) {
  if (dir.empty()) return absl::InvalidArgumentError("store directory: empty path");
  std::error_code ec;
  const bool exists = std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", ec);
  if (!exists && !options.create_if_missing) {
    return absl::NotFoundError(fmt::format("no store in {}", dir));
  }
  if (!exists) {
    // RocksDB creates the last directory only.
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::UnavailableError(
          fmt::format("cannot create the store directory {}: {}", dir, ec.message()));
    }
  }

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.create_missing_column_families = false;
  db_options.keep_log_file_num = 5;  // RocksDB's own LOG files
  auto handles = std::make_unique<Handles>();
  handles->memory.ApplyTo(db_options);

  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName};
  if (exists) {
    names.clear();
    RETURN_IF_ERROR(FromRocksStatus(rocksdb::DB::ListColumnFamilies(db_options, dir, &names),
                                    fmt::format("listing the column families of {}", dir)));
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.reserve(names.size());
  for (const std::string& name : names) {
    descriptors.emplace_back(name, CfOptions(handles->memory, name));
  }

  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(
      FromRocksStatus(rocksdb::DB::Open(db_options, dir, descriptors, &handles->all, &raw),
                      fmt::format("opening the store in {}", dir)));
  handles->db.reset(raw);

  // The format version decides whether this is a store this code can read.
  std::optional<uint32_t> version;
  if (rocksdb::ColumnFamilyHandle* meta = handles->Find(kMetaCf); meta != nullptr) {
    std::string value;
    const rocksdb::Status s =
        handles->db->Get(rocksdb::ReadOptions(), meta, ToSlice(kFormatVersionKey), &value);
    if (s.ok()) {
      ASSIGN_OR_RETURN(version, internal::DecodeFormatVersion(value));
    } else if (!s.IsNotFound()) {
      return FromRocksStatus(s, fmt::format("reading the format version of {}", dir));
    }
  }
  if (version.has_value() && *version != kFormatVersion) {
    return absl::FailedPreconditionError(
        fmt::format("the store in {} has format version {}; this isowatchd reads version {} "
                    "(docs/store-format.md)",
                    dir, *version, kFormatVersion));
  }
  if (!version.has_value()) {
    // A new store, or one whose creation was interrupted: every column family must be empty.
    for (rocksdb::ColumnFamilyHandle* h : handles->all) {
      std::unique_ptr<rocksdb::Iterator> it(handles->db->NewIterator(rocksdb::ReadOptions(), h));
      it->SeekToFirst();
      RETURN_IF_ERROR(FromRocksStatus(it->status(), fmt::format("reading {}", dir)));
      if (it->Valid()) {
        return absl::FailedPreconditionError(fmt::format(
            "{} holds a RocksDB database that is not an isowatch store (no format version)", dir));
      }
    }
  }
  for (rocksdb::ColumnFamilyHandle* h : handles->all) {
    if (h->GetName() != rocksdb::kDefaultColumnFamilyName &&
        std::find(kOwnCfs.begin(), kOwnCfs.end(), h->GetName()) == kOwnCfs.end()) {
      return absl::FailedPreconditionError(
          fmt::format("the store in {} has an unknown column family \"{}\"", dir, h->GetName()));
    }
  }
  for (std::string_view name : kOwnCfs) {
    if (handles->Find(name) != nullptr) continue;
    // `checkpoint` came later within version 2: a store written before it lacks it.
    if (version.has_value() && name != kCheckpointCf) {
      return absl::DataLossError(
          fmt::format("the store in {} lacks its column family \"{}\"", dir, name));
    }
    rocksdb::ColumnFamilyHandle* created = nullptr;
    RETURN_IF_ERROR(
        FromRocksStatus(handles->db->CreateColumnFamily(CfOptions(handles->memory, name),
                                                        std::string(name), &created),
                        fmt::format("creating column family {} in {}", name, dir)));
    handles->all.push_back(created);
  }
  handles->meta = handles->Find(kMetaCf);
  handles->log = handles->Find(kLogCf);
  handles->streams = handles->Find(kStreamsCf);
  handles->violations = handles->Find(kViolationsCf);
  handles->violation_ids = handles->Find(kViolationIdsCf);
  handles->refusals = handles->Find(kRefusalsCf);
  handles->checkpoint = handles->Find(kCheckpointCf);

  if (!version.has_value()) {
    rocksdb::WriteOptions write_options;
    write_options.sync = true;
    RETURN_IF_ERROR(
        FromRocksStatus(handles->db->Put(write_options, handles->meta, ToSlice(kFormatVersionKey),
                                         internal::EncodeFormatVersion(kFormatVersion)),
                        fmt::format("writing the format version of {}", dir)));
  }

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
                                            std::string_view refusals) {
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
  if (!refusals.empty()) {
    // Those of batches older than the kept ones go in the same write (a no-op when none are).
    if (seq > kKeptRefusalBatches) {
      RETURN_IF_ERROR(FromRocksStatus(
          batch.DeleteRange(handles_->refusals, internal::EncodeRefusalsKey(next.id, 0),
                            internal::EncodeRefusalsKey(next.id, seq - kKeptRefusalBatches + 1)),
          "forgetting old refusals"));
    }
    RETURN_IF_ERROR(FromRocksStatus(
        batch.Put(handles_->refusals, internal::EncodeRefusalsKey(next.id, seq), ToSlice(refusals)),
        "encoding a batch's refusals"));
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

absl::StatusOr<std::string> Store::BatchRefusals(std::string_view stream, uint64_t seq) const {
  uint32_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(ToAbsl(stream));
    if (it == streams_.end()) return std::string();
    absl::MutexLock state_lock(&it->second->mu);
    if (seq > it->second->record.durable_seq) return std::string();
    id = it->second->record.id;
  }
  std::string value;
  const rocksdb::Status s = handles_->db->Get(rocksdb::ReadOptions(), handles_->refusals,
                                              internal::EncodeRefusalsKey(id, seq), &value);
  if (s.IsNotFound()) return std::string();
  RETURN_IF_ERROR(FromRocksStatus(
      s, fmt::format("reading the refusals of batch {} of {}", seq, StreamLabel(stream))));
  return value;
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

absl::StatusOr<bool> Store::PutViolation(const ViolationRecord& record) {
  if (record.id.empty()) return absl::InvalidArgumentError("a violation needs a non-empty id");
  absl::MutexLock lock(&violations_mu_);
  RETURN_IF_ERROR(CheckWritable());
  std::string existing;
  const rocksdb::Status found = handles_->db->Get(rocksdb::ReadOptions(), handles_->violation_ids,
                                                  ToSlice(record.id), &existing);
  if (found.ok()) return false;
  if (!found.IsNotFound()) {
    return FromRocksStatus(found, fmt::format("looking up violation {}", record.id));
  }
  const std::string number = EncodeNumberKey(next_violation_);
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->violations, number, internal::EncodeViolation(record)),
                      "encoding a violation"));
  RETURN_IF_ERROR(FromRocksStatus(batch.Put(handles_->violation_ids, ToSlice(record.id), number),
                                  "encoding a violation"));
  RETURN_IF_ERROR(
      Write(batch, options_.sync_violations, fmt::format("storing violation {}", record.id)));
  ++next_violation_;
  violation_count_.store(next_violation_ - 1, std::memory_order_release);
  return true;
}

absl::StatusOr<ViolationPage> Store::QueryViolations(const ViolationFilter& filter, size_t limit,
                                                     std::string_view page_token) const {
  if (limit == 0) return absl::InvalidArgumentError("limit: must be at least 1");
  uint64_t start = 0;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(start, DecodePageToken(page_token));
  }
  ViolationPage page;
  std::unique_ptr<rocksdb::Iterator> it(
      handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->violations));
  for (it->Seek(EncodeNumberKey(start)); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const uint64_t number, DecodeNumberKey(ToView(it->key())));
    ASSIGN_OR_RETURN(ViolationRecord record, internal::DecodeViolation(ToView(it->value())));
    if (!Matches(filter, record)) continue;
    if (page.violations.size() == limit) {
      page.next_page_token = EncodePageToken(number);
      break;
    }
    page.violations.push_back(std::move(record));
  }
  RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the violations"));
  return page;
}

uint64_t Store::CountViolations() const { return violation_count_.load(std::memory_order_acquire); }

RocksDbMemory Store::rocksdb_memory() const { return handles_->memory.Measure(*handles_->db); }

}  // namespace isowatch::store
