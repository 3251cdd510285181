// SPDX-License-Identifier: Apache-2.0
#include "isowatch/engine/version_spill.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <system_error>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include <fmt/format.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/rocks/rocksdb_status.h"

namespace isowatch::engine {
namespace spill_format {
namespace {

using history::Timestamp;
using history::Value;
using history::ValueKind;
using internal::OrderKey;

// Sign-flipped big-endian: byte order equals numeric order for signed integers.
void PutBig64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}
void PutOrdered64(std::string& out, int64_t v) {
  PutBig64(out, static_cast<uint64_t>(v) ^ (uint64_t{1} << 63));
}
void PutBig32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}
uint64_t GetBig(std::string_view in, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(in[pos + i]);
  return v;
}
int64_t GetOrdered64(std::string_view in, size_t pos) {
  return static_cast<int64_t>(GetBig(in, pos, 8) ^ (uint64_t{1} << 63));
}

void PutOrderKey(std::string& out, const OrderKey& k) {
  PutOrdered64(out, k.ts.physical);
  PutOrdered64(out, k.ts.logical);
  PutBig64(out, k.tie);
}
OrderKey GetOrderKey(std::string_view in, size_t pos) {
  OrderKey k;
  k.ts = Timestamp{GetOrdered64(in, pos), GetOrdered64(in, pos + 8)};
  k.tie = GetBig(in, pos + 16, 8);
  return k;
}

constexpr size_t kPlaceBytes = 8 + 8 + 8;
constexpr size_t kValueBytes = 1 + 8;  // kind, payload
constexpr size_t kKeyRecordBytes = 24 + kValueBytes + 16 + 24 + 8;

void PutValue(std::string& out, const Value& v) {
  out.push_back(static_cast<char>(v.kind()));
  PutOrdered64(out, v.payload());
}
bool GetValue(std::string_view in, size_t pos, Value* v) {
  const auto kind = static_cast<uint8_t>(in[pos]);
  if (kind > static_cast<uint8_t>(ValueKind::kBytes)) return false;
  *v = Value::FromRaw(static_cast<ValueKind>(kind), GetOrdered64(in, pos + 1));
  return true;
}

}  // namespace

size_t EncodedBytes(size_t name_bytes, const SpilledVersion& version) {
  return name_bytes + kPlaceBytes + 16 + 16 + kValueBytes + 4 +
         version.appends.size() * kValueBytes + 4 + version.writer_name.size();
}

void AppendIntKeyName(std::string& out, int64_t key) {
  out.push_back('\0');
  PutOrdered64(out, key);
}
void AppendBytesKeyName(std::string& out, std::string_view key) {
  out.push_back('\1');
  PutBig32(out, static_cast<uint32_t>(key.size()));
  out += key;
}
std::string EncodeIntKeyName(int64_t key) {
  std::string out;
  AppendIntKeyName(out, key);
  return out;
}
std::string EncodeBytesKeyName(std::string_view key) {
  std::string out;
  AppendBytesKeyName(out, key);
  return out;
}

std::string EncodeKey(std::string_view name, const OrderKey& at) {
  std::string out;
  out.reserve(name.size() + kPlaceBytes);
  out += name;
  PutOrderKey(out, at);
  return out;
}

bool DecodeKey(std::string_view bytes, std::string_view* name, OrderKey* at) {
  if (bytes.size() <= kPlaceBytes) return false;
  const size_t name_bytes = bytes.size() - kPlaceBytes;
  *name = bytes.substr(0, name_bytes);
  *at = GetOrderKey(bytes, name_bytes);
  return true;
}

std::string EncodeKeyIdKey(KeyId key, const OrderKey& at) {
  std::string out;
  PutBig32(out, key.value());
  PutOrderKey(out, at);
  return out;
}

