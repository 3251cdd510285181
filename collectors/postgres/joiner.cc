// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/joiner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace isowatch::pg {
namespace {

// The column `name` of a decoded row, or nullopt.
std::optional<std::string> Column(const DecodedChange& c, std::string_view name) {
  for (size_t i = 0; i < c.column_names.size() && i < c.values.size(); ++i) {
    if (c.column_names[i] == name) return c.values[i];
  }
  return std::nullopt;
}

// The last element of a bigint[] as text ("{1,2,3}" -> 3).
std::optional<int64_t> LastElement(absl::string_view array) {
  if (array.size() < 3 || array.front() != '{' || array.back() != '}') return std::nullopt;
  array = array.substr(1, array.size() - 2);
  const size_t comma = array.rfind(',');
  if (comma != std::string_view::npos) array = array.substr(comma + 1);
  int64_t v = 0;
  if (!absl::SimpleAtoi(array, &v)) return std::nullopt;
  return v;
}

bool SameWrite(const v1::Operation& a, const v1::Operation& b) {
  return a.kind() == b.kind() && a.key().bytes() == b.key().bytes() &&
         a.value().int_() == b.value().int_();
}

}  // namespace

Joiner::Joiner(JoinerOptions options) : options_(std::move(options)) {}

void Joiner::AddClient(ClientTxn txn) {
  newest_xid_ = std::max(newest_xid_, txn.txn.xid());
  if (txn.txn.status() == v1::Transaction::ABORTED) {
    ++stats_.aborted;
    txn.txn.set_stream(options_.stream);
    out_.push_back(std::move(txn.txn));
    return;
  }
  // Committed, or unknown: logical decoding says whether and where it committed.
  std::string tag = txn.tag;
  clients_[std::move(tag)] = std::move(txn);
}

void Joiner::AddDecoded(DecodedTxn txn) {
  if (txn.end_lsn <= handled_end_) {
    ++stats_.redelivered;
    return;
  }
  handled_end_ = txn.end_lsn;
  decoded_.push_back(std::move(txn));
}

std::optional<Joiner::Tag> Joiner::FindTag(const DecodedTxn& d) const {
  for (const DecodedMessage& m : d.messages) {
    if (m.prefix != options_.message_prefix) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(m.content, ':');
    Tag t;
    t.text = m.content;
    if (parts.size() == 3 && absl::SimpleAtoi(parts[0], &t.run) &&
        absl::SimpleAtoi(parts[1], &t.session) && absl::SimpleAtoi(parts[2], &t.seq)) {
      return t;
    }
  }
  return std::nullopt;
}

uint64_t Joiner::WidenXid(uint32_t xid32) const {
  uint64_t epoch = newest_xid_ >> 32;
  const uint32_t newest32 = static_cast<uint32_t>(newest_xid_);
  // A decoded xid far above the newest client one belongs to the epoch before.
  if (epoch > 0 && xid32 > newest32 && xid32 - newest32 > (1u << 31)) --epoch;
  return (epoch << 32) | xid32;
}

std::vector<v1::Operation> Joiner::DecodedWrites(const DecodedTxn& d) const {
  std::vector<v1::Operation> ops;
  const bool list = options_.data == history::DataModel::kList;
  for (const DecodedChange& c : d.changes) {
    if (c.table != options_.table || c.kind == DecodedChange::Kind::kDelete) continue;
    std::optional<std::string> k = Column(c, "k");
    std::optional<std::string> v = Column(c, "v");
    if (!k || !v) continue;
    v1::Operation op;
    op.set_kind(list ? v1::Operation::APPEND : v1::Operation::WRITE);
    op.mutable_key()->set_bytes(fmt::format("{}/{}", options_.table, *k));
    int64_t value = 0;
    if (list) {
      std::optional<int64_t> last = LastElement(*v);
      if (!last) continue;
      value = *last;
    } else if (!absl::SimpleAtoi(*v, &value)) {
      continue;
    }
    op.mutable_value()->set_int_(value);
    ops.push_back(std::move(op));
  }
  return ops;
}

