// SPDX-License-Identifier: Apache-2.0
// The store's violations (store.h, AddViolation and QueryViolations): each stored once under its
// id, in insertion order, or counted in a summary past the bounds, and read back a page at a
// time.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
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

// Whether `cf` holds `key`.
absl::StatusOr<bool> Contains(const internal::Database& h, rocksdb::ColumnFamilyHandle* cf,
                              std::string_view key) {
  std::string value;
  const rocksdb::Status s = h.db->Get(rocksdb::ReadOptions(), cf, ToSlice(key), &value);
  if (s.ok()) return true;
  if (s.IsNotFound()) return false;
  return FromRocksStatus(s, "looking up a violation id");
}

// The number stored under `key` in `cf`; 0 when there is none.
absl::StatusOr<uint64_t> ReadNumber(const internal::Database& h, rocksdb::ColumnFamilyHandle* cf,
                                    std::string_view key) {
  std::string value;
  const rocksdb::Status s = h.db->Get(rocksdb::ReadOptions(), cf, ToSlice(key), &value);
  if (s.IsNotFound()) return 0;
  RETURN_IF_ERROR(FromRocksStatus(s, "reading a summary's count"));
  return DecodeNumberKey(value);
}

// A group a violation belongs to, and its summary as stored (or new).
struct Group {
  std::string key;  // internal::EncodeSummaryKey
  ViolationSummary summary;
  uint64_t stored_bytes = 0;  // key and value as stored; 0: not stored
  uint64_t bound = 0;         // most violations kept in full
  bool changed = false;       // since it was read
};

ViolationSummary GroupOf(const ViolationRecord& r, SummaryScope scope, std::string_view subject,
                         std::string_view stream) {
  return ViolationSummary{.scope = scope,
                          .checker = r.checker,
                          .level = r.level,
                          .anomaly = r.anomaly,
                          .subject = std::string(subject),
                          .stream = std::string(stream)};
}

absl::StatusOr<Group> ReadGroup(const internal::Database& h, ViolationSummary summary) {
  std::string key = internal::EncodeSummaryKey(summary);
  Group g{.key = std::move(key), .summary = std::move(summary)};
  std::string value;
  const rocksdb::Status s = h.db->Get(rocksdb::ReadOptions(), h.summaries, ToSlice(g.key), &value);
  if (s.IsNotFound()) return g;
  RETURN_IF_ERROR(FromRocksStatus(s, "reading a summary"));
  RETURN_IF_ERROR(internal::DecodeSummaryValue(value, &g.summary));
  g.stored_bytes = g.key.size() + value.size();
  return g;
}

// Adds to `batch` the write of `g`'s summary, and to `space` what its bytes grew by.
absl::Status PutGroup(const internal::Database& h, rocksdb::WriteBatch& batch, Group& g,
                      ViolationSpace* space) {
  const std::string value = internal::EncodeSummaryValue(g.summary);
  RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.summaries, g.key, value), "encoding a summary"));
  const uint64_t bytes = g.key.size() + value.size();
  const uint64_t grown = space->bytes + bytes;
  space->bytes = grown >= g.stored_bytes ? grown - g.stored_bytes : 0;
  g.stored_bytes = bytes;
  return absl::OkStatus();
}

// Counts `r` in `s`.
void CountIn(ViolationSummary& s, const ViolationRecord& r) {
  SummarisedViolation v{.id = r.id, .finalised_unix_ms = r.finalised_unix_ms};
  v.txns.reserve(r.txns.size());
  for (const ViolationRecord::Txn& t : r.txns) v.txns.push_back(t.id);
  if (s.summarised == 0) s.first = v;
  s.last = std::move(v);
  ++s.summarised;
  for (const std::string& stream : r.streams) {
    if (s.streams.size() >= ViolationSummary::kMaxStreams) break;
    if (std::find(s.streams.begin(), s.streams.end(), stream) == s.streams.end()) {
      s.streams.push_back(stream);
    }
  }
}

// The count of `kind` in `counts` (0 when absent).
uint64_t CountOf(const std::map<ViolationKind, uint64_t>& counts, const ViolationKind& kind) {
  auto it = counts.find(kind);
  return it == counts.end() ? 0 : it->second;
}

