// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/internal/model.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include <fmt/format.h>

namespace isowatch::checkers::polygraph {
namespace {

using history::History;
using history::KeyValue;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;
using verdict::Anomaly;
using verdict::Violation;

constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();
// The writer of the initial state, in place of a node.
constexpr uint32_t kGenesis = kNoNode - 1;

// Who wrote a (key, value) pair.
struct WriteRef {
  TxnId txn;
  bool final = false;  // the transaction's last write of the key
};

// A read of a value written outside its transaction, resolved to its writer (a node, or
// kGenesis).
struct ExtRead {
  uint32_t reader = 0;
  KeyId key;
  Value value;
  uint32_t writer = 0;
  bool rmw = false;  // the reader also wrote the key
};

uint64_t Pack(KeyId key, uint32_t node) { return (uint64_t{key.value()} << 32) | node; }

class Builder {
 public:
  Builder(const History& h, bool session_edges, const CheckLimits* limits)
      : h_(h), session_edges_(session_edges), poll_(limits, 64) {}

  Model Build() && {
    IndexWrites();
    if (Stopped()) return std::move(model_);
    if (list_ops_ > 0) {
      model_.unjudgeable = fmt::format(
          "the history holds {} list operations, and the polygraph judges registers only",
          list_ops_);
      return std::move(model_);
    }
    if (model_.stats.duplicate_writes > 0) {
      model_.unjudgeable = fmt::format(
          "{} (key, value) pairs are written by more than one transaction (or equal the key's "
          "initial value), so a read does not say which write it saw",
          model_.stats.duplicate_writes);
      return std::move(model_);
    }
    ChooseNodes();
    for (uint32_t node = 0; node < model_.txns.size() && !Stopped(); ++node) ReadsOf(node);
    for (size_t i = 0; i < ext_.size() && !Stopped(); ++i) Resolve(ext_[i]);
    if (!Stopped()) CombineWrites();
    if (session_edges_ && !Stopped()) AddSessionEdges();
    return std::move(model_);
  }

 private:
  bool Stopped() {
    if (poll_.Expired()) model_.stopped = true;
    return model_.stopped;
  }

  std::string Name(TxnId id) const { return h_.TxnLabel(id); }
  std::string Key(KeyId k) const { return h_.KeyToString(k); }
  std::string Val(Value v) const { return h_.ValueToString(v); }

  bool IsInitial(KeyId k, Value v) const {
    return (v.absent() && h_.AbsentReadsInitial(k)) || v == h_.InitialValue(k);
  }

  void Find(Anomaly anomaly, std::vector<TxnId> txns, KeyId key, std::string explanation) {
    Violation v;
    v.anomaly = anomaly;
    v.txns = std::move(txns);
    v.key = key;
    v.explanation = std::move(explanation);
    model_.findings.push_back(std::move(v));
  }

  // Every register write, with whether it is its transaction's last of the key.
  void IndexWrites() {
    absl::flat_hash_map<KeyId, Value> last;
    for (uint64_t i = 0; i < h_.txns().size() && !Stopped(); ++i) {
      const TxnId id(h_.first_txn() + i);
      last.clear();
      for (const Op& op : h_.ops(id)) {
        if (op.kind() == OpKind::kAppend || op.kind() == OpKind::kListRead) ++list_ops_;
        if (op.kind() != OpKind::kWrite) continue;
        const KeyValue kv{op.key(), op.value()};
        auto [it, fresh] = writes_.try_emplace(kv, WriteRef{id, false});
        if (!fresh && it->second.txn != id) ++model_.stats.duplicate_writes;
        if (fresh && IsInitial(op.key(), op.value()) && !op.value().absent()) {
          ++model_.stats.duplicate_writes;
        }
        last[op.key()] = op.value();
      }
      for (const auto& [k, v] : last) writes_[KeyValue{k, v}].final = true;
    }
  }

