// SPDX-License-Identifier: Apache-2.0
//
// Range reads and tombstones: History's accessors and HistoryBuilder's part, kept apart from the
// operations' code.
#include "isowatch/history/range_read.h"

#include <cstdint>
#include <span>
#include <vector>

#include "isowatch/common/check.h"
#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::history {

std::span<const RangeRead> History::RangeReadsOf(TxnId id) const {
  auto it = range_index_.find(id.value());
  if (it == range_index_.end()) return {};
  const auto [begin, end] = it->second;
  return std::span<const RangeRead>(range_reads_).subspan(begin, end - begin);
}

void HistoryBuilder::RangeRead(KeyBound low, KeyBound high, std::span<const KeyValue> live,
                               std::span<const KeyValue> dead) {
  ISOWATCH_CHECK(!live_, "range reads in a live history (the ingest protocol has none)");
  ISOWATCH_CHECK(open_, "a range read outside a transaction");
  History& h = history_;
  const Transaction& t = h.txns_.back();
  history::RangeRead r{
      .position = static_cast<uint32_t>(h.ops_.size() - t.ops_begin),
      .low = low,
      .high = high,
      .pairs_begin = h.range_pairs_.size(),
      .live_count = static_cast<uint32_t>(live.size()),
      .dead_count = static_cast<uint32_t>(dead.size()),
  };
  h.range_pairs_.insert(h.range_pairs_.end(), live.begin(), live.end());
  h.range_pairs_.insert(h.range_pairs_.end(), dead.begin(), dead.end());
  const auto index = static_cast<uint32_t>(h.range_reads_.size());
  h.range_reads_.push_back(r);
  auto [it, inserted] = h.range_index_.try_emplace(h.size() - 1, index, index);
  ++it->second.second;
}

void HistoryBuilder::MarkTombstone(KeyId key, Value v) {
  ISOWATCH_CHECK(!live_, "tombstones in a live history (the ingest protocol has none)");
  history_.tombstones_.insert(KeyValue{key, v});
}

void HistoryBuilder::DropOpenRangeReads() {
  History& h = history_;
  if (h.range_index_.empty()) return;
  auto it = h.range_index_.find(h.size() - 1);
  if (it == h.range_index_.end()) return;
  const uint32_t begin = it->second.first;
  h.range_pairs_.resize(h.range_reads_[begin].pairs_begin);
  h.range_reads_.resize(begin);
  h.range_index_.erase(it);
}

void HistoryBuilder::MarkRangeReadKeys(std::vector<uint8_t>& used_as_register) const {
  const History& h = history_;
  for (const history::RangeRead& r : h.range_reads_) {
    if (!r.low.unbounded) used_as_register[r.low.key.value()] = 1;
    if (!r.high.unbounded) used_as_register[r.high.key.value()] = 1;
  }
  for (const KeyValue& kv : h.range_pairs_) used_as_register[kv.key.value()] = 1;
  for (const KeyValue& kv : h.tombstones_) used_as_register[kv.key.value()] = 1;
}

}  // namespace isowatch::history
