// SPDX-License-Identifier: Apache-2.0
#include "isowatch/store/internal/database.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "rocksdb/convenience.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"

#include "isowatch/common/status_macros.h"
#include "isowatch/rocks/rocksdb_status.h"
#include "isowatch/store/internal/codec.h"

namespace isowatch::store::internal {
namespace {

using rocks::FromRocksStatus;
using rocks::RocksDbMemoryBudget;

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

Database::~Database() {
  if (db == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : all) {
    // Destroying a handle only releases memory; a failure leaves nothing to undo.
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  db->Close().PermitUncheckedError();
}

rocksdb::ColumnFamilyHandle* Database::Find(std::string_view name) const {
  for (rocksdb::ColumnFamilyHandle* h : all) {
    if (h->GetName() == name) return h;
  }
  return nullptr;
}

absl::Status OpenDatabase(const std::string& dir, const StoreOptions& options,
                          uint32_t format_version, Database* database) {
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
  database->memory.ApplyTo(db_options);

  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName};
  if (exists) {
    names.clear();
    RETURN_IF_ERROR(FromRocksStatus(rocksdb::DB::ListColumnFamilies(db_options, dir, &names),
                                    fmt::format("listing the column families of {}", dir)));
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.reserve(names.size());
  for (const std::string& name : names) {
    descriptors.emplace_back(name, CfOptions(database->memory, name));
  }

  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(
      FromRocksStatus(rocksdb::DB::Open(db_options, dir, descriptors, &database->all, &raw),
                      fmt::format("opening the store in {}", dir)));
  database->db.reset(raw);

  // The format version decides whether this is a store this code can read.
  std::optional<uint32_t> version;
  if (rocksdb::ColumnFamilyHandle* meta = database->Find(kMetaCf); meta != nullptr) {
    std::string value;
    const rocksdb::Status s =
        database->db->Get(rocksdb::ReadOptions(), meta, ToSlice(kFormatVersionKey), &value);
    if (s.ok()) {
      ASSIGN_OR_RETURN(version, DecodeFormatVersion(value));
    } else if (!s.IsNotFound()) {
      return FromRocksStatus(s, fmt::format("reading the format version of {}", dir));
    }
  }
  if (version.has_value() && *version != format_version) {
    return absl::FailedPreconditionError(
        fmt::format("the store in {} has format version {}; this isowatchd reads version {} "
                    "(docs/store-format.md)",
                    dir, *version, format_version));
  }
  if (!version.has_value()) {
    // A new store, or one whose creation was interrupted: every column family must be empty.
    for (rocksdb::ColumnFamilyHandle* h : database->all) {
      std::unique_ptr<rocksdb::Iterator> it(database->db->NewIterator(rocksdb::ReadOptions(), h));
      it->SeekToFirst();
      RETURN_IF_ERROR(FromRocksStatus(it->status(), fmt::format("reading {}", dir)));
      if (it->Valid()) {
        return absl::FailedPreconditionError(fmt::format(
            "{} holds a RocksDB database that is not an isowatch store (no format version)", dir));
      }
    }
  }
  for (rocksdb::ColumnFamilyHandle* h : database->all) {
    if (h->GetName() != rocksdb::kDefaultColumnFamilyName &&
        std::find(kOwnCfs.begin(), kOwnCfs.end(), h->GetName()) == kOwnCfs.end()) {
      return absl::FailedPreconditionError(
          fmt::format("the store in {} has an unknown column family \"{}\"", dir, h->GetName()));
    }
  }
  for (std::string_view name : kOwnCfs) {
    if (database->Find(name) != nullptr) continue;
    // Some came later within version 2: a store written before them lacks them.
    if (version.has_value() &&
        std::find(kLaterCfs.begin(), kLaterCfs.end(), name) == kLaterCfs.end()) {
      return absl::DataLossError(
          fmt::format("the store in {} lacks its column family \"{}\"", dir, name));
    }
    rocksdb::ColumnFamilyHandle* created = nullptr;
    RETURN_IF_ERROR(
        FromRocksStatus(database->db->CreateColumnFamily(CfOptions(database->memory, name),
                                                         std::string(name), &created),
                        fmt::format("creating column family {} in {}", name, dir)));
    database->all.push_back(created);
  }
  database->meta = database->Find(kMetaCf);
  database->log = database->Find(kLogCf);
  database->streams = database->Find(kStreamsCf);
  database->violations = database->Find(kViolationsCf);
  database->violation_ids = database->Find(kViolationIdsCf);
  database->refusals = database->Find(kRefusalsCf);
  database->checkpoint = database->Find(kCheckpointCf);
  database->epochs = database->Find(kEpochsCf);
  database->summaries = database->Find(kSummariesCf);
  database->summary_deltas = database->Find(kSummaryDeltasCf);
  database->summarised_ids = database->Find(kSummarisedIdsCf);

  if (!version.has_value()) {
    rocksdb::WriteOptions write_options;
    write_options.sync = true;
    RETURN_IF_ERROR(
        FromRocksStatus(database->db->Put(write_options, database->meta, ToSlice(kFormatVersionKey),
                                          EncodeFormatVersion(format_version)),
                        fmt::format("writing the format version of {}", dir)));
  }
  return absl::OkStatus();
}

}  // namespace isowatch::store::internal