// Value: expiry (16 bytes; first, so that the compaction filter reads it alone), writer start
// (16), the register value (9), the number of appends (4), each append (9), then the writer's
// name: its length (4) and its bytes. The version's own place is in the key.
std::string EncodeValue(const SpilledVersion& version) {
  std::string out;
  out.reserve(EncodedBytes(0, version) - kPlaceBytes);
  PutOrdered64(out, version.expires.physical);
  PutOrdered64(out, version.expires.logical);
  PutOrdered64(out, version.writer_start.physical);
  PutOrdered64(out, version.writer_start.logical);
  PutValue(out, version.value);
  PutBig32(out, static_cast<uint32_t>(version.appends.size()));
  for (const Value& v : version.appends) PutValue(out, v);
  PutBig32(out, static_cast<uint32_t>(version.writer_name.size()));
  out += version.writer_name;
  return out;
}

bool DecodeExpiry(std::string_view bytes, Timestamp* expires) {
  if (bytes.size() < 16) return false;
  *expires = Timestamp{GetOrdered64(bytes, 0), GetOrdered64(bytes, 8)};
  return true;
}

bool DecodeValue(std::string_view bytes, SpilledVersion* version) {
  constexpr size_t kFixed = 32 + kValueBytes + 4;
  if (bytes.size() < kFixed) return false;
  version->expires = Timestamp{GetOrdered64(bytes, 0), GetOrdered64(bytes, 8)};
  version->writer_start = Timestamp{GetOrdered64(bytes, 16), GetOrdered64(bytes, 24)};
  if (!GetValue(bytes, 32, &version->value)) return false;
  const uint64_t n = GetBig(bytes, 32 + kValueBytes, 4);
  const uint64_t name_at = kFixed + n * kValueBytes;
  if (n > bytes.size() || bytes.size() < name_at + 4) return false;
  const uint64_t name_size = GetBig(bytes, name_at, 4);
  if (bytes.size() != name_at + 4 + name_size) return false;
  version->appends.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (!GetValue(bytes, kFixed + i * kValueBytes, &version->appends[i])) return false;
  }
  version->writer_name.assign(bytes.substr(name_at + 4, name_size));
  return true;
}

std::string EncodeKeyId(KeyId key) {
  std::string out;
  PutBig32(out, key.value());
  return out;
}

// Record: the base's place (24 bytes, as in a version's key after the key's name) and value (9),
// the trim point (16), the newest dropped version's place (24), the longest writer (8).
std::string EncodeKeyRecord(const SpilledKey& record) {
  std::string out;
  out.reserve(kKeyRecordBytes);
  PutOrderKey(out, record.base);
  PutValue(out, record.base_value);
  PutOrdered64(out, record.trim_point.physical);
  PutOrdered64(out, record.trim_point.logical);
  PutOrderKey(out, record.dropped_upto);
  PutOrdered64(out, record.max_duration);
  return out;
}

bool DecodeKeyRecord(std::string_view bytes, SpilledKey* record) {
  if (bytes.size() != kKeyRecordBytes) return false;
  record->base = GetOrderKey(bytes, 0);
  if (!GetValue(bytes, 24, &record->base_value)) return false;
  record->trim_point = Timestamp{GetOrdered64(bytes, 33), GetOrdered64(bytes, 41)};
  record->dropped_upto = GetOrderKey(bytes, 49);
  record->max_duration = GetOrdered64(bytes, 73);
  return true;
}

}  // namespace spill_format

// --- MemoryVersionSpill ------------------------------------------------------------------------

void MemoryVersionSpill::Put(std::string_view key, const SpilledVersion& version) {
  pending_.emplace_back(std::string(key), version);
}

// A version put again only takes the place of the first (Flush counts it once).
void MemoryVersionSpill::Replace(std::string_view key, const SpilledVersion& version) {
  Put(key, version);
}

void MemoryVersionSpill::PutKey(std::string_view key, const SpilledKey& record) {
  pending_keys_.emplace_back(std::string(key), record);
}

absl::StatusOr<std::optional<SpilledKey>> MemoryVersionSpill::FindKey(std::string_view key) {
  auto it = key_records_.find(key);
  if (it == key_records_.end()) return std::nullopt;
  return it->second;
}