bool Matches(const SummaryFilter& filter, const ViolationSummary& summary) {
  if (filter.level && summary.level != *filter.level) return false;
  if (filter.anomaly && summary.anomaly != *filter.anomaly) return false;
  if (filter.checker && summary.checker != *filter.checker) return false;
  if (filter.scope && summary.scope != *filter.scope) return false;
  return true;
}

std::string EncodeSummaryToken(std::string_view key) {
  std::string out;
  out.reserve(key.size() * 2);
  for (char c : key) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return out;
}

absl::StatusOr<std::string> DecodeSummaryToken(std::string_view token) {
  std::string key;
  bool ok = !token.empty() && token.size() % 2 == 0;
  for (size_t i = 0; ok && i < token.size(); i += 2) {
    uint8_t byte = 0;
    const auto [ptr, ec] = std::from_chars(token.data() + i, token.data() + i + 2, byte, 16);
    ok = ec == std::errc() && ptr == token.data() + i + 2;
    key.push_back(static_cast<char>(byte));
  }
  if (ok) return key;
  return absl::InvalidArgumentError(
      "page_token: not a token of this server (expected the next_page_token of an earlier page of "
      "summaries: hexadecimal digits)");
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

const char* SummaryScopeName(SummaryScope scope) {
  switch (scope) {
    case SummaryScope::kKey:
      return "key";
    case SummaryScope::kTxn:
      return "txn";
    case SummaryScope::kKind:
      return "kind";
  }
  return "?";
}

absl::StatusOr<bool> Store::PutViolation(const ViolationRecord& record) {
  ASSIGN_OR_RETURN(const ViolationOutcome outcome, AddViolation(record));
  return outcome.fate != ViolationFate::kDuplicate;
}

absl::StatusOr<ViolationOutcome> Store::AddViolation(const ViolationRecord& record) {
  ASSIGN_OR_RETURN(AddedViolations added, AddViolations({&record, 1}));
  ViolationOutcome outcome{.fate = added.fates.front()};
  if (outcome.fate == ViolationFate::kSummarised) {
    outcome.summary = std::move(added.summarised.front().summary);
  }
  return outcome;
}

absl::StatusOr<AddedViolations> Store::AddViolations(std::span<const ViolationRecord> records) {
  for (const ViolationRecord& r : records) {
    if (r.id.empty()) return absl::InvalidArgumentError("a violation needs a non-empty id");
  }
  absl::MutexLock lock(&violations_mu_);
  RETURN_IF_ERROR(CheckWritable());
  const internal::Database& h = *handles_;
  const ViolationBounds& bounds = options_.violation_bounds;
  // What the batch changes, written at its end in one write: each summary it touches once.
  // Node-based: `groups` below points into it while it grows.
  absl::node_hash_map<std::string, Group> touched;
  absl::flat_hash_map<std::string, uint64_t> deltas;  // online violations summarised, by key
  absl::flat_hash_map<std::string, size_t> summarised_index;  // into added.summarised
  absl::flat_hash_set<std::string> ids;                       // of the batch
  std::map<ViolationKind, uint64_t> counts = violation_counts_;
  std::map<ViolationKind, uint64_t> summarised_counts = summarised_counts_;
  ViolationSpace space = space_;
  uint64_t next = next_violation_;
  rocksdb::WriteBatch batch;
  AddedViolations added;
  added.fates.reserve(records.size());

  // The summary of group `fields`, read once per batch.
  auto group = [&](ViolationSummary fields, uint64_t bound) -> absl::StatusOr<Group*> {
    std::string key = internal::EncodeSummaryKey(fields);
    auto it = touched.find(key);
    if (it == touched.end()) {
      ASSIGN_OR_RETURN(Group g, ReadGroup(h, std::move(fields)));
      it = touched.emplace(std::move(key), std::move(g)).first;
    }
    it->second.bound = bound;
    return &it->second;
  };

  for (const ViolationRecord& record : records) {
    const bool online = record.checker == kOnlineChecker;
    bool known = !ids.insert(record.id).second;
    if (!known) {
      ASSIGN_OR_RETURN(known, Contains(h, h.violation_ids, record.id));
    }
    // The other checkers' summarised violations are known by their ids (overlapping windows
    // find the same one twice); the online engine's by the checkpoints (invariant 5).
    if (!known && !online) {
      ASSIGN_OR_RETURN(known, Contains(h, h.summarised_ids, record.id));
    }
    if (known) {
      added.fates.push_back(ViolationFate::kDuplicate);
      continue;
    }
    std::vector<Group*> groups;
    if (bounds.max_per_key > 0 && !record.key.empty()) {
      ASSIGN_OR_RETURN(Group * g, group(GroupOf(record, SummaryScope::kKey, record.key, ""),
                                        bounds.max_per_key));
      groups.push_back(g);
    }
    if (bounds.max_per_txn > 0) {
      for (size_t i = 0; i < std::min<size_t>(2, record.txns.size()); ++i) {
        const ViolationRecord::Txn& t = record.txns[i];
        if (i == 1 && t == record.txns[0]) break;
        ASSIGN_OR_RETURN(Group * g, group(GroupOf(record, SummaryScope::kTxn, t.id, t.stream),
                                          bounds.max_per_txn));
        groups.push_back(g);
      }
    }
    // The limit is reached once the bytes are at it: the record that crosses it is still stored.
    const bool over = bounds.max_bytes > 0 && space.bytes >= bounds.max_bytes;
    const auto full = std::find_if(groups.begin(), groups.end(),
                                   [](const Group* g) { return g->summary.kept >= g->bound; });
    ViolationKind kind{.checker = record.checker, .level = record.level, .anomaly = record.anomaly};
    if (full == groups.end() && !over) {
      const std::string number = EncodeNumberKey(next++);
      const std::string encoded = internal::EncodeViolation(record);
      RETURN_IF_ERROR(
          FromRocksStatus(batch.Put(h.violations, number, encoded), "encoding a violation"));
      RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.violation_ids, ToSlice(record.id), number),
                                      "encoding a violation"));
      // The record, and its id whose value is the insertion number.
      space.bytes += 2 * number.size() + encoded.size() + record.id.size();
      for (Group* g : groups) {
        ++g->summary.kept;
        g->changed = true;
      }
      added.fates.push_back(ViolationFate::kStored);
    } else {
      Group* target = nullptr;
      if (full != groups.end()) {
        target = *full;
      } else {
        ASSIGN_OR_RETURN(target, group(GroupOf(record, SummaryScope::kKind, "", ""), 0));
      }
      if (target->summary.summarised == 0) ++space.summaries;
      CountIn(target->summary, record);
      target->changed = true;
      const std::string& key = target->key;
      if (online) {
        ++deltas[key];
      } else {
        RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.summarised_ids, ToSlice(record.id), ""),
                                        "encoding a summary"));
        space.bytes += record.id.size();
      }
      auto [index, inserted] = summarised_index.try_emplace(key, added.summarised.size());
      if (inserted) added.summarised.emplace_back();
      ++added.summarised[index->second].count;
      ++summarised_counts[kind];
      added.fates.push_back(ViolationFate::kSummarised);
    }
    ++counts[std::move(kind)];
  }
  if (summarised_index.empty() && next == next_violation_) return added;

  for (auto& [key, g] : touched) {
    if (g.changed) RETURN_IF_ERROR(PutGroup(h, batch, g, &space));
  }
  for (const auto& [key, n] : deltas) {
    ASSIGN_OR_RETURN(const uint64_t before, ReadNumber(h, h.summary_deltas, key));
    RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.summary_deltas, key, EncodeNumberKey(before + n)),
                                    "encoding a summary"));
  }
  // The counts of the kinds the batch counted.
  for (const auto& [kind, n] : counts) {
    if (CountOf(violation_counts_, kind) == n) continue;
    RETURN_IF_ERROR(FromRocksStatus(
        batch.Put(h.meta, internal::EncodeViolationCountKey(kind), EncodeNumberKey(n)),
        "encoding a violation count"));
  }
  for (const auto& [kind, n] : summarised_counts) {
    if (CountOf(summarised_counts_, kind) == n) continue;
    RETURN_IF_ERROR(FromRocksStatus(
        batch.Put(h.meta, internal::EncodeSummarisedCountKey(kind), EncodeNumberKey(n)),
        "encoding a violation count"));
  }
  RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.meta, ToSlice(internal::kViolationSpaceKey),
                                            internal::EncodeViolationSpace(space)),
                                  "encoding a violation count"));
  RETURN_IF_ERROR(
      Write(batch, options_.sync_violations, fmt::format("storing {} violations", records.size())));
  violation_counts_ = std::move(counts);
  summarised_counts_ = std::move(summarised_counts);
  space_ = space;
  next_violation_ = next;
  violation_count_.store(next_violation_ - 1, std::memory_order_release);
  for (const auto& [key, index] : summarised_index) {
    added.summarised[index].summary = touched.find(key)->second.summary;
  }
  return added;
}