  // Committed transactions, and those of unknown outcome that a node read from (they must have
  // committed); the other unknown ones are judged as aborted, which only removes constraints.
  void ChooseNodes() {
    node_of_.assign(h_.txns().size(), kNoNode);
    std::vector<uint64_t> queue;
    for (uint64_t i = 0; i < h_.txns().size(); ++i) {
      if (h_.txns()[i].committed()) queue.push_back(i);
    }
    for (size_t q = 0; q < queue.size(); ++q) {
      const uint64_t i = queue[q];
      if (node_of_[i] != kNoNode) continue;
      node_of_[i] = static_cast<uint32_t>(model_.txns.size());
      const TxnId id(h_.first_txn() + i);
      model_.txns.push_back(id);
      if (!h_.txns()[i].committed()) ++model_.stats.unknown_committed;
      for (const Op& op : h_.ops(id)) {
        if (op.kind() != OpKind::kRead || op.unknown()) continue;
        auto it = writes_.find(KeyValue{op.key(), op.value()});
        if (it == writes_.end()) continue;
        const uint64_t w = it->second.txn.value() - h_.first_txn();
        if (h_.txns()[w].status == TxnStatus::kUnknown && node_of_[w] == kNoNode) {
          queue.push_back(w);
        }
      }
    }
    for (uint64_t i = 0; i < h_.txns().size(); ++i) {
      if (h_.txns()[i].status == TxnStatus::kUnknown && node_of_[i] == kNoNode) {
        ++model_.stats.unknown_dropped;
      }
    }
    model_.stats.transactions = model_.txns.size();
  }

  // kNoNode for a transaction that is no node (or that the history no longer holds in order).
  uint32_t NodeOf(TxnId id) const {
    if (!id.valid() || id.value() < h_.first_txn()) return kNoNode;
    const uint64_t i = id.value() - h_.first_txn();
    return i < node_of_.size() ? node_of_[i] : kNoNode;
  }

  // The internal checks of one transaction; its external reads go to ext_.
  void ReadsOf(uint32_t node) {
    const TxnId id = model_.txns[node];
    absl::flat_hash_map<KeyId, Value> own;
    absl::flat_hash_map<KeyId, Value> first_read;
    const size_t ext_begin = ext_.size();
    for (const Op& op : h_.ops(id)) {
      const KeyId k = op.key();
      if (op.kind() == OpKind::kWrite) {
        own[k] = op.value();
        continue;
      }
      if (op.kind() != OpKind::kRead) continue;
      if (op.unknown()) {
        ++model_.stats.unobserved_reads;
        continue;
      }
      const Value v = op.value();
      if (auto it = own.find(k); it != own.end()) {
        if (it->second != v) {
          Find(Anomaly::kInt, {id}, k,
               fmt::format("{} read {} = {} after writing {} = {} itself", Name(id), Key(k), Val(v),
                           Key(k), Val(it->second)));
        }
        continue;
      }
      if (auto it = first_read.find(k); it != first_read.end()) {
        if (it->second != v) {
          Find(Anomaly::kInt, {id}, k,
               fmt::format("{} read {} twice from one snapshot and saw {} then {}", Name(id),
                           Key(k), Val(it->second), Val(v)));
        }
        continue;
      }
      first_read[k] = v;
      auto w = writes_.find(KeyValue{k, v});
      if (w != writes_.end() && w->second.txn == id) {
        Find(Anomaly::kInt, {id}, k,
             fmt::format("{} read {} = {}, a value it wrote only later", Name(id), Key(k), Val(v)));
        continue;
      }
      ext_.push_back({node, k, v, kNoNode, false});
    }
    for (size_t e = ext_begin; e < ext_.size(); ++e) ext_[e].rmw = own.contains(ext_[e].key);
  }