absl::Status MemoryVersionSpill::Flush() {
  for (const auto& [key, record] : pending_keys_) {
    key_records_.insert_or_assign(key, record);
    // As written, like RocksDB's.
    bytes_ += key.size() + spill_format::EncodeKeyRecord(record).size();
  }
  pending_keys_.clear();
  for (auto& [key, version] : pending_) {
    auto [it, inserted] = map_.try_emplace({key, version.at});
    if (inserted) {
      ++versions_;
    } else {
      bytes_ -= spill_format::EncodedBytes(key.size(), it->second);
    }
    bytes_ += spill_format::EncodedBytes(key.size(), version);
    it->second = std::move(version);
  }
  pending_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<SpilledVersion>> MemoryVersionSpill::Find(
    std::string_view key, const internal::OrderKey& at) {
  auto it = map_.find(std::pair<std::string_view, internal::OrderKey>(key, at));
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::optional<SpilledVersion>> MemoryVersionSpill::NewestBefore(
    std::string_view key, const internal::OrderKey& point) {
  auto it = map_.lower_bound(std::pair<std::string_view, internal::OrderKey>(key, point));
  if (it == map_.begin()) return std::nullopt;
  --it;
  if (it->first.first != key) return std::nullopt;
  return it->second;
}

absl::Status MemoryVersionSpill::ScanAfter(std::string_view key, const internal::OrderKey& after,
                                           absl::FunctionRef<bool(const SpilledVersion&)> fn) {
  for (auto it = map_.upper_bound(std::pair<std::string_view, internal::OrderKey>(key, after));
       it != map_.end() && it->first.first == key; ++it) {
    if (!fn(it->second)) break;
  }
  return absl::OkStatus();
}

void MemoryVersionSpill::PruneUpTo(history::Timestamp point) {
  if (point <= prune_point_) return;
  prune_point_ = point;
  for (auto it = map_.begin(); it != map_.end();) {
    if (it->second.expires <= point) {
      bytes_ -= spill_format::EncodedBytes(it->first.first.size(), it->second);
      --versions_;
      ++pruned_;
      it = map_.erase(it);
    } else {
      ++it;
    }
  }
}

// --- RocksVersionSpill -------------------------------------------------------------------------

// RocksDB's memory (docs/spill-format.md, "Memory"): the memtables take the spilled versions
// until their flush; blocks are read back by reloads.
constexpr size_t kMemtableBytes = 48 << 20;
constexpr size_t kBlockCacheBytes = 16 << 20;
constexpr char kKeysFamily[] = "keys";

namespace {

// How far the spill may prune, shared with the compaction filters RocksDB's background threads
// run, and what they dropped.
struct PruneState {
  absl::Mutex mu;
  history::Timestamp point ABSL_GUARDED_BY(mu) = history::Timestamp::Min();
  // Counters, bumped by the filters and read by the engine thread. Relaxed: each is read on its
  // own, and orders nothing else.
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> dropped_bytes{0};
};

// Drops the versions that expire at or before the prune point as it was when the flush or
// compaction began. An entry whose value does not decode is kept (reads report it).
class PruneFilter final : public rocksdb::CompactionFilter {
 public:
  PruneFilter(PruneState* state, history::Timestamp point) : state_(state), point_(point) {}
  bool Filter(int /*level*/, const rocksdb::Slice& key, const rocksdb::Slice& value,
              std::string* /*new_value*/, bool* /*value_changed*/) const override {
    history::Timestamp expires;
    if (!spill_format::DecodeExpiry(value.ToStringView(), &expires) || expires > point_) {
      return false;
    }
    state_->dropped.fetch_add(1, std::memory_order_relaxed);
    state_->dropped_bytes.fetch_add(key.size() + value.size(), std::memory_order_relaxed);
    return true;
  }
  const char* Name() const override { return "isowatch.SpillPrune"; }

 private:
  PruneState* state_;
  history::Timestamp point_;
};

class PruneFilterFactory final : public rocksdb::CompactionFilterFactory {
 public:
  explicit PruneFilterFactory(PruneState* state) : state_(state) {}
  // Memtable flushes too: a version that expired before it reached a file never does.
  bool ShouldFilterTableFileCreation(rocksdb::TableFileCreationReason reason) const override {
    return reason == rocksdb::TableFileCreationReason::kFlush ||
           reason == rocksdb::TableFileCreationReason::kCompaction;
  }
  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& /*context*/) override {
    history::Timestamp point;
    {
      absl::MutexLock l(&state_->mu);
      point = state_->point;
    }
    if (point == history::Timestamp::Min()) return nullptr;
    return std::make_unique<PruneFilter>(state_, point);
  }
  const char* Name() const override { return "isowatch.SpillPruneFactory"; }

 private:
  PruneState* state_;
};

// A version key's name part (all but its last 24 bytes, the place): the memtable insertion hint
// of the versions of one key.
class KeyNameTransform final : public rocksdb::SliceTransform {
 public:
  static constexpr size_t kPlaceBytes = 24;
  const char* Name() const override { return "isowatch.SpillKeyName"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return {key.data(), key.size() - kPlaceBytes};
  }
  bool InDomain(const rocksdb::Slice& key) const override { return key.size() > kPlaceBytes; }
};

}  // namespace

struct RocksVersionSpill::Db {
  ~Db() {
    for (rocksdb::ColumnFamilyHandle* h : handles) db->DestroyColumnFamilyHandle(h);
  }

  rocks::RocksDbMemoryBudget memory{kMemtableBytes, kBlockCacheBytes};
  PruneState prune;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // default (versions), keys
  rocksdb::ColumnFamilyHandle* keys = nullptr;        // evicted keys' records
  rocksdb::WriteBatch batch;
  rocksdb::WriteOptions write_options;
  rocksdb::ReadOptions read_options;
};

RocksVersionSpill::RocksVersionSpill(std::unique_ptr<Db> db) : db_(std::move(db)) {}
RocksVersionSpill::~RocksVersionSpill() = default;

namespace {

// Deletes whatever `dir` holds and creates it empty.
absl::Status ClearDir(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("spill directory: empty path");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot clear the spill directory {}: {}", dir, ec.message()));
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot create the spill directory {}: {}", dir, ec.message()));
  }
  return absl::OkStatus();
}

// Copies the files of the snapshot in `from` to the empty directory `to`: table files, which
// RocksDB never changes once written, as hard links where the file system allows; the others
// (the manifest, which the copy's database goes on writing) as copies.
absl::Status CopySnapshot(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::filesystem::directory_iterator it(from, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::filesystem::path& source = it->path();
    if (!it->is_regular_file(ec) || ec) continue;
    const std::filesystem::path target = std::filesystem::path(to) / source.filename();
    if (source.extension() == ".sst") {
      std::filesystem::create_hard_link(source, target, ec);
      if (!ec) continue;
    }
    if (!std::filesystem::copy_file(source, target, ec)) break;
  }
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot copy the spill snapshot {} to {}: {}", from, to, ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksVersionSpill>> RocksVersionSpill::Open(const std::string& dir) {
  // Derived state: what a previous process left is rebuilt, never read.
  RETURN_IF_ERROR(ClearDir(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<RocksVersionSpill> spill, OpenDir(dir));
  RETURN_IF_ERROR(rocks::FromRocksStatus(
      spill->db_->db->Put(spill->db_->write_options, spill->db_->keys, spill_format::kFormatKey,
                          spill_format::kFormatVersion),
      "writing the spill's format"));
  return spill;
}

absl::StatusOr<std::unique_ptr<RocksVersionSpill>> RocksVersionSpill::OpenFromSnapshot(
    const std::string& dir, const std::string& snapshot_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(snapshot_dir) / "CURRENT", ec)) {
    return absl::NotFoundError(fmt::format("no spill snapshot in {}", snapshot_dir));
  }
  RETURN_IF_ERROR(ClearDir(dir));
  RETURN_IF_ERROR(CopySnapshot(snapshot_dir, dir));
  ASSIGN_OR_RETURN(std::unique_ptr<RocksVersionSpill> spill, OpenDir(dir));
  std::string format;
  const rocksdb::Status f = spill->db_->db->Get(spill->db_->read_options, spill->db_->keys,
                                                spill_format::kFormatKey, &format);
  if (f.IsNotFound()) {
    spill->named_by_key_id_ = true;  // the earlier format: RenameKeyIds converts it
  } else {
    RETURN_IF_ERROR(rocks::FromRocksStatus(f, "reading the spill's format"));
    if (format != spill_format::kFormatVersion) {
      return absl::FailedPreconditionError(
          fmt::format("the spill snapshot in {} has format {}; this isowatch reads format {}",
                      snapshot_dir, format, spill_format::kFormatVersion));
    }
  }
  // The counts of the process that wrote the snapshot are not in it: RocksDB's estimates stand
  // in (everything is in table files: Snapshot flushed the memtables).
  rocksdb::DB& db = *spill->db_->db;
  uint64_t keys = 0;
  uint64_t versions_bytes = 0;
  uint64_t records_bytes = 0;
  if (!db.GetIntProperty(rocksdb::DB::Properties::kEstimateNumKeys, &keys) ||
      !db.GetIntProperty(rocksdb::DB::Properties::kTotalSstFilesSize, &versions_bytes) ||
      !db.GetIntProperty(spill->db_->keys, rocksdb::DB::Properties::kTotalSstFilesSize,
                         &records_bytes)) {
    return absl::InternalError(fmt::format("the spill in {} reports no sizes", dir));
  }
  spill->versions_ = keys;
  spill->bytes_ = versions_bytes + records_bytes;
  return spill;
}

