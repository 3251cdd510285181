// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/joiner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace isowatch::tidb {
namespace {

bool IsWrite(const v1::Operation& op) {
  return op.kind() == v1::Operation::WRITE || op.kind() == v1::Operation::APPEND;
}

bool HasWrites(const v1::Transaction& t) {
  return std::any_of(t.ops().begin(), t.ops().end(), IsWrite);
}

// The key of a write as an integer (the workload's keys are), or nullopt.
std::optional<int64_t> IntKey(const v1::Datum& d) {
  if (d.kind_case() == v1::Datum::kInt) return d.int_();
  int64_t k = 0;
  if (d.kind_case() == v1::Datum::kBytes && absl::SimpleAtoi(d.bytes(), &k)) return k;
  return std::nullopt;
}

std::string SessionText(const v1::Transaction& t) {
  if (t.session_case() == v1::Transaction::kSessionStr) return t.session_str();
  if (t.session_case() == v1::Transaction::kSessionInt) return std::to_string(t.session_int());
  return {};
}

}  // namespace

std::string TxnIdText(const v1::Transaction& txn) {
  if (txn.id_case() == v1::Transaction::kIdStr) return txn.id_str();
  if (txn.id_case() == v1::Transaction::kIdInt) return std::to_string(txn.id_int());
  return {};
}

Joiner::Joiner(JoinerOptions options) : options_(std::move(options)) {}

absl::Status Joiner::AddClient(v1::Transaction txn) {
  std::string id = TxnIdText(txn);
  if (id.empty()) return absl::InvalidArgumentError("a client record without an id");
  if (!txn.has_start()) {
    return absl::InvalidArgumentError(fmt::format("client record {} has no start ts", id));
  }
  if (!ids_.insert(id).second) {
    ++stats_.duplicate_client_ids;
    return absl::InvalidArgumentError(fmt::format("client record {} appears twice", id));
  }
  const Tso start = static_cast<Tso>(txn.start().physical());
  max_client_ts_ = std::max(max_client_ts_, start);
  if (txn.has_commit()) {
    max_client_ts_ = std::max(max_client_ts_, static_cast<Tso>(txn.commit().physical()));
  }
  const bool committed = txn.status() == v1::Transaction::COMMITTED ||
                         txn.status() == v1::Transaction::STATUS_UNSPECIFIED;
  const bool undecided = txn.status() != v1::Transaction::ABORTED &&
                         !(committed && (!HasWrites(txn) || txn.has_commit()));
  if (options_.live) {
    // Its session's unknown outcome before it is decided at this start.
    SessionTail& tail = tails_[SessionText(txn)];
    const int64_t seq = txn.has_seq() ? txn.seq() : tail.seq + 1;
    if (!tail.unknown_id.empty()) {
      unknown_by_horizon_.emplace(std::max(start, tail.unknown_start), tail.unknown_id);
      tail.unknown_id.clear();
    }
    tail.seq = seq;
    if (undecided) {
      tail.unknown_id = id;
      tail.unknown_start = start;
    }
  } else {
    places_.push_back(Place{.session = SessionText(txn),
                            .seq = txn.has_seq() ? txn.seq() : static_cast<int64_t>(places_.size()),
                            .start = start,
                            .id = id});
  }
  txn.set_stream(options_.stream);
  if (txn.status() == v1::Transaction::ABORTED) {
    txn.clear_commit();
    client_only_.emplace(start, std::move(txn));
  } else if (committed && !HasWrites(txn)) {
    // Read-only: TiDB gives it no commit ts; it commits at its snapshot.
    if (!txn.has_commit()) *txn.mutable_commit() = txn.start();
    client_only_.emplace(static_cast<Tso>(txn.commit().physical()), std::move(txn));
  } else if (committed && txn.has_commit()) {
    waiting_by_commit_.emplace(static_cast<Tso>(txn.commit().physical()), id);
    waiting_.emplace(std::move(id), std::move(txn));
  } else {
    unknown_.emplace(std::move(id), std::move(txn));
  }
  return absl::OkStatus();
}

