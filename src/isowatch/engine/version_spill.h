// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/history/value.h"
#include "isowatch/rocks/rocksdb_memory.h"

namespace isowatch::engine {

// A committed version the engine collected from memory, as the spill keeps it: everything a
// later check of an older snapshot needs without the writer's record (docs/spill-format.md).
struct SpilledVersion {
  internal::OrderKey at;  // commit, phase, writer: its place in the key's chain
  // From when on no exact check needs the version (VersionSpill::PruneUpTo): for a register the
  // commit timestamp of the key's next version (a read at a later point sees that one or a
  // newer one), for a list its own commit timestamp (a read at a later point does not need to
  // take its appends out of the list).
  history::Timestamp expires;
  history::Timestamp writer_start;      // the writer's start (SI NoConflict); Min if it has none
  history::Value value;                 // registers: the writer's final value
  std::vector<history::Value> appends;  // lists: the writer's appends to the key, in order
  std::string writer_name;              // the writer's id as its source wrote it

  friend bool operator==(const SpilledVersion&, const SpilledVersion&) = default;
};

// What the engine keeps about a register key whose last version it evicted (KeyState fields of
// the same names), so that the key's state can leave memory too (docs/engine.md, "Spill").
struct SpilledKey {
  internal::OrderKey base;    // KeyState::spilled_base: the evicted version, in the spill
  history::Value base_value;  // its value (a read of the key needs no lookup of the version)
  history::Timestamp trim_point;
  internal::OrderKey dropped_upto;
  int64_t max_duration = 0;

  friend bool operator==(const SpilledKey&, const SpilledKey&) = default;
};

// Where the engine puts the versions it collects, so that a check which needs a snapshot older
// than what memory holds (a transaction longer than any before it, a late arrival, or a memory
// budget that keeps less in memory) reloads it instead of going unjudged.
//
// Keys are named as the source named them (spill_format::EncodeIntKeyName, EncodeBytesKeyName),
// not by the history's KeyId: what the spill holds means the same to any history, one that
// gave the key another id included (docs/spill-format.md, "Key names").
// Versions are written with Put and become visible to reads after Flush. Versions of one key
// are ordered by OrderKey. Once PruneUpTo(P) was called, the spill may drop, at any later time,
// the versions that expire at or before P: reads of points whose timestamp is above P stay
// exact, reads at or below it may miss versions (the engine treats them as horizon misses).
// Engine-thread only.
class VersionSpill {
 public:
  virtual ~VersionSpill() = default;

  // Adds a version of `key` (not visible to reads until Flush).
  virtual void Put(std::string_view key, const SpilledVersion& version) = 0;
  // Writes again a version put before, with another expiry (not counted again; visible after
  // Flush).
  virtual void Replace(std::string_view key, const SpilledVersion& version) = 0;
  // Makes every version put so far durable for this process and visible to reads.
  virtual absl::Status Flush() = 0;

  // The newest version of `key` ordered before `point`, or nullopt if there is none.
  virtual absl::StatusOr<std::optional<SpilledVersion>> NewestBefore(
      std::string_view key, const internal::OrderKey& point) = 0;

  // The version of `key` at exactly `at`, or nullopt if the spill does not hold it (a point
  // lookup: cheaper than NewestBefore).
  virtual absl::StatusOr<std::optional<SpilledVersion>> Find(std::string_view key,
                                                             const internal::OrderKey& at) = 0;

  // Calls `fn` with the versions of `key` ordered after `after`, oldest first, until it returns
  // false or they run out.
  virtual absl::Status ScanAfter(std::string_view key, const internal::OrderKey& after,
                                 absl::FunctionRef<bool(const SpilledVersion&)> fn) = 0;

  // Allows the spill to drop the versions with `expires` <= point, from now on. Points only
  // grow: a lower one is ignored.
  virtual void PruneUpTo(history::Timestamp point) = 0;
  // Drops now what PruneUpTo allows (the RocksDB spill otherwise drops it as its background
  // compactions rewrite the data, and when it flushes memtables).
  virtual absl::Status Compact() = 0;

  // Keeps `record` as the state of evicted key `key`, in place of any record before it (visible
  // to FindKey after Flush). Records are never pruned.
  virtual void PutKey(std::string_view key, const SpilledKey& record) = 0;
  // The last record flushed for `key`, or nullopt if there is none.
  virtual absl::StatusOr<std::optional<SpilledKey>> FindKey(std::string_view key) = 0;