void Joiner::EmitJoined(ClientTxn c, const DecodedTxn& d) {
  v1::Transaction& t = c.txn;
  // What the WAL says the transaction wrote must be what the client wrote.
  std::vector<v1::Operation> decoded = DecodedWrites(d);
  std::vector<const v1::Operation*> written;
  for (const v1::Operation& op : t.ops()) {
    if (op.kind() == v1::Operation::WRITE || op.kind() == v1::Operation::APPEND) {
      written.push_back(&op);
    }
  }
  bool same = decoded.size() == written.size();
  for (size_t i = 0; same && i < decoded.size(); ++i) same = SameWrite(decoded[i], *written[i]);
  if (!same) {
    ++stats_.write_mismatches;
    spdlog::warn("transaction {} (xid {}): the WAL shows {} writes, the client made {}", c.tag,
                 t.xid(), decoded.size(), written.size());
  }
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_commit()->set_physical(static_cast<int64_t>(d.commit_lsn));
  t.set_stream(options_.stream);
  ++stats_.joined;
  out_.push_back(std::move(t));
  commit_times_us_.push_back(d.commit_time_us);
}

void Joiner::EmitDecodedOnly(const DecodedTxn& d, const Tag& tag) {
  v1::Transaction t;
  const uint64_t xid = WidenXid(d.xid);
  t.set_id_str(tag.text);
  t.set_xid(xid);
  t.set_session_str(fmt::format("r{}s{}", tag.run, tag.session));
  t.set_seq(static_cast<int64_t>(tag.seq));
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_commit()->set_physical(static_cast<int64_t>(d.commit_lsn));
  // Its snapshot is lost with its client record. It read nothing we know of, so only its writes
  // matter: a start at its commit makes them versions without claiming any overlap with other
  // writers (docs/collectors/postgres.md, "Restarts").
  t.mutable_start()->set_physical(static_cast<int64_t>(d.commit_lsn));
  t.set_stream(options_.stream);
  for (v1::Operation& op : DecodedWrites(d)) *t.add_ops() = std::move(op);
  ++stats_.decoded_only;
  out_.push_back(std::move(t));
  commit_times_us_.push_back(d.commit_time_us);
}

void Joiner::GiveUpWaiting() {
  for (auto it = clients_.begin(); it != clients_.end();) {
    ClientTxn& c = it->second;
    // A commit PostgreSQL acknowledged is in the WAL: decoding shows it, however late (after a
    // crash it may wait for the next running-transactions record). Only in-doubt ones go.
    if (c.txn.status() == v1::Transaction::COMMITTED) {
      ++it;
      continue;
    }
    c.txn.set_stream(options_.stream);
    out_.push_back(std::move(c.txn));
    ++stats_.never_decoded;
    clients_.erase(it++);
  }
}

Joiner::Output Joiner::Take(absl::Time now) {
  while (!decoded_.empty()) {
    const DecodedTxn& d = decoded_.front();
    std::optional<Tag> tag = FindTag(d);
    if (!tag) {
      ++stats_.foreign;
    } else if (tag->run == options_.run) {
      auto it = clients_.find(tag->text);
      if (it != clients_.end()) {
        EmitJoined(std::move(it->second), d);
        clients_.erase(it);
      } else {
        // Its session has not recorded it yet.
        if (!head_waiting_since_) head_waiting_since_ = now;
        if (now - *head_waiting_since_ < options_.orphan_timeout) break;
        spdlog::error(
            "xid {} committed at {} but its session never recorded it: sent with its writes only",
            d.xid, LsnToString(d.commit_lsn));
        ++stats_.orphaned;
        EmitDecodedOnly(d, *tag);
        --stats_.decoded_only;
      }
    } else {
      EmitDecodedOnly(d, *tag);
    }
    watermark_ = d.commit_lsn;
    handled_upto_ = d.end_lsn;
    head_waiting_since_.reset();
    decoded_.pop_front();
  }
  Output o;
  o.txns = std::move(out_);
  out_.clear();
  o.commit_times_us = std::move(commit_times_us_);
  commit_times_us_.clear();
  o.watermark = watermark_;
  o.handled_upto = handled_upto_;
  return o;
}

}  // namespace isowatch::pg