absl::StatusOr<std::unique_ptr<RocksVersionSpill>> RocksVersionSpill::OpenDir(
    const std::string& dir) {
  auto db = std::make_unique<Db>();
  rocksdb::Options options;
  options.create_if_missing = true;
  options.keep_log_file_num = 2;
  // Writes come in large batches and are mostly never read again: memtables of 16 MiB, up to
  // three of them while one is flushed (within the cap of kMemtableBytes), no compression (the
  // values are small integers), compaction in the background.
  db->memory.ApplyTo(static_cast<rocksdb::DBOptions&>(options));
  // A Bloom filter serves the point lookups of evicted keys' versions (Find).
  db->memory.ApplyTo(static_cast<rocksdb::ColumnFamilyOptions&>(options), 16 << 20, 3,
                     /*bloom_bits_per_key=*/10);
  options.compression = rocksdb::kNoCompression;
  options.level0_file_num_compaction_trigger = 8;
  // Within one key (the name, all but the last 24 bytes) versions arrive in increasing order: a
  // memtable insertion hint per key makes those insertions cheap.
  options.memtable_insert_with_hint_prefix_extractor = std::make_shared<KeyNameTransform>();
  // Pruning (docs/spill-format.md): flushes and compactions drop expired versions, and every
  // file goes through a compaction at least once an hour, so that expired versions in files no
  // write reaches any more leave the disk too.
  options.compaction_filter_factory = std::make_shared<PruneFilterFactory>(&db->prune);
  options.periodic_compaction_seconds = 3600;
  // Evicted keys' records: small, read by point lookups, never pruned.
  rocksdb::ColumnFamilyOptions key_options;
  db->memory.ApplyTo(key_options, 4 << 20, 2, /*bloom_bits_per_key=*/10);
  key_options.compression = rocksdb::kNoCompression;
  options.create_missing_column_families = true;
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, options}, {kKeysFamily, key_options}};
  rocksdb::DB* raw = nullptr;
  if (absl::Status s =
          rocks::FromRocksStatus(rocksdb::DB::Open(options, dir, families, &db->handles, &raw),
                                 fmt::format("opening the spill in {}", dir));
      !s.ok()) {
    return s;
  }
  db->db.reset(raw);
  db->keys = db->handles[1];
  db->write_options.disableWAL = true;
  return std::unique_ptr<RocksVersionSpill>(new RocksVersionSpill(std::move(db)));
}