  // Whether the spill names keys by the history's KeyId, as a snapshot written by an earlier
  // isowatch does (docs/spill-format.md, "Earlier format"): RenameKeyIds must then run before
  // any other call.
  virtual bool named_by_key_id() const { return false; }
  // Renames every key of a spill named_by_key_id: `name` gives the name of each key id, or
  // nullopt for an id the history does not know (DataLoss). Durable like a Flush.
  virtual absl::Status RenameKeyIds(absl::FunctionRef<std::optional<std::string>(KeyId)> /*name*/) {
    return absl::OkStatus();
  }

  // Versions put so far less those dropped, and an estimate of the bytes they take (with every
  // key record written, including those replaced since).
  virtual uint64_t versions() const = 0;
  virtual uint64_t bytes() const = 0;
  // Versions dropped by pruning so far.
  virtual uint64_t pruned() const = 0;
};

// A VersionSpill in memory, for tests and for checks that must not touch the disk.
class MemoryVersionSpill final : public VersionSpill {
 public:
  void Put(std::string_view key, const SpilledVersion& version) override;
  void Replace(std::string_view key, const SpilledVersion& version) override;
  absl::Status Flush() override;
  absl::StatusOr<std::optional<SpilledVersion>> NewestBefore(
      std::string_view key, const internal::OrderKey& point) override;
  absl::StatusOr<std::optional<SpilledVersion>> Find(std::string_view key,
                                                     const internal::OrderKey& at) override;
  absl::Status ScanAfter(std::string_view key, const internal::OrderKey& after,
                         absl::FunctionRef<bool(const SpilledVersion&)> fn) override;
  // Drops at once (a scan of every version): this spill is for tests.
  void PruneUpTo(history::Timestamp point) override;
  absl::Status Compact() override { return absl::OkStatus(); }
  void PutKey(std::string_view key, const SpilledKey& record) override;
  absl::StatusOr<std::optional<SpilledKey>> FindKey(std::string_view key) override;
  uint64_t versions() const override { return versions_; }
  uint64_t bytes() const override { return bytes_; }
  uint64_t pruned() const override { return pruned_; }

 private:
  struct Less {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      if (a.first != b.first) return std::string_view(a.first) < std::string_view(b.first);
      return a.second < b.second;
    }
  };
  std::map<std::pair<std::string, internal::OrderKey>, SpilledVersion, Less> map_;
  std::vector<std::pair<std::string, SpilledVersion>> pending_;  // not yet flushed
  std::map<std::string, SpilledKey, std::less<>> key_records_;
  std::vector<std::pair<std::string, SpilledKey>> pending_keys_;  // not yet flushed
  history::Timestamp prune_point_ = history::Timestamp::Min();
  uint64_t versions_ = 0;
  uint64_t bytes_ = 0;
  uint64_t pruned_ = 0;
};

// A VersionSpill in a RocksDB database of its own (format in docs/spill-format.md). Its contents
// are derived state: Open clears whatever a previous process left, and writes skip the
// write-ahead log (the daemon rebuilds engine state from its durable log after a restart, or
// from a checkpoint: Snapshot and OpenFromSnapshot).
class RocksVersionSpill final : public VersionSpill {
 public:
  // Opens an empty spill in `dir`, deleting whatever it holds.
  static absl::StatusOr<std::unique_ptr<RocksVersionSpill>> Open(const std::string& dir);
  // Opens the spill in `dir` (deleting whatever it holds) starting from a copy of the snapshot
  // in `snapshot_dir`, which is left untouched so that it can be used again. The copy
  // hard-links the snapshot's table files where it can and copies the rest. versions() and
  // bytes() start from RocksDB's estimates of the copy; pruned() from 0; the prune point from
  // Min (PruneUpTo is per process, docs/spill-format.md, "Snapshots"). Errors: NotFound when
  // `snapshot_dir` holds no snapshot; Unavailable when a directory cannot be cleared, created
  // or copied; RocksDB's error when the copy does not open.
  static absl::StatusOr<std::unique_ptr<RocksVersionSpill>> OpenFromSnapshot(
      const std::string& dir, const std::string& snapshot_dir);
  ~RocksVersionSpill() override;