  // Finds the writer of an external read; adds its wr edge, or a finding.
  void Resolve(ExtRead r) {
    const Value v = r.value;
    const TxnId reader = model_.txns[r.reader];
    auto it = writes_.find(KeyValue{r.key, v});
    if (it == writes_.end()) {
      if (IsInitial(r.key, v)) {
        r.writer = kGenesis;
        reads_.push_back(r);
        return;
      }
      Find(Anomaly::kThinAir, {reader}, r.key,
           fmt::format("{} read {} = {}, which no transaction wrote and which is not the initial "
                       "value",
                       Name(reader), Key(r.key), Val(v)));
      return;
    }
    const TxnId writer = it->second.txn;
    const uint32_t w = NodeOf(writer);
    if (w == kNoNode) {
      Find(Anomaly::kG1a, {reader, writer}, r.key,
           fmt::format("{} read {} = {}, written by {}, which aborted", Name(reader), Key(r.key),
                       Val(v), Name(writer)));
      return;
    }
    if (!it->second.final) {
      Find(Anomaly::kG1b, {reader, writer}, r.key,
           fmt::format("{} read {} = {}, which {} overwrote before it committed (an intermediate "
                       "write)",
                       Name(reader), Key(r.key), Val(v), Name(writer)));
      return;
    }
    r.writer = w;
    reads_.push_back(r);
    model_.known.push_back({w, r.reader, EdgeKind::kWr, r.key});
  }

  // Chains of read-modify-writes per key (a transaction that read a key from W and wrote it
  // is W's next version of the key), the known edges they give, and one constraint per pair of
  // chains (docs/checkers/polygraph.md, "Combining writes and coalescing constraints").
  void CombineWrites() {
    absl::flat_hash_map<KeyId, std::vector<uint32_t>> writers;
    for (uint32_t node = 0; node < model_.txns.size(); ++node) {
      for (const Op& op : h_.ops(model_.txns[node])) {
        if (op.kind() != OpKind::kWrite) continue;
        std::vector<uint32_t>& ws = writers[op.key()];
        if (ws.empty() || ws.back() != node) ws.push_back(node);
      }
    }
    absl::flat_hash_map<uint64_t, std::vector<uint32_t>> readers;  // (key, writer) -> readers
    absl::flat_hash_map<uint64_t, uint32_t> next;                  // (key, writer) -> rmw
    absl::flat_hash_set<uint64_t> has_prev;                        // (key, rmw)
    for (const ExtRead& r : reads_) {
      readers[Pack(r.key, r.writer)].push_back(r.reader);
      if (!r.rmw) continue;
      auto [it, fresh] = next.try_emplace(Pack(r.key, r.writer), r.reader);
      if (!fresh) {
        LostUpdate(r.key, r.writer, it->second, r.reader);
        continue;
      }
      if (r.writer != kGenesis) has_prev.insert(Pack(r.key, r.reader));
    }
    for (auto& [k, ws] : writers) {
      std::sort(ws.begin(), ws.end());
      ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
      size_t reads = 0;
      std::vector<std::pair<uint32_t, uint32_t>> chains;  // (head, tail)
      for (uint32_t head : ws) {
        if (has_prev.contains(Pack(k, head))) continue;
        uint32_t tail = head;
        for (size_t steps = 0; steps <= ws.size(); ++steps) {
          auto rs = readers.find(Pack(k, tail));
          auto nx = next.find(Pack(k, tail));
          const uint32_t succ = nx == next.end() ? kNoNode : nx->second;
          if (rs != readers.end()) {
            reads += rs->second.size();
            for (uint32_t r : rs->second) {
              if (succ != kNoNode && r != succ) model_.known.push_back({r, succ, EdgeKind::kRw, k});
            }
          }
          if (succ == kNoNode) break;
          tail = succ;
        }
        chains.emplace_back(head, tail);
      }
      model_.stats.chains += chains.size();
      const size_t w = ws.size();
      model_.stats.raw_constraints += w * (w - 1) / 2 + reads * (w - 1);
      if (auto g = readers.find(Pack(k, kGenesis)); g != readers.end()) {
        model_.stats.raw_constraints += g->second.size() * (w - 1);
        for (uint32_t r : g->second) {
          for (const auto& [head, tail] : chains) {
            if (r != head) model_.known.push_back({r, head, EdgeKind::kRw, k});
          }
        }
      }
      for (size_t a = 0; a < chains.size(); ++a) {
        if (Stopped()) return;
        for (size_t b = a + 1; b < chains.size(); ++b) {
          Constraint c{.key = k, .first_head = chains[a].first, .second_head = chains[b].first};
          c.begin = static_cast<uint32_t>(model_.constraint_edges.size());
          Order(k, chains[a], chains[b], readers);
          c.mid = static_cast<uint32_t>(model_.constraint_edges.size());
          Order(k, chains[b], chains[a], readers);
          c.end = static_cast<uint32_t>(model_.constraint_edges.size());
          model_.constraints.push_back(c);
        }
      }
    }
  }