namespace {

// Reads the meta keys under `prefix` (kind -> count).
absl::Status ReadKindCounts(const internal::Database& h, std::string_view prefix,
                            std::map<ViolationKind, uint64_t>* counts, uint64_t* sum) {
  std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(rocksdb::ReadOptions(), h.meta));
  for (it->Seek(ToSlice(prefix)); it->Valid() && ToView(it->key()).starts_with(prefix);
       it->Next()) {
    ASSIGN_OR_RETURN(ViolationKind kind,
                     prefix == internal::kViolationCountPrefix
                         ? internal::DecodeViolationCountKey(ToView(it->key()))
                         : internal::DecodeSummarisedCountKey(ToView(it->key())));
    ASSIGN_OR_RETURN(const uint64_t n, DecodeNumberKey(ToView(it->value())));
    (*counts)[std::move(kind)] = n;
    *sum += n;
  }
  return FromRocksStatus(it->status(), "reading the violation counts");
}

// Adds to `batch` the deletion of every meta key under `prefix`.
absl::Status DeletePrefix(const internal::Database& h, rocksdb::WriteBatch& batch,
                          std::string_view prefix) {
  const std::string begin(prefix);
  std::string end = begin;
  end.back() = static_cast<char>(end.back() + 1);
  return FromRocksStatus(batch.DeleteRange(h.meta, begin, end), "encoding the violation counts");
}

