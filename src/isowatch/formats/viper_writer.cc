// SPDX-License-Identifier: Apache-2.0
//
// Writer of ViperBench JSON lines (docs/history-format.md, "ViperBench JSON lines").
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/internal/viper_names.h"
#include "isowatch/formats/viper.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::KeyBound;
using history::KeyValue;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::Value;

// `s` as a JSON string. REQUIRES: s is UTF-8 (checked by the caller).
void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

class Encoder {
 public:
  explicit Encoder(const History& h) : h_(h) {}

  absl::StatusOr<ViperFiles> Encode() {
    RETURN_IF_ERROR(CheckHistory());
    // Sessions keep their names when every one is J<digits>; else J1, J2, ...
    bool keep_names = true;
    for (size_t s = 0; s < h_.session_count(); ++s) {
      const std::string_view name = h_.session_name(SessionId(static_cast<uint32_t>(s)));
      keep_names = keep_names && internal::IsViperLogName(fmt::format("{}.log", name));
    }
    std::vector<std::string> names(h_.session_count());
    absl::flat_hash_set<std::string> taken;
    for (size_t s = 0; s < names.size(); ++s) {
      names[s] = keep_names ? std::string(h_.session_name(SessionId(static_cast<uint32_t>(s))))
                            : fmt::format("J{}", s + 1);
      taken.insert(names[s]);
    }
    // Transactions by session, in session order.
    std::vector<std::vector<std::pair<uint32_t, uint64_t>>> by_session(names.size());
    for (uint64_t i = 0; i < h_.size(); ++i) {
      const Transaction& t = h_.txn(TxnId(i));
      by_session[t.session.value()].emplace_back(t.seq, i);
    }
    ViperFiles files;
    std::optional<std::string> initial = Initial();
    if (!initial.has_value() && !status_.ok()) return status_;
    if (initial) {
      // J0, J00, J000, ...: the first not taken by a session.
      std::string name = "J0";
      while (taken.contains(name)) name.push_back('0');
      files.emplace_back(name + ".log", std::move(*initial));
    }
    for (size_t s = 0; s < names.size(); ++s) {
      if (by_session[s].empty()) continue;  // every transaction of it was abandoned
      std::sort(by_session[s].begin(), by_session[s].end());
      std::string out;
      for (const auto& [seq, id] : by_session[s]) {
        RETURN_IF_ERROR(Txn(TxnId(id), out));
      }
      files.emplace_back(names[s] + ".log", std::move(out));
    }
    for (const KeyValue& kv : h_.tombstones()) {
      if (!expressed_.contains(kv)) {
        return absl::InvalidArgumentError(fmt::format(
            "the tombstone {} = {} is neither written by a delete, returned dead by a range read "
            "nor read by an insert or delete: ViperBench cannot say it is one",
            h_.KeyToString(kv.key), h_.ValueToString(kv.value)));
      }
    }
    // A history without a transaction or an initial state is an empty J1.log, so that what is
    // written can always be read.
    if (files.empty()) files.emplace_back("J1.log", "");
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
      return internal::ViperNameLess(a.first, b.first);
    });
    return files;
  }

 private:
  absl::Status CheckHistory() {
    std::optional<bool> string_keys;
    for (size_t k = 0; k < h_.key_count(); ++k) {
      const history::KeyInfo& info = h_.key(KeyId(static_cast<uint32_t>(k)));
      if (info.forgotten) continue;
      if (info.is_list) {
        return absl::InvalidArgumentError(
            fmt::format("key {} is a list: ViperBench holds registers only",
                        h_.KeyToString(KeyId(static_cast<uint32_t>(k)))));
      }
      if (string_keys && *string_keys == info.is_int) {
        return absl::InvalidArgumentError(
            "the history has integer and bytes keys: ViperBench keys are all integers or all "
            "strings");
      }
      string_keys = !info.is_int;
      if (const std::string_view bytes =
              info.is_int ? std::string_view() : h_.bytes(static_cast<uint32_t>(info.payload));
          !simdjson::validate_utf8(bytes.data(), bytes.size())) {
        return absl::InvalidArgumentError(
            fmt::format("key {} is not UTF-8: a ViperBench string key must be",
                        h_.KeyToString(KeyId(static_cast<uint32_t>(k)))));
      }
    }
    if (h_.has_real_time() && !h_.info().time_unit.empty() && h_.info().time_unit != "ms") {
      return absl::InvalidArgumentError(fmt::format(
          "real-time intervals are in {}: ViperBench's are in ms", h_.info().time_unit));
    }
    const history::InitialState& initial = h_.initial();
    if (!initial.default_value.absent()) {
      return absl::InvalidArgumentError(
          fmt::format("the default initial value is {}: ViperBench's unwritten keys are null",
                      h_.ValueToString(initial.default_value)));
    }
    if (!initial.lists.empty()) {
      return absl::InvalidArgumentError("initial lists: ViperBench holds registers only");
    }
    if (!initial.versions.empty()) {
      return absl::InvalidArgumentError(
          "installed initial versions: ViperBench's initial state is a plain transaction");
    }
    return absl::OkStatus();
  }

  void Key(KeyId key, std::string& out) const {
    const history::KeyInfo& info = h_.key(key);
    if (info.is_int) {
      fmt::format_to(std::back_inserter(out), "{}", info.payload);
    } else {
      AppendJsonString(out, h_.bytes(static_cast<uint32_t>(info.payload)));
    }
  }

  // A value as ViperBench writes it: absent = 0. Errors: what it cannot hold.
  absl::Status Val(Value v, bool may_be_absent, std::string_view what, std::string& out) const {
    if (v.is_bytes()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: the value {} is bytes: ViperBench values are 64-bit integers", what,
                      h_.ValueToString(v)));
    }
    if (v.absent() && !may_be_absent) {
      return absl::InvalidArgumentError(
          fmt::format("{}: an absent value written: ViperBench writes values", what));
    }
    if (v.is_int() && v.as_int() == 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: the value 0, which ViperBench reads as null", what));
    }
    fmt::format_to(std::back_inserter(out), "{}", v.absent() ? 0 : v.as_int());
    return absl::OkStatus();
  }

  absl::Status Records(std::span<const KeyValue> records, bool dead, std::string_view what,
                       std::string& out) {
    out += '[';
    for (size_t i = 0; i < records.size(); ++i) {
      if (i > 0) out += ", ";
      out += "{\"id\": ";
      Key(records[i].key, out);
      out += ", \"val\": ";
      RETURN_IF_ERROR(Val(records[i].value, true, what, out));
      out += '}';
      if (dead) expressed_.insert(records[i]);
    }
    out += ']';
    return absl::OkStatus();
  }

  absl::Status Bound(KeyBound b, std::string_view what, std::string& out) const {
    if (b.unbounded) {
      out += "\"nil\"";
      return absl::OkStatus();
    }
    const history::KeyInfo& info = h_.key(b.key);
    if (!info.is_int && h_.bytes(static_cast<uint32_t>(info.payload)) == "nil") {
      return absl::InvalidArgumentError(fmt::format(
          "{}: a range bound is the key \"nil\", which ViperBench reads as no bound", what));
    }
    Key(b.key, out);
    return absl::OkStatus();
  }

  // The initial state as one line: an unbounded range when some value is a tombstone (only a
  // range's dead records say so) or listed as null (a record's value 0), else writes. nullopt:
  // none, or an error in status_.
  std::optional<std::string> Initial() {
    std::vector<KeyId> keys;
    for (const auto& [key, value] : h_.initial().registers) keys.push_back(key);
    if (keys.empty()) return std::nullopt;
    std::sort(keys.begin(), keys.end(), [this](KeyId a, KeyId b) {
      const history::KeyInfo& x = h_.key(a);
      const history::KeyInfo& y = h_.key(b);
      if (x.is_int) return x.payload < y.payload;
      return h_.bytes(static_cast<uint32_t>(x.payload)) <
             h_.bytes(static_cast<uint32_t>(y.payload));
    });
    std::vector<KeyValue> live, dead;
    bool any_absent = false;
    for (KeyId key : keys) {
      const Value v = h_.initial().registers.at(key);
      any_absent = any_absent || v.absent();
      (h_.IsTombstone(key, v) ? dead : live).push_back({key, v});
    }
    std::string out = "{\"value\": [";
    if (dead.empty() && !any_absent) {
      for (size_t i = 0; i < live.size(); ++i) {
        out += i > 0 ? ", [\"w\", " : "[\"w\", ";
        Key(live[i].key, out);
        out += ", ";
        if (status_ = Val(live[i].value, false, "the initial state", out); !status_.ok()) {
          return std::nullopt;
        }
        out += ", true]";
      }
    } else {
      out += "[\"range\", \"nil\", \"nil\", ";
      status_ = Records(live, false, "the initial state", out);
      if (status_.ok()) {
        out += ", ";
        status_ = Records(dead, true, "the initial state", out);
      }
      if (!status_.ok()) return std::nullopt;
      out += ']';
    }
    out += "], \"isInitial\": true}\n";
    return out;
  }

  absl::Status Txn(TxnId id, std::string& out) {
    const Transaction& t = h_.txn(id);
    const std::string name(h_.txn_name(id));
    auto refuse = [&](std::string_view why) {
      return absl::InvalidArgumentError(fmt::format("transaction {}: {}", name, why));
    };
    if (!t.committed()) {
      return refuse(fmt::format("it is {}: ViperBench holds committed transactions only",
                                history::TxnStatusName(t.status)));
    }
    if (t.has_start || t.has_commit) {
      return refuse("database timestamps: ViperBench holds client real time only");
    }
    if (h_.xid(t) != 0 || h_.has_snapshot(t)) {
      return refuse("an xid or snapshot: ViperBench holds neither");
    }
    std::span<const Op> ops = h_.ops(t);
    std::span<const history::RangeRead> ranges = h_.range_reads(id);
    out += "{\"value\": [";
    bool first = true;
    auto mop = [&]() -> std::string& {
      if (!first) out += ", ";
      first = false;
      return out;
    };
    size_t next_range = 0;
    auto emit_ranges = [&](size_t position) -> absl::Status {
      for (; next_range < ranges.size() && ranges[next_range].position == position; ++next_range) {
        const history::RangeRead& r = ranges[next_range];
        const std::string what = fmt::format("transaction {}, range read {}", name, next_range);
        std::string& o = mop();
        o += "[\"range\", ";
        RETURN_IF_ERROR(Bound(r.low, what, o));
        o += ", ";
        RETURN_IF_ERROR(Bound(r.high, what, o));
        o += ", ";
        RETURN_IF_ERROR(Records(h_.range_live(r), false, what, o));
        o += ", ";
        RETURN_IF_ERROR(Records(h_.range_dead(r), true, what, o));
        o += ']';
      }
      return absl::OkStatus();
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      RETURN_IF_ERROR(emit_ranges(i));
      const Op& op = ops[i];
      const std::string what = fmt::format("transaction {}, operation {}", name, i);
      if (op.kind() == OpKind::kAppend || op.kind() == OpKind::kListRead) {
        return refuse("a list operation: ViperBench holds registers only");
      }
      if (op.unknown()) return refuse("an unknown read: every ViperBench read was observed");
      const bool tomb_read = op.kind() == OpKind::kRead && h_.IsTombstone(op.key(), op.value());
      // A read and then a write of the same key, with no range read between: an insert or a
      // delete when a tombstone is involved (the only mops that say so).
      const bool pair = op.kind() == OpKind::kRead && i + 1 < ops.size() &&
                        ops[i + 1].kind() == OpKind::kWrite && ops[i + 1].key() == op.key() &&
                        !(next_range < ranges.size() && ranges[next_range].position == i + 1);
      const bool writes_tomb = pair && h_.IsTombstone(op.key(), ops[i + 1].value());
      std::string& o = mop();
      if (pair && (writes_tomb || tomb_read)) {
        o += writes_tomb ? "[\"d\", " : "[\"i\", ";
        Key(op.key(), o);
        o += ", ";
        RETURN_IF_ERROR(Val(ops[i + 1].value(), false, what, o));
        o += ", ";
        RETURN_IF_ERROR(Val(op.value(), true, what, o));
        o += tomb_read ? ", true, true]" : ", false, true]";
        if (writes_tomb) expressed_.insert({op.key(), ops[i + 1].value()});
        if (tomb_read) expressed_.insert({op.key(), op.value()});
        ++i;
        continue;
      }
      if (tomb_read) {
        // A delete that found the key already deleted and wrote nothing.
        o += "[\"d\", ";
        Key(op.key(), o);
        o += ", ";
        RETURN_IF_ERROR(Val(op.value(), false, what, o));
        o += ", ";
        RETURN_IF_ERROR(Val(op.value(), false, what, o));
        o += ", true, false]";
        expressed_.insert({op.key(), op.value()});
        continue;
      }
      o += op.kind() == OpKind::kRead ? "[\"r\", " : "[\"w\", ";
      Key(op.key(), o);
      o += ", ";
      RETURN_IF_ERROR(Val(op.value(), op.kind() == OpKind::kRead, what, o));
      o += op.kind() == OpKind::kRead ? ", false]" : ", true]";
    }
    RETURN_IF_ERROR(emit_ranges(ops.size()));
    out += ']';
    if (t.has_real_time) {
      if (t.complete_time == Transaction::kNeverCompleted) {
        return refuse("never completed: a ViperBench transaction has a postCommitTS");
      }
      fmt::format_to(std::back_inserter(out), ", \"preBeginTS\": {}, \"postCommitTS\": {}",
                     t.invoke_time, t.complete_time);
    }
    out += "}\n";
    return absl::OkStatus();
  }

  const History& h_;
  absl::Status status_;
  absl::flat_hash_set<KeyValue> expressed_;  // tombstones some mop marks as such
};

}  // namespace

absl::StatusOr<ViperFiles> EncodeViper(const History& h) { return Encoder(h).Encode(); }

absl::Status WriteViperDir(const History& h, const std::string& dir) {
  ASSIGN_OR_RETURN(ViperFiles files, EncodeViper(h));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("{}: cannot create: {}", dir, ec.message()));
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (internal::IsViperLogName(name)) {
      return absl::FailedPreconditionError(fmt::format(
          "{} already holds {}: write a ViperBench history into a directory without one", dir,
          name));
    }
  }
  for (const auto& [name, contents] : files) {
    std::ofstream out(std::filesystem::path(dir) / name, std::ios::binary);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) return absl::UnavailableError(fmt::format("{}/{}: write failed", dir, name));
  }
  return absl::OkStatus();
}

}  // namespace isowatch::formats
