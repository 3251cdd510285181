// SPDX-License-Identifier: Apache-2.0
#include "isowatch/rocks/rocksdb_memory.h"

#include <algorithm>

#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_buffer_manager.h"

namespace isowatch::rocks {

RocksDbMemoryBudget::RocksDbMemoryBudget(size_t memtable_bytes, size_t block_bytes)
    : memtable_bytes_(memtable_bytes),
      cache_(rocksdb::NewLRUCache(memtable_bytes + block_bytes)),
      write_buffers_(std::make_shared<rocksdb::WriteBufferManager>(memtable_bytes, cache_)) {}

RocksDbMemoryBudget::~RocksDbMemoryBudget() = default;

void RocksDbMemoryBudget::ApplyTo(rocksdb::DBOptions& options) const {
  options.write_buffer_manager = write_buffers_;
}

void RocksDbMemoryBudget::ApplyTo(rocksdb::ColumnFamilyOptions& options, size_t write_buffer_size,
                                  int max_memtables, int bloom_bits_per_key) const {
  options.write_buffer_size = write_buffer_size;
  options.max_write_buffer_number = max_memtables;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache_;
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  // The newest files' index blocks are read at every lookup: keep them in the cache.
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  if (bloom_bits_per_key > 0) {
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(bloom_bits_per_key));
    // Filters are read at every lookup: held by the table readers (about bloom_bits_per_key / 8
    // bytes per entry, counted in table_readers) rather than evicted from the cache and read
    // again.
    table.cache_index_and_filter_blocks = false;
  }
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
}

RocksDbMemory RocksDbMemoryBudget::Measure(rocksdb::DB& db) const {
  RocksDbMemory m;
  // Both properties are summed over the column families.
  uint64_t value = 0;
  if (db.GetAggregatedIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &value)) {
    m.memtables = value;
  }
  if (db.GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateTableReadersMem, &value)) {
    m.table_readers = value;
  }
  const size_t usage = cache_->GetUsage();
  const size_t reserved = write_buffers_->dummy_entries_in_cache_usage();
  m.block_cache = usage - std::min(usage, reserved);
  return m;
}

}  // namespace isowatch::rocks