void Joiner::SealClients(Tso end_ts) {
  sealed_ = true;
  max_client_ts_ = std::max(max_client_ts_, end_ts);
  for (auto& [session, tail] : tails_) {
    if (tail.unknown_id.empty()) continue;
    unknown_by_horizon_.emplace(std::max(max_client_ts_, tail.unknown_start), tail.unknown_id);
    tail.unknown_id.clear();
  }
  // The records of each session in order: an unknown one's horizon is its successor's start.
  std::stable_sort(places_.begin(), places_.end(), [](const Place& a, const Place& b) {
    return std::tie(a.session, a.seq) < std::tie(b.session, b.seq);
  });
  for (size_t i = 0; i < places_.size(); ++i) {
    if (!unknown_.contains(places_[i].id)) continue;
    Tso horizon = max_client_ts_;
    if (i + 1 < places_.size() && places_[i + 1].session == places_[i].session) {
      horizon = std::max(places_[i + 1].start, places_[i].start);
    }
    unknown_by_horizon_.emplace(horizon, places_[i].id);
  }
  places_.clear();
  places_.shrink_to_fit();
}

void Joiner::AddCdc(const CdcTxn& txn) {
  // The rows of one commit ts, by the id that wrote them (usually one).
  std::map<std::string, Rows> by_id;
  const bool list = options_.data == history::DataModel::kList;
  for (const RowChange& row : txn.rows) {
    if (row.schema != options_.schema || row.table != options_.table) {
      ++stats_.foreign_rows;
      continue;
    }
    if (row.op == RowOp::kDelete) {
      ++stats_.deleted_rows;
      continue;
    }
    const Column* k = row.Find("k");
    const Column* v = row.Find("v");
    const Column* t = row.Find("t");
    if (t == nullptr || !t->value || t->value->empty()) {
      ++stats_.foreign_rows;
      continue;
    }
    int64_t key = 0;
    int64_t value = 0;
    bool ok = k != nullptr && k->value && absl::SimpleAtoi(*k->value, &key) && v != nullptr &&
              v->value.has_value();
    if (ok && list) {
      // The whole list; the transaction appended (at least) its last element.
      const std::string& text = *v->value;
      const size_t comma = text.rfind(',');
      ok = absl::SimpleAtoi(comma == std::string::npos ? text : text.substr(comma + 1), &value);
    } else if (ok) {
      ok = absl::SimpleAtoi(*v->value, &value);
    }
    if (!ok) {
      ++stats_.bad_rows;
      spdlog::warn("{}.{} row at commit ts {}: k or v is not a number", row.schema, row.table,
                   row.commit_ts);
      continue;
    }
    Rows& rows = by_id[*t->value];
    rows.commit_ts = txn.commit_ts;
    v1::Operation op;
    op.set_kind(list ? v1::Operation::APPEND : v1::Operation::WRITE);
    op.mutable_key()->set_int_(key);
    op.mutable_value()->set_int_(value);
    rows.writes.push_back(std::move(op));
    rows.raw.emplace_back(key, *v->value);
  }
  for (auto& [id, rows] : by_id) HandleRows(id, std::move(rows));
}

