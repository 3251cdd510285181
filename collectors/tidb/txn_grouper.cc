// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/txn_grouper.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>

namespace isowatch::tidb {
namespace {

std::string DdlFingerprint(const SchemaChange& change) {
  return fmt::format("ddl\n{}\n{}\n{}\n{}", change.commit_ts, change.schema.size(),
                     change.schema + change.table, change.query);
}

}  // namespace

TxnGrouper::TxnGrouper(size_t streams, size_t remembered_rows)
    : watermarks_(streams), remembered_rows_(remembered_rows) {}

absl::Status TxnGrouper::Add(size_t stream, CdcEvent event) {
  if (stream >= watermarks_.size()) {
    return absl::OutOfRangeError(
        fmt::format("an event of stream {}, but there are {} streams", stream, watermarks_.size()));
  }
  if (auto* row = std::get_if<RowChange>(&event)) return AddRow(std::move(*row));
  if (auto* change = std::get_if<SchemaChange>(&event)) return AddSchemaChange(std::move(*change));
  const Tso ts = std::get<Watermark>(event).ts;
  std::optional<Tso>& current = watermarks_[stream];
  if (current.has_value() && ts < *current) {
    ++stats_.stale_watermarks;
    return absl::OkStatus();
  }
  ++stats_.watermarks;
  current = ts;
  Tso minimum = ts;
  for (const std::optional<Tso>& watermark : watermarks_) {
    if (!watermark.has_value()) return absl::OkStatus();
    minimum = std::min(minimum, *watermark);
  }
  release_point_ = std::max(release_point_, minimum);
  return absl::OkStatus();
}

absl::Status TxnGrouper::CheckLate(Tso commit_ts, const std::string& fingerprint,
                                   std::string_view what, bool& duplicate) {
  duplicate = false;
  if (const auto it = pending_.find(commit_ts); it != pending_.end()) {
    duplicate = it->second.fingerprints.contains(fingerprint);
    return absl::OkStatus();
  }
  if (commit_ts >= release_point_) return absl::OkStatus();
  if (const auto it = remembered_.find(commit_ts); it != remembered_.end()) {
    duplicate = it->second.contains(fingerprint);
    if (duplicate) return absl::OkStatus();
  }
  const bool forgotten = remembered_.empty() || commit_ts < remembered_.begin()->first;
  return absl::FailedPreconditionError(fmt::format(
      "{} at commit ts {} arrived after every stream's watermark passed it (release point {}): "
      "{}",
      what, commit_ts, release_point_,
      forgotten ? "too old to tell a re-sent duplicate from a row its transaction went out "
                  "without"
                : "its transaction went out without it"));
}

template <typename Event>
absl::Status TxnGrouper::Keep(Event event, Tso commit_ts, std::string fingerprint,
                              std::string_view what, Counters counters,
                              std::vector<std::pair<std::string, Event>> Pending::*list) {
  bool duplicate = false;
  if (absl::Status late = CheckLate(commit_ts, fingerprint, what, duplicate); !late.ok()) {
    ++(stats_.*counters.late);
    return late;
  }
  if (duplicate) {
    ++(stats_.*counters.duplicate);
    return absl::OkStatus();
  }
  ++(stats_.*counters.kept);
  Pending& pending = pending_[commit_ts];
  pending.fingerprints.insert(fingerprint);
  (pending.*list).emplace_back(std::move(fingerprint), std::move(event));
  return absl::OkStatus();
}

absl::Status TxnGrouper::AddRow(RowChange row) {
  const Tso commit_ts = row.commit_ts;
  std::string fingerprint = RowFingerprint(row);
  const std::string what =
      fmt::format("a row of {}.{} ({})", row.schema, row.table, RowOpName(row.op));
  return Keep(
      std::move(row), commit_ts, std::move(fingerprint), what,
      {&TxnGrouperStats::rows, &TxnGrouperStats::duplicate_rows, &TxnGrouperStats::late_rows},
      &Pending::rows);
}

absl::Status TxnGrouper::AddSchemaChange(SchemaChange change) {
  const Tso commit_ts = change.commit_ts;
  std::string fingerprint = DdlFingerprint(change);
  const std::string what = fmt::format("a DDL of {}.{}", change.schema, change.table);
  return Keep(std::move(change), commit_ts, std::move(fingerprint), what,
              {&TxnGrouperStats::schema_changes, &TxnGrouperStats::duplicate_schema_changes,
               &TxnGrouperStats::late_schema_changes},
              &Pending::schema_changes);
}

void TxnGrouper::Remember(Tso commit_ts, absl::flat_hash_set<std::string> fingerprints) {
  remembered_count_ += fingerprints.size();
  remembered_[commit_ts] = std::move(fingerprints);
  while (remembered_count_ > remembered_rows_ && remembered_.size() > 1) {
    remembered_count_ -= remembered_.begin()->second.size();
    remembered_.erase(remembered_.begin());
  }
}

std::vector<CdcTxn> TxnGrouper::Release() {
  std::vector<CdcTxn> released;
  while (!pending_.empty() && pending_.begin()->first < release_point_) {
    auto node = pending_.extract(pending_.begin());
    Pending& pending = node.mapped();
    auto by_fingerprint = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::sort(pending.rows.begin(), pending.rows.end(), by_fingerprint);
    std::sort(pending.schema_changes.begin(), pending.schema_changes.end(), by_fingerprint);
    CdcTxn txn;
    txn.commit_ts = node.key();
    for (auto& [fingerprint, row] : pending.rows) txn.rows.push_back(std::move(row));
    for (auto& [fingerprint, change] : pending.schema_changes) {
      txn.schema_changes.push_back(std::move(change));
    }
    Remember(txn.commit_ts, std::move(pending.fingerprints));
    released.push_back(std::move(txn));
  }
  stats_.released_txns += released.size();
  return released;
}

}  // namespace isowatch::tidb
