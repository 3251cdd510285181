// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the store: its RocksDB database (docs/store-format.md), that is the column families
// and meta keys it is made of, and the opening of the database with the checks of its format.

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rocksdb/db.h"
#include "rocksdb/slice.h"

#include "isowatch/rocks/rocksdb_memory.h"
#include "isowatch/store/store.h"

namespace isowatch::store::internal {

// The column families.
inline constexpr std::string_view kMetaCf = "meta";
inline constexpr std::string_view kLogCf = "log";
inline constexpr std::string_view kStreamsCf = "streams";
inline constexpr std::string_view kViolationsCf = "violations";
inline constexpr std::string_view kViolationIdsCf = "violation_ids";
inline constexpr std::string_view kRefusalsCf = "refusals";
inline constexpr std::string_view kCheckpointCf = "checkpoint";
inline constexpr std::string_view kEpochsCf = "epochs";
inline constexpr std::string_view kSummariesCf = "violation_summaries";
inline constexpr std::string_view kSummaryDeltasCf = "summary_deltas";
inline constexpr std::string_view kSummarisedIdsCf = "summarised_ids";
inline constexpr std::array<std::string_view, 11> kOwnCfs = {
    kMetaCf,       kLogCf,    kStreamsCf,   kViolationsCf,    kViolationIdsCf, kRefusalsCf,
    kCheckpointCf, kEpochsCf, kSummariesCf, kSummaryDeltasCf, kSummarisedIdsCf};
// Column families added within version 2, which a store written before them lacks (opening
// creates them).
inline constexpr std::array<std::string_view, 5> kLaterCfs = {
    kCheckpointCf, kEpochsCf, kSummariesCf, kSummaryDeltasCf, kSummarisedIdsCf};

// The keys of the `meta` column family.
inline constexpr std::string_view kFormatVersionKey = "format_version";
inline constexpr std::string_view kLogStartKey = "log_start";
inline constexpr std::string_view kWindowsDoneKey = "windows_done";
inline constexpr std::string_view kCheckpointKey = "checkpoint";
inline constexpr std::string_view kCounterTotalsKey = "counter_totals";
// Followed by a violation kind (EncodeViolationCountKey): one key per kind found.
inline constexpr std::string_view kViolationCountPrefix = "violation_count:";
// Followed by a violation kind (EncodeSummarisedCountKey): one key per kind summarised.
inline constexpr std::string_view kSummarisedCountPrefix = "violation_summarised:";
inline constexpr std::string_view kViolationSpaceKey = "violation_space";

// RocksDB's memory (docs/store-format.md, "Memory"): the memtables of all column families
// together, and the blocks read back (recovery, violation queries).
inline constexpr size_t kMemtableBytes = 64 << 20;
inline constexpr size_t kBlockCacheBytes = 16 << 20;

inline rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }
inline std::string_view ToView(const rocksdb::Slice& s) {
  return std::string_view(s.data(), s.size());
}
inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// The RocksDB database and its column family handles, and the memory budget they share. Once
// open, every handle is set. Destroys the handles, then closes the database (a failure to close
// is ignored: there is nothing left to undo). Thread-safe as RocksDB is, once open.
struct Database {
  Database() = default;
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // The handle of column family `name`, or nullptr if it is not open.
  rocksdb::ColumnFamilyHandle* Find(std::string_view name) const;

  rocks::RocksDbMemoryBudget memory{kMemtableBytes, kBlockCacheBytes};
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> all;  // every opened or created handle
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  rocksdb::ColumnFamilyHandle* log = nullptr;
  rocksdb::ColumnFamilyHandle* streams = nullptr;
  rocksdb::ColumnFamilyHandle* violations = nullptr;
  rocksdb::ColumnFamilyHandle* violation_ids = nullptr;
  rocksdb::ColumnFamilyHandle* refusals = nullptr;
  rocksdb::ColumnFamilyHandle* checkpoint = nullptr;
  rocksdb::ColumnFamilyHandle* epochs = nullptr;
  rocksdb::ColumnFamilyHandle* summaries = nullptr;
  rocksdb::ColumnFamilyHandle* summary_deltas = nullptr;
  rocksdb::ColumnFamilyHandle* summarised_ids = nullptr;
};

// Opens into `*database` (new, not yet open) the store's database in directory `dir`, creating
// it (with any missing parent directories) when options.create_if_missing allows. Checks that
// it is an isowatch store of format version `format_version` (or empty), creates the column
// families it lacks, sets every handle and, for a new store, writes the format version, synced.
// Errors (as Store::Open): InvalidArgument for an empty `dir`; NotFound when there is no store
// and none may be created; FailedPrecondition for a store of another format version or a
// RocksDB database that is not an isowatch store; Unavailable when the directory cannot be
// created, read or locked; DataLoss when the format version does not decode or a column family
// is missing.
absl::Status OpenDatabase(const std::string& dir, const StoreOptions& options,
                          uint32_t format_version, Database* database);

}  // namespace isowatch::store::internal

namespace isowatch::store {

// The store's database (store.h declares the type; every file of the store defines its members
// with it complete).
struct Store::Handles : internal::Database {};

}  // namespace isowatch::store