void Joiner::HandleRows(std::string id, Rows rows) {
  auto [seen, fresh] = handled_rows_.emplace(id, rows.commit_ts);
  if (!fresh) {
    if (seen->second != rows.commit_ts) {
      ++stats_.split_commits;
      spdlog::error("transaction {} has rows at commit ts {} and {}: the later ones are dropped",
                    id, seen->second, rows.commit_ts);
    }
    return;
  }
  if (auto it = waiting_.find(id); it != waiting_.end()) {
    v1::Transaction txn = std::move(it->second);
    waiting_.erase(it);
    const Tso client_commit = static_cast<Tso>(txn.commit().physical());
    for (auto w = waiting_by_commit_.lower_bound(client_commit);
         w != waiting_by_commit_.end() && w->first == client_commit; ++w) {
      if (w->second == id) {
        waiting_by_commit_.erase(w);
        break;
      }
    }
    if (rows.commit_ts < skip_below_) {
      // Joined and sent by an earlier run. After a restart its rows may come again in part:
      // copies TiCDC sent again after a watermark, whose originals lie before where the input
      // resumed.
      ++stats_.already_sent;
      return;
    }
    if (client_commit != rows.commit_ts) {
      ++stats_.commit_ts_mismatches;
      spdlog::warn("transaction {}: the client says commit ts {}, its rows {}", id, client_commit,
                   rows.commit_ts);
    }
    ++stats_.joined;
    EmitJoined(std::move(txn), rows);
    return;
  }
  if (unknown_.contains(id)) {
    // Decided at its horizon.
    unknown_rows_.emplace(std::move(id), std::move(rows));
    return;
  }
  if (ids_.contains(id)) {
    // Rows below the resumed release point: an earlier run handled (and reported) them.
    if (rows.commit_ts < skip_below_) return;
    // Aborted, or read-only, by the client's account, yet it wrote.
    ++stats_.write_mismatches;
    spdlog::error(
        "transaction {} wrote rows at commit ts {} but the client recorded no commit "
        "with writes: they are not sent",
        id, rows.commit_ts);
    return;
  }
  // Not the client's: its writes alone, starting at its commit (it read nothing known).
  v1::Transaction t;
  t.set_id_str(id);
  t.set_session_str("cdc");
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_start()->set_physical(static_cast<int64_t>(rows.commit_ts));
  t.mutable_commit()->set_physical(static_cast<int64_t>(rows.commit_ts));
  t.set_stream(options_.stream);
  for (v1::Operation& op : rows.writes) *t.add_ops() = std::move(op);
  ++stats_.cdc_only;
  Emit(rows.commit_ts, std::move(t));
}

bool Joiner::SameWrites(const v1::Transaction& txn, const Rows& rows) const {
  // The last value written per key (kv), or the elements appended per key in order (lists).
  std::map<int64_t, std::vector<int64_t>> written;
  for (const v1::Operation& op : txn.ops()) {
    if (!IsWrite(op)) continue;
    const std::optional<int64_t> k = IntKey(op.key());
    if (!k || op.value().kind_case() != v1::Datum::kInt) return false;
    std::vector<int64_t>& values = written[*k];
    if (options_.data != history::DataModel::kList) values.clear();
    values.push_back(op.value().int_());
  }
  if (written.size() != rows.raw.size()) return false;
  for (const auto& [key, text] : rows.raw) {
    auto it = written.find(key);
    if (it == written.end()) return false;
    if (options_.data != history::DataModel::kList) {
      if (text != std::to_string(it->second.back())) return false;
      continue;
    }
    // The list ends with the elements this transaction appended.
    std::vector<absl::string_view> elements = absl::StrSplit(text, ',');
    const std::vector<int64_t>& appended = it->second;
    if (elements.size() < appended.size()) return false;
    for (size_t i = 0; i < appended.size(); ++i) {
      if (elements[elements.size() - appended.size() + i] != std::to_string(appended[i])) {
        return false;
      }
    }
  }
  return true;
}

void Joiner::EmitJoined(v1::Transaction txn, const Rows& rows) {
  if (!SameWrites(txn, rows)) {
    ++stats_.write_mismatches;
    spdlog::warn("transaction {}: its rows at commit ts {} are not the writes the client made",
                 TxnIdText(txn), rows.commit_ts);
  }
  txn.set_status(v1::Transaction::COMMITTED);
  txn.mutable_commit()->set_physical(static_cast<int64_t>(rows.commit_ts));
  txn.mutable_commit()->set_logical(0);
  Emit(rows.commit_ts, std::move(txn));
}