void RocksVersionSpill::Put(std::string_view key, const SpilledVersion& version) {
  const std::string k = spill_format::EncodeKey(key, version.at);
  const std::string v = spill_format::EncodeValue(version);
  bytes_ += k.size() + v.size();
  ++versions_;
  db_->batch.Put(k, v);
}

void RocksVersionSpill::Replace(std::string_view key, const SpilledVersion& version) {
  db_->batch.Put(spill_format::EncodeKey(key, version.at), spill_format::EncodeValue(version));
}

void RocksVersionSpill::PutKey(std::string_view key, const SpilledKey& record) {
  const std::string v = spill_format::EncodeKeyRecord(record);
  bytes_ += key.size() + v.size();
  db_->batch.Put(db_->keys, key, v);
}

absl::StatusOr<std::optional<SpilledKey>> RocksVersionSpill::FindKey(std::string_view key) {
  std::string value;
  const rocksdb::Status s = db_->db->Get(db_->read_options, db_->keys, key, &value);
  if (s.IsNotFound()) return std::nullopt;
  RETURN_IF_ERROR(rocks::FromRocksStatus(s, "reading the spill"));
  SpilledKey record;
  if (!spill_format::DecodeKeyRecord(value, &record)) {
    return absl::DataLossError("the spill holds a key record it cannot decode");
  }
  return record;
}