// Adds to `batch` the counts of `counts` under `prefix`, in place of the old ones.
absl::Status PutKindCounts(const internal::Database& h, rocksdb::WriteBatch& batch,
                           std::string_view prefix,
                           const std::map<ViolationKind, uint64_t>& counts) {
  RETURN_IF_ERROR(DeletePrefix(h, batch, prefix));
  for (const auto& [kind, n] : counts) {
    const std::string key = prefix == internal::kViolationCountPrefix
                                ? internal::EncodeViolationCountKey(kind)
                                : internal::EncodeSummarisedCountKey(kind);
    RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.meta, key, EncodeNumberKey(n)),
                                    "encoding the violation counts"));
  }
  return absl::OkStatus();
}

// Takes `n` from `kind`'s count, dropping the kind at 0.
void Subtract(std::map<ViolationKind, uint64_t>& counts, const ViolationKind& kind, uint64_t n) {
  auto it = counts.find(kind);
  if (it == counts.end()) return;
  it->second -= std::min(it->second, n);
  if (it->second == 0) counts.erase(it);
}

}  // namespace

absl::Status Store::LoadViolationCounts(uint64_t stored) {
  const internal::Database& h = *handles_;
  std::map<ViolationKind, uint64_t> counts;
  std::map<ViolationKind, uint64_t> summarised;
  uint64_t sum = 0;
  uint64_t summarised_sum = 0;
  RETURN_IF_ERROR(ReadKindCounts(h, internal::kViolationCountPrefix, &counts, &sum));
  RETURN_IF_ERROR(
      ReadKindCounts(h, internal::kSummarisedCountPrefix, &summarised, &summarised_sum));
  ViolationSpace space;
  bool space_found = false;
  {
    std::string value;
    const rocksdb::Status s =
        h.db->Get(rocksdb::ReadOptions(), h.meta, ToSlice(internal::kViolationSpaceKey), &value);
    if (s.ok()) {
      ASSIGN_OR_RETURN(space, internal::DecodeViolationSpace(value));
      space_found = true;
    } else if (!s.IsNotFound()) {
      return FromRocksStatus(s, "reading the violations' space");
    }
  }
  // A new store has neither; one written before the space was kept has records and no space.
  const bool consistent =
      sum == stored + summarised_sum && (space_found || (stored == 0 && summarised_sum == 0));
  if (!consistent) {
    RETURN_IF_ERROR(RecountViolations(&counts, &summarised, &space));
    spdlog::info("counted the store's {} violations by kind (kept from now on)", stored);
  }
  RETURN_IF_ERROR(UndoSummaryDeltas(&counts, &summarised, &space));
  absl::MutexLock lock(&violations_mu_);
  violation_counts_ = std::move(counts);
  summarised_counts_ = std::move(summarised);
  space_ = space;
  return absl::OkStatus();
}