  void Put(std::string_view key, const SpilledVersion& version) override;
  void Replace(std::string_view key, const SpilledVersion& version) override;
  absl::Status Flush() override;
  absl::StatusOr<std::optional<SpilledVersion>> NewestBefore(
      std::string_view key, const internal::OrderKey& point) override;
  absl::StatusOr<std::optional<SpilledVersion>> Find(std::string_view key,
                                                     const internal::OrderKey& at) override;
  absl::Status ScanAfter(std::string_view key, const internal::OrderKey& after,
                         absl::FunctionRef<bool(const SpilledVersion&)> fn) override;
  // Versions that expire at or before the point are dropped by a compaction filter, as flushes
  // and compactions rewrite them (docs/spill-format.md, "Pruning").
  void PruneUpTo(history::Timestamp point) override;
  // Compacts the whole spill.
  absl::Status Compact() override;
  void PutKey(std::string_view key, const SpilledKey& record) override;
  absl::StatusOr<std::optional<SpilledKey>> FindKey(std::string_view key) override;
  bool named_by_key_id() const override { return named_by_key_id_; }
  absl::Status RenameKeyIds(absl::FunctionRef<std::optional<std::string>(KeyId)> name) override;
  uint64_t versions() const override;
  uint64_t bytes() const override;
  uint64_t pruned() const override;

  // Writes a consistent copy of the spill as it is now to `dir`, which must not exist: every
  // version and key record Flush'ed so far, memtables included (they are flushed first, as the
  // writes skip the write-ahead log); what was Put but not Flush'ed is not in it. Table files are
  // hard-linked where the file system allows (RocksDB's Checkpoint). Errors: InvalidArgument
  // when `dir` exists; RocksDB's error otherwise (a partial copy may then be left in `dir`).
  absl::Status Snapshot(const std::string& dir);

  // The memory RocksDB holds for the spill now (bounded as docs/spill-format.md, "Memory",
  // says). Unlike the rest of the class, thread-safe.
  rocks::RocksDbMemory rocksdb_memory() const;

 private:
  struct Db;
  explicit RocksVersionSpill(std::unique_ptr<Db> db);
  // Opens the database in `dir` as it is (creating it if it holds none), with the spill's
  // options.
  static absl::StatusOr<std::unique_ptr<RocksVersionSpill>> OpenDir(const std::string& dir);

  std::unique_ptr<Db> db_;
  bool named_by_key_id_ = false;  // a snapshot of the earlier format, not renamed yet
  uint64_t versions_ = 0;         // written
  uint64_t bytes_ = 0;            // written (key records included)
};

// The spill's encodings (docs/spill-format.md), exposed for tests and tools.
namespace spill_format {
// A key's name in the spill: 0x00 and the integer (8 bytes, big-endian, sign bit flipped), or
// 0x01, the length of the bytes (4 bytes, big-endian) and the bytes. No name is a prefix of
// another, so the versions of one key are one contiguous range.
std::string EncodeIntKeyName(int64_t key);
std::string EncodeBytesKeyName(std::string_view key);
// Appends the name to `out`.
void AppendIntKeyName(std::string& out, int64_t key);
void AppendBytesKeyName(std::string& out, std::string_view key);
// The earlier format's version key (28 bytes: the key id, 4 bytes big-endian, then the place)
// and key record key (the key id), for RenameKeyIds and its tests.
std::string EncodeKeyIdKey(KeyId key, const internal::OrderKey& at);
std::string EncodeKeyId(KeyId key);
// The spill's format, under kFormatKey in the `keys` column family (which no key name equals):
// absent in a spill of the earlier format.
inline constexpr std::string_view kFormatKey =
    "\xff"
    "format";
inline constexpr std::string_view kFormatVersion = "2";
// Bytes of a version's key and value together, for a key whose name takes `name_bytes`.
size_t EncodedBytes(size_t name_bytes, const SpilledVersion& version);
// A version's key: the key's name, then its place (24 bytes).
std::string EncodeKey(std::string_view name, const internal::OrderKey& at);
// Splits a version's key into the key's name and the place; false if it is too short.
bool DecodeKey(std::string_view bytes, std::string_view* name, internal::OrderKey* at);
std::string EncodeValue(const SpilledVersion& version);
bool DecodeValue(std::string_view bytes, SpilledVersion* version);
// The expiry alone, from the first 16 bytes of a value.
bool DecodeExpiry(std::string_view bytes, history::Timestamp* expires);
// An evicted key's record, in the `keys` column family, under the key's name.
std::string EncodeKeyRecord(const SpilledKey& record);
bool DecodeKeyRecord(std::string_view bytes, SpilledKey* record);
}  // namespace spill_format

}  // namespace isowatch::engine