void Joiner::Emit(Tso position, v1::Transaction txn) {
  if (options_.live && options_.forget_after > 0) emitted_.emplace_back(position, TxnIdText(txn));
  if (position < skip_below_) {
    ++stats_.already_sent;
    return;
  }
  out_.push_back(std::move(txn));
}

void Joiner::Forget(Tso release_point) {
  if (release_point <= options_.forget_after) return;
  const Tso below = release_point - options_.forget_after;
  // Positions are emitted roughly in order; one out of order waits for those before it.
  while (!emitted_.empty() && emitted_.front().first < below) {
    ids_.erase(emitted_.front().second);
    handled_rows_.erase(emitted_.front().second);
    emitted_.pop_front();
  }
}

Joiner::Output Joiner::Take(Tso release_point) {
  // Acknowledged commits whose rows did not come below the release point.
  while (!waiting_by_commit_.empty() && waiting_by_commit_.begin()->first < release_point) {
    auto [commit, id] = *waiting_by_commit_.begin();
    waiting_by_commit_.erase(waiting_by_commit_.begin());
    auto it = waiting_.find(id);
    v1::Transaction txn = std::move(it->second);
    waiting_.erase(it);
    if (commit < skip_below_) {
      // An earlier run decided it (every record was, once the release point passed its client
      // commit ts), and its rows may lie before where the CDC input resumed: not missing.
      ++stats_.already_sent;
      continue;
    }
    ++stats_.missing_in_cdc;
    spdlog::error(
        "transaction {} committed at {} by the client's account, but no row of it "
        "came below {}: sent as UNKNOWN",
        id, commit, release_point);
    txn.set_status(v1::Transaction::UNKNOWN);
    Emit(commit, std::move(txn));
  }
  // Unknown outcomes past their horizon.
  while ((sealed_ || options_.live) && !unknown_by_horizon_.empty() &&
         unknown_by_horizon_.begin()->first < release_point) {
    auto [horizon, id] = *unknown_by_horizon_.begin();
    unknown_by_horizon_.erase(unknown_by_horizon_.begin());
    auto it = unknown_.find(id);
    v1::Transaction txn = std::move(it->second);
    unknown_.erase(it);
    if (horizon < skip_below_) {
      // Decided by an earlier run, perhaps on rows before where the CDC input resumed.
      unknown_rows_.erase(id);
      ++stats_.already_sent;
      continue;
    }
    if (auto rows = unknown_rows_.find(id); rows != unknown_rows_.end()) {
      ++stats_.unknown_committed;
      Rows r = std::move(rows->second);
      unknown_rows_.erase(rows);
      if (!SameWrites(txn, r)) {
        ++stats_.write_mismatches;
        spdlog::warn(
            "transaction {}: its rows at commit ts {} are not the writes the client "
            "made",
            id, r.commit_ts);
      }
      txn.set_status(v1::Transaction::COMMITTED);
      txn.mutable_commit()->set_physical(static_cast<int64_t>(r.commit_ts));
      Emit(horizon, std::move(txn));
    } else {
      ++stats_.unknown_aborted;
      txn.set_status(v1::Transaction::ABORTED);
      txn.clear_commit();
      Emit(horizon, std::move(txn));
    }
  }
  while (!client_only_.empty() && client_only_.begin()->first < release_point) {
    auto node = client_only_.extract(client_only_.begin());
    ++stats_.client_only;
    Emit(node.key(), std::move(node.mapped()));
  }
  if (options_.live && options_.forget_after > 0) Forget(release_point);
  Output o;
  o.txns = std::exchange(out_, {});
  if (release_point > 0) {
    Tso w = release_point - 1;
    // An undecided unknown outcome may still commit anywhere above its start.
    for (const auto& [id, txn] : unknown_) {
      w = std::min(w, static_cast<Tso>(txn.start().physical()));
    }
    if (!sealed_ && !options_.live) w = 0;
    if (w > last_watermark_) last_watermark_ = w;
    if (last_watermark_ > 0) o.watermark = last_watermark_;
  }
  return o;
}

}  // namespace isowatch::tidb