absl::StatusOr<std::optional<SpilledVersion>> RocksVersionSpill::Find(
    std::string_view key, const internal::OrderKey& at) {
  std::string value;
  const rocksdb::Status s =
      db_->db->Get(db_->read_options, spill_format::EncodeKey(key, at), &value);
  if (s.IsNotFound()) return std::nullopt;
  RETURN_IF_ERROR(rocks::FromRocksStatus(s, "reading the spill"));
  SpilledVersion v;
  v.at = at;
  if (!spill_format::DecodeValue(value, &v)) {
    return absl::DataLossError("the spill holds an entry it cannot decode");
  }
  return v;
}

void RocksVersionSpill::PruneUpTo(history::Timestamp point) {
  absl::MutexLock l(&db_->prune.mu);
  db_->prune.point = std::max(db_->prune.point, point);
}

absl::Status RocksVersionSpill::Compact() {
  RETURN_IF_ERROR(
      rocks::FromRocksStatus(db_->db->Flush(rocksdb::FlushOptions()), "flushing the spill"));
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  return rocks::FromRocksStatus(db_->db->CompactRange(options, nullptr, nullptr),
                                "compacting the spill");
}

uint64_t RocksVersionSpill::pruned() const {
  return db_->prune.dropped.load(std::memory_order_relaxed);
}
uint64_t RocksVersionSpill::versions() const { return versions_ - std::min(versions_, pruned()); }
uint64_t RocksVersionSpill::bytes() const {
  return bytes_ - std::min(bytes_, db_->prune.dropped_bytes.load(std::memory_order_relaxed));
}

absl::Status RocksVersionSpill::Snapshot(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::absolute(dir, ec);
  if (ec || dir.empty() || std::filesystem::exists(path, ec)) {
    return absl::InvalidArgumentError(
        fmt::format("spill snapshot directory {}: empty, unusable or already there", dir));
  }
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot create the parent of the spill snapshot {}: {}", dir, ec.message()));
  }
  rocksdb::Checkpoint* raw = nullptr;
  RETURN_IF_ERROR(rocks::FromRocksStatus(rocksdb::Checkpoint::Create(db_->db.get(), &raw),
                                         "snapshotting the spill"));
  const std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: the memtables are always flushed first. The writes skip the
  // write-ahead log, so without the flush the snapshot would miss what they hold.
  return rocks::FromRocksStatus(
      checkpoint->CreateCheckpoint(path.string(), /*log_size_for_flush=*/0),
      fmt::format("snapshotting the spill to {}", dir));
}

rocks::RocksDbMemory RocksVersionSpill::rocksdb_memory() const {
  return db_->memory.Measure(*db_->db);
}

absl::Status RocksVersionSpill::Flush() {
  if (db_->batch.Count() == 0) return absl::OkStatus();
  rocksdb::Status s = db_->db->Write(db_->write_options, &db_->batch);
  db_->batch.Clear();
  return rocks::FromRocksStatus(s, "writing to the spill");
}