absl::Status Store::RecountViolations(std::map<ViolationKind, uint64_t>* counts,
                                      std::map<ViolationKind, uint64_t>* summarised,
                                      ViolationSpace* space) {
  const internal::Database& h = *handles_;
  counts->clear();
  summarised->clear();
  *space = ViolationSpace();
  {
    std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(rocksdb::ReadOptions(), h.violations));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ASSIGN_OR_RETURN(const ViolationRecord record,
                       internal::DecodeViolation(ToView(it->value())));
      ++(*counts)[ViolationKind{
          .checker = record.checker, .level = record.level, .anomaly = record.anomaly}];
      // The record and its id (the id's value is the insertion number, as long as the key).
      space->bytes += 2 * it->key().size() + it->value().size() + record.id.size();
    }
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the violations"));
  }
  {
    std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(rocksdb::ReadOptions(), h.summaries));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ViolationSummary summary;
      RETURN_IF_ERROR(internal::DecodeSummaryKey(ToView(it->key()), &summary));
      RETURN_IF_ERROR(internal::DecodeSummaryValue(ToView(it->value()), &summary));
      space->bytes += it->key().size() + it->value().size();
      if (summary.summarised == 0) continue;
      ++space->summaries;
      ViolationKind kind{
          .checker = summary.checker, .level = summary.level, .anomaly = summary.anomaly};
      (*counts)[kind] += summary.summarised;
      (*summarised)[std::move(kind)] += summary.summarised;
    }
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the summaries"));
  }
  {
    std::unique_ptr<rocksdb::Iterator> it(
        h.db->NewIterator(rocksdb::ReadOptions(), h.summarised_ids));
    for (it->SeekToFirst(); it->Valid(); it->Next()) space->bytes += it->key().size();
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the summarised ids"));
  }
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutKindCounts(h, batch, internal::kViolationCountPrefix, *counts));
  RETURN_IF_ERROR(PutKindCounts(h, batch, internal::kSummarisedCountPrefix, *summarised));
  RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.meta, ToSlice(internal::kViolationSpaceKey),
                                            internal::EncodeViolationSpace(*space)),
                                  "encoding the violation counts"));
  return Write(batch, options_.sync_violations, "storing the violation counts");
}