  // The edges of "chain x before chain y" on key k: x's tail is overwritten by y's head, so
  // every reader of x's tail read a version y's head overwrote.
  void Order(KeyId k, std::pair<uint32_t, uint32_t> x, std::pair<uint32_t, uint32_t> y,
             const absl::flat_hash_map<uint64_t, std::vector<uint32_t>>& readers) {
    model_.constraint_edges.push_back({x.second, y.first, EdgeKind::kWw, k});
    auto rs = readers.find(Pack(k, x.second));
    if (rs == readers.end()) return;
    for (uint32_t r : rs->second) {
      if (r != y.first) model_.constraint_edges.push_back({r, y.first, EdgeKind::kRw, k});
    }
  }

  void LostUpdate(KeyId k, uint32_t writer, uint32_t a, uint32_t b) {
    const std::string source = writer == kGenesis
                                   ? std::string("the initial value")
                                   : fmt::format("the version {} wrote", Name(model_.txns[writer]));
    std::vector<TxnId> txns = {model_.txns[a], model_.txns[b]};
    if (writer != kGenesis) txns.push_back(model_.txns[writer]);
    Find(Anomaly::kGSingle, std::move(txns), k,
         fmt::format("lost update: {} and {} both read {} of {} and both wrote {}, so one of "
                     "them overwrote an update it never saw",
                     Name(model_.txns[a]), Name(model_.txns[b]), source, Key(k), Key(k)));
  }

  // Session order between consecutive nodes of a session.
  void AddSessionEdges() {
    for (uint32_t node = 0; node < model_.txns.size(); ++node) {
      TxnId prev = h_.txn(model_.txns[node]).session_prev;
      while (prev.valid() && prev.value() >= h_.first_txn() && NodeOf(prev) == kNoNode) {
        prev = h_.txn(prev).session_prev;
      }
      if (NodeOf(prev) != kNoNode) {
        model_.known.push_back({NodeOf(prev), node, EdgeKind::kSession, KeyId()});
      }
    }
  }

  const History& h_;
  const bool session_edges_;
  LimitPoller poll_;
  Model model_;
  absl::flat_hash_map<KeyValue, WriteRef> writes_;
  std::vector<uint32_t> node_of_;  // history index -> node
  size_t list_ops_ = 0;
  std::vector<ExtRead> ext_;
  std::vector<ExtRead> reads_;  // resolved, with their writers
};

}  // namespace

const char* EdgeKindName(EdgeKind kind) {
  switch (kind) {
    case EdgeKind::kWr:
      return "wr";
    case EdgeKind::kWw:
      return "ww";
    case EdgeKind::kRw:
      return "rw";
    case EdgeKind::kSession:
      return "so";
    case EdgeKind::kRealTime:
      return "rt";
  }
  return "?";
}

Model BuildModel(const History& h, bool session_edges, const CheckLimits* limits) {
  return Builder(h, session_edges, limits).Build();
}

}  // namespace isowatch::checkers::polygraph