namespace {

// The entry under `it`: its key's name and version, or DataLoss if it does not decode.
absl::Status DecodeEntry(const rocksdb::Iterator& it, std::string_view* key, SpilledVersion* v) {
  if (!spill_format::DecodeKey(it.key().ToStringView(), key, &v->at) ||
      !spill_format::DecodeValue(it.value().ToStringView(), v)) {
    return absl::DataLossError("the spill holds an entry it cannot decode");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<SpilledVersion>> RocksVersionSpill::NewestBefore(
    std::string_view key, const internal::OrderKey& point) {
  std::unique_ptr<rocksdb::Iterator> it(db_->db->NewIterator(db_->read_options));
  const std::string target = spill_format::EncodeKey(key, point);
  it->SeekForPrev(target);
  if (it->Valid() && it->key().ToStringView() == target) it->Prev();
  if (!it->Valid()) {
    if (absl::Status s = rocks::FromRocksStatus(it->status(), "reading the spill"); !s.ok()) {
      return s;
    }
    return std::nullopt;
  }
  std::string_view found_key;
  SpilledVersion v;
  if (absl::Status s = DecodeEntry(*it, &found_key, &v); !s.ok()) return s;
  if (found_key != key) return std::nullopt;
  return v;
}

absl::Status RocksVersionSpill::ScanAfter(std::string_view key, const internal::OrderKey& after,
                                          absl::FunctionRef<bool(const SpilledVersion&)> fn) {
  std::unique_ptr<rocksdb::Iterator> it(db_->db->NewIterator(db_->read_options));
  const std::string from = spill_format::EncodeKey(key, after);
  for (it->Seek(from); it->Valid(); it->Next()) {
    if (it->key().ToStringView() == from) continue;
    std::string_view found_key;
    SpilledVersion v;
    RETURN_IF_ERROR(DecodeEntry(*it, &found_key, &v));
    if (found_key != key || !fn(v)) return absl::OkStatus();
  }
  return rocks::FromRocksStatus(it->status(), "reading the spill");
}

absl::Status RocksVersionSpill::RenameKeyIds(
    absl::FunctionRef<std::optional<std::string>(KeyId)> name) {
  if (!named_by_key_id_) return absl::OkStatus();
  // Every entry is written again under its key's name, in write batches of bounded size, and
  // the format goes in last: a crash half-way leaves a directory that the next start clears
  // (OpenFromSnapshot copies the snapshot again; the snapshot itself is never written).
  constexpr size_t kBatchBytes = size_t{4} << 20;
  rocksdb::WriteBatch batch;
  auto write = [&](bool last) -> absl::Status {
    if (batch.GetDataSize() < kBatchBytes && !last) return absl::OkStatus();
    RETURN_IF_ERROR(rocks::FromRocksStatus(db_->db->Write(db_->write_options, &batch),
                                           "renaming the spill's keys"));
    batch.Clear();
    return absl::OkStatus();
  };
  auto rename = [&](KeyId key) -> absl::StatusOr<std::string> {
    std::optional<std::string> n = name(key);
    if (!n) {
      return absl::DataLossError(fmt::format(
          "the spill snapshot holds key id {}, which the history does not know", key.value()));
    }
    return *std::move(n);
  };
  for (rocksdb::ColumnFamilyHandle* family : {db_->db->DefaultColumnFamily(), db_->keys}) {
    const bool versions = family != db_->keys;
    const size_t id_key_bytes = versions ? 4 + 24 : 4;
    // The iterator reads the spill as it was when it was made, so it never meets a renamed entry.
    std::unique_ptr<rocksdb::Iterator> it(db_->db->NewIterator(db_->read_options, family));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string_view k = it->key().ToStringView();
      if (k.size() != id_key_bytes) {
        return absl::DataLossError("the spill snapshot holds a key of neither format");
      }
      uint32_t raw = 0;
      for (int i = 0; i < 4; ++i) raw = (raw << 8) | static_cast<uint8_t>(k[i]);
      const KeyId id(raw);
      ASSIGN_OR_RETURN(std::string n, rename(id));
      if (versions) n.append(k.substr(4));
      batch.Delete(family, k);
      batch.Put(family, n, it->value());
      RETURN_IF_ERROR(write(false));
    }
    RETURN_IF_ERROR(rocks::FromRocksStatus(it->status(), "renaming the spill's keys"));
  }
  batch.Put(db_->keys, spill_format::kFormatKey, spill_format::kFormatVersion);
  RETURN_IF_ERROR(write(true));
  named_by_key_id_ = false;
  return absl::OkStatus();
}

}  // namespace isowatch::engine