absl::Status Store::UndoSummaryDeltas(std::map<ViolationKind, uint64_t>* counts,
                                      std::map<ViolationKind, uint64_t>* summarised,
                                      ViolationSpace* space) {
  const internal::Database& h = *handles_;
  rocksdb::WriteBatch batch;
  uint64_t undone = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        h.db->NewIterator(rocksdb::ReadOptions(), h.summary_deltas));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ASSIGN_OR_RETURN(const uint64_t delta, DecodeNumberKey(ToView(it->value())));
      ViolationSummary key_fields;
      RETURN_IF_ERROR(internal::DecodeSummaryKey(ToView(it->key()), &key_fields));
      ASSIGN_OR_RETURN(Group g, ReadGroup(h, std::move(key_fields)));
      const uint64_t n = std::min(delta, g.summary.summarised);
      if (g.stored_bytes == 0 || n == 0) continue;
      g.summary.summarised -= n;
      if (g.summary.summarised == 0) {
        // The first and the last are found again by the replay.
        g.summary.first = {};
        g.summary.last = {};
        g.summary.streams.clear();
        space->summaries -= std::min<uint64_t>(space->summaries, 1);
      }
      const ViolationKind kind{
          .checker = g.summary.checker, .level = g.summary.level, .anomaly = g.summary.anomaly};
      Subtract(*counts, kind, n);
      Subtract(*summarised, kind, n);
      undone += n;
      if (g.summary.kept == 0 && g.summary.summarised == 0) {
        RETURN_IF_ERROR(FromRocksStatus(batch.Delete(h.summaries, g.key), "encoding a summary"));
        space->bytes -= std::min(space->bytes, g.stored_bytes);
      } else {
        RETURN_IF_ERROR(PutGroup(h, batch, g, space));
      }
    }
    RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the summary deltas"));
  }
  if (undone == 0) return absl::OkStatus();
  RETURN_IF_ERROR(DeleteSummaryDeltas(batch));
  RETURN_IF_ERROR(PutKindCounts(h, batch, internal::kViolationCountPrefix, *counts));
  RETURN_IF_ERROR(PutKindCounts(h, batch, internal::kSummarisedCountPrefix, *summarised));
  RETURN_IF_ERROR(FromRocksStatus(batch.Put(h.meta, ToSlice(internal::kViolationSpaceKey),
                                            internal::EncodeViolationSpace(*space)),
                                  "encoding the violation counts"));
  RETURN_IF_ERROR(Write(batch, options_.sync_violations, "undoing the summary deltas"));
  spdlog::info(
      "store: {} online violations summarised after the last checkpoint are taken out of their "
      "summaries; the replay of the log counts them again",
      undone);
  return absl::OkStatus();
}

absl::Status Store::DeleteSummaryDeltas(rocksdb::WriteBatch& batch) const {
  // Every summary key starts with its scope, a byte below kKind + 1.
  const std::string begin(1, '\0');
  const std::string end(1, static_cast<char>(static_cast<uint8_t>(SummaryScope::kKind) + 1));
  return FromRocksStatus(batch.DeleteRange(handles_->summary_deltas, begin, end),
                         "encoding the summary deltas' deletion");
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

absl::StatusOr<SummaryPage> Store::QuerySummaries(const SummaryFilter& filter, size_t limit,
                                                  std::string_view page_token) const {
  if (limit == 0) return absl::InvalidArgumentError("limit: must be at least 1");
  std::string start;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(start, DecodeSummaryToken(page_token));
  }
  SummaryPage page;
  std::unique_ptr<rocksdb::Iterator> it(
      handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->summaries));
  for (it->Seek(start); it->Valid(); it->Next()) {
    ViolationSummary summary;
    RETURN_IF_ERROR(internal::DecodeSummaryKey(ToView(it->key()), &summary));
    if (!Matches(filter, summary)) continue;
    RETURN_IF_ERROR(internal::DecodeSummaryValue(ToView(it->value()), &summary));
    if (summary.summarised == 0) continue;
    if (page.summaries.size() == limit) {
      page.next_page_token = EncodeSummaryToken(ToView(it->key()));
      break;
    }
    page.summaries.push_back(std::move(summary));
  }
  RETURN_IF_ERROR(FromRocksStatus(it->status(), "reading the summaries"));
  return page;
}

uint64_t Store::CountViolations() const { return violation_count_.load(std::memory_order_acquire); }

std::vector<std::pair<ViolationKind, uint64_t>> Store::CountViolationsByKind() const {
  absl::MutexLock lock(&violations_mu_);
  return {violation_counts_.begin(), violation_counts_.end()};
}

std::vector<std::pair<ViolationKind, uint64_t>> Store::CountSummarisedByKind() const {
  absl::MutexLock lock(&violations_mu_);
  return {summarised_counts_.begin(), summarised_counts_.end()};
}

uint64_t Store::CountSummarised() const {
  absl::MutexLock lock(&violations_mu_);
  uint64_t sum = 0;
  for (const auto& [kind, n] : summarised_counts_) sum += n;
  return sum;
}

ViolationSpace Store::violation_space() const {
  absl::MutexLock lock(&violations_mu_);
  ViolationSpace space = space_;
  space.limit_reached =
      options_.violation_bounds.max_bytes > 0 && space.bytes >= options_.violation_bounds.max_bytes;
  return space;
}

}  // namespace isowatch::store
