// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace rocksdb {
class Cache;
class DB;
struct ColumnFamilyOptions;
struct DBOptions;
class WriteBufferManager;
}  // namespace rocksdb

namespace isowatch::rocks {

// The memory one RocksDB database holds, as RocksDB counts it.
struct RocksDbMemory {
  // Memtables of every column family: the active ones, those waiting for their flush and
  // flushed ones still pinned by an iterator.
  uint64_t memtables = 0;
  // Table readers outside the block cache (with index and filter blocks in the cache, little
  // more than one small object per open SST file).
  uint64_t table_readers = 0;
  // Blocks in the block cache (data, index and filter blocks), not counting the room the cache
  // reserves for the memtables, which `memtables` already counts.
  uint64_t block_cache = 0;

  uint64_t total() const { return memtables + table_readers + block_cache; }
};

// What bounds one RocksDB database's memory: a write buffer manager that caps the memtables of
// all its column families together, and one LRU block cache, charged with the memtables too,
// that holds the data blocks and the index and filter blocks of every SST file (so the table
// readers do not grow with the data). The cache's capacity is `memtable_bytes +
// block_bytes`: blocks get what the memtables leave. The bounds are soft: a memtable being
// written or a block being read can take a database briefly past them.
//
// Thread-safe (RocksDB's objects are). Apply to the options of one database, and keep the
// budget alive as long as that database is open; Measure reads the database's properties.
class RocksDbMemoryBudget {
 public:
  RocksDbMemoryBudget(size_t memtable_bytes, size_t block_bytes);
  ~RocksDbMemoryBudget();
  RocksDbMemoryBudget(const RocksDbMemoryBudget&) = delete;
  RocksDbMemoryBudget& operator=(const RocksDbMemoryBudget&) = delete;

  // Sets the write buffer manager.
  void ApplyTo(rocksdb::DBOptions& options) const;
  // Sets the column family's memtables (`write_buffer_size` each, at most `max_memtables`,
  // within the database's cap) and its block-based tables' cache; with `bloom_bits_per_key` > 0,
  // a Bloom filter of whole keys in each table for point lookups, held with the index by the
  // table readers rather than in the cache.
  void ApplyTo(rocksdb::ColumnFamilyOptions& options, size_t write_buffer_size, int max_memtables,
               int bloom_bits_per_key = 0) const;

  // What `db`, opened with these options, holds now.
  RocksDbMemory Measure(rocksdb::DB& db) const;

  size_t memtable_bytes() const { return memtable_bytes_; }

 private:
  const size_t memtable_bytes_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffers_;
};

}  // namespace isowatch::rocks
