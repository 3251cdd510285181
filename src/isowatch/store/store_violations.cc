// SPDX-License-Identifier: Apache-2.0
// The store's violations (store.h, PutViolation and QueryViolations): each stored once under its
// id, in insertion order, and read back a page at a time.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "spdlog/spdlog.h"

#include "isowatch/common/status_macros.h"
#include "isowatch/rocks/rocksdb_status.h"
#include "isowatch/store/internal/codec.h"
#include "isowatch/store/internal/database.h"
#include "isowatch/store/store.h"

namespace isowatch::store {
namespace {

using internal::DecodeNumberKey;
using internal::EncodeNumberKey;
using internal::ToSlice;
using internal::ToView;
using rocks::FromRocksStatus;

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

}  // namespace

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
  ViolationKind kind{.checker = record.checker, .level = record.level, .anomaly = record.anomaly};
  auto [count, _] = violation_counts_.try_emplace(std::move(kind), 0);
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->violations, number, internal::EncodeViolation(record)),
                      "encoding a violation"));
  RETURN_IF_ERROR(FromRocksStatus(batch.Put(handles_->violation_ids, ToSlice(record.id), number),
                                  "encoding a violation"));
  RETURN_IF_ERROR(
      FromRocksStatus(batch.Put(handles_->meta, internal::EncodeViolationCountKey(count->first),
                                EncodeNumberKey(count->second + 1)),
                      "encoding a violation count"));
  RETURN_IF_ERROR(
      Write(batch, options_.sync_violations, fmt::format("storing violation {}", record.id)));
  ++count->second;
  ++next_violation_;
  violation_count_.store(next_violation_ - 1, std::memory_order_release);
  return true;
}

absl::Status Store::LoadViolationCounts(uint64_t stored) {
  std::map<ViolationKind, uint64_t> counts;
  uint64_t sum = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->meta));
    for (it->Seek(ToSlice(internal::kViolationCountPrefix));
         it->Valid() && ToView(it->key()).starts_with(internal::kViolationCountPrefix);
         it->Next()) {
      ASSIGN_OR_RETURN(ViolationKind kind, internal::DecodeViolationCountKey(ToView(it->key())));
      ASSIGN_OR_RETURN(const uint64_t n, DecodeNumberKey(ToView(it->value())));
      counts[std::move(kind)] = n;
      sum += n;
    }
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the violation counts"));
  }
  if (sum != stored) {
    // Counted again from the records, once: a store written before the counts were kept.
    counts.clear();
    std::unique_ptr<rocksdb::Iterator> it(
        handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->violations));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ASSIGN_OR_RETURN(const ViolationRecord record,
                       internal::DecodeViolation(ToView(it->value())));
      ++counts[ViolationKind{
          .checker = record.checker, .level = record.level, .anomaly = record.anomaly}];
    }
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the violations"));
    rocksdb::WriteBatch batch;
    const std::string prefix(internal::kViolationCountPrefix);
    std::string end = prefix;
    end.back() = static_cast<char>(end.back() + 1);
    RETURN_IF_ERROR(FromRocksStatus(batch.DeleteRange(handles_->meta, prefix, end),
                                    "encoding the violation counts"));
    for (const auto& [kind, n] : counts) {
      RETURN_IF_ERROR(FromRocksStatus(
          batch.Put(handles_->meta, internal::EncodeViolationCountKey(kind), EncodeNumberKey(n)),
          "encoding the violation counts"));
    }
    RETURN_IF_ERROR(Write(batch, options_.sync_violations, "storing the violation counts"));
    spdlog::info("counted the store's {} violations by kind (kept from now on)", stored);
  }
  absl::MutexLock lock(&violations_mu_);
  violation_counts_ = std::move(counts);
  return absl::OkStatus();
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

std::vector<std::pair<ViolationKind, uint64_t>> Store::CountViolationsByKind() const {
  absl::MutexLock lock(&violations_mu_);
  return {violation_counts_.begin(), violation_counts_.end()};
}

}  // namespace isowatch::store
