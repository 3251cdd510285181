// SPDX-License-Identifier: Apache-2.0
// Encoder of Cobra client logs (see cobra.h).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include <fmt/format.h>

#include "isowatch/formats/cobra.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;

void PutBigEndian(std::string& out, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(u >> shift));
}

absl::Status Refuse(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("Cobra logs cannot express {}", what));
}

int64_t Lookup(const absl::flat_hash_map<int64_t, int64_t>* map, int64_t key, int64_t fallback) {
  if (map == nullptr) return fallback;
  auto it = map->find(key);
  return it == map->end() ? fallback : it->second;
}

}  // namespace

absl::StatusOr<NamedFiles> EncodeCobra(const History& h, const CobraExtras* extras) {
  bool time_order = extras != nullptr && extras->time_order;
  for (const Transaction& t : h.txns()) time_order = time_order || t.has_real_time;
  // Transaction ids, and which transaction writes each write id.
  std::vector<int64_t> ids;
  absl::flat_hash_map<int64_t, int64_t> writer_of;
  for (const Transaction& t : h.txns()) {
    const TxnId id(h.first_txn() + ids.size());
    int64_t n = 0;
    const std::string_view name = h.txn_name(id);
    if (!absl::SimpleAtoi(absl::string_view(name.data(), name.size()), &n)) {
      return Refuse(fmt::format("the transaction id \"{}\" (not an integer)", name));
    }
    if (t.status != TxnStatus::kCommitted) {
      return Refuse(fmt::format("the {} transaction {} (logs hold committed ones only)",
                                history::TxnStatusName(t.status), name));
    }
    if (time_order && !t.has_real_time) {
      return Refuse(fmt::format("transaction {} without a real-time interval in time order", name));
    }
    ids.push_back(n);
    for (const Op& op : h.ops(t)) {
      if (op.kind() == OpKind::kWrite && op.value().is_int() && op.value().as_int() > 0) {
        writer_of.try_emplace(op.value().as_int(), n);
      }
    }
  }
  const auto* hashes = extras ? &extras->value_hash : nullptr;
  std::vector<std::string> per_session(h.session_count());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Transaction& t = h.txns()[i];
    std::string& out = per_session[t.session.value()];
    out.push_back('S');
    PutBigEndian(out, ids[i]);
    if (time_order) PutBigEndian(out, t.invoke_time);
    for (const Op& op : h.ops(t)) {
      const history::KeyInfo& key = h.key(op.key());
      if (!key.is_int) return Refuse(fmt::format("the bytes key {}", h.KeyToString(op.key())));
      if (op.kind() == OpKind::kAppend || op.kind() == OpKind::kListRead) {
        return Refuse("list operations");
      }
      if (op.unknown()) return Refuse(fmt::format("the unknown read of transaction {}", ids[i]));
      const Value v = op.value();
      if (!v.is_int() && !(op.kind() == OpKind::kRead && v.absent())) {
        return Refuse(fmt::format("the value {}", h.ValueToString(v)));
      }
      if (op.kind() == OpKind::kWrite) {
        out.push_back('W');
        const bool del = v.as_int() <= 0;
        PutBigEndian(out, del ? kCobraDelete : v.as_int());
        PutBigEndian(out, key.payload);
        PutBigEndian(out, del ? Lookup(extras ? &extras->delete_hash : nullptr, v.as_int(), 0)
                              : Lookup(hashes, v.as_int(), v.as_int()));
        continue;
      }
      out.push_back('R');
      if (v.absent()) {
        PutBigEndian(out, kCobraNull);
        PutBigEndian(out, kCobraNull);
        PutBigEndian(out, key.payload);
        PutBigEndian(out, 0);
      } else if (v.as_int() == kCobraInit && h.InitialValue(op.key()) == v) {
        PutBigEndian(out, kCobraInit);
        PutBigEndian(out, kCobraInit);
        PutBigEndian(out, key.payload);
        PutBigEndian(out, Lookup(extras ? &extras->init_hash : nullptr, key.payload, 0));
      } else if (h.InitialValue(op.key()) == v && !writer_of.contains(v.as_int())) {
        // A read of another initial value (0 in a text history): an INIT read of that value.
        PutBigEndian(out, kCobraInit);
        PutBigEndian(out, kCobraInit);
        PutBigEndian(out, key.payload);
        PutBigEndian(out, v.as_int());
      } else {
        int64_t writer = 0;
        if (auto c = extras ? extras->claimed_writer.find(v.as_int())
                            : absl::flat_hash_map<int64_t, int64_t>::const_iterator();
            extras && c != extras->claimed_writer.end()) {
          writer = c->second;
        } else if (auto it = writer_of.find(v.as_int()); it != writer_of.end()) {
          writer = it->second;
        } else {
          return Refuse(
              fmt::format("the read of write id {} that no transaction writes", v.as_int()));
        }
        PutBigEndian(out, writer);
        PutBigEndian(out, v.as_int());
        PutBigEndian(out, key.payload);
        PutBigEndian(out, Lookup(hashes, v.as_int(), v.as_int()));
      }
    }
    out.push_back('C');
    PutBigEndian(out, ids[i]);
    if (time_order) PutBigEndian(out, t.complete_time);
  }
  NamedFiles files;
  for (size_t s = 0; s < per_session.size(); ++s) {
    const std::string_view name = h.session_name(SessionId(s));
    files.emplace_back(fmt::format("{}{}.log", name.starts_with('T') ? "" : "T", name),
                       std::move(per_session[s]));
  }
  return files;
}

absl::Status WriteCobraDir(const History& h, const std::string& dir, const CobraExtras* extras) {
  absl::StatusOr<NamedFiles> files = EncodeCobra(h, extras);
  if (!files.ok()) return files.status();
  for (const auto& [name, bytes] : *files) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out) return absl::DataLossError(fmt::format("{}: write failed", path));
  }
  return absl::OkStatus();
}

}  // namespace isowatch::formats
