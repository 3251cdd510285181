// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/adya/internal/graph_builder.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include "isowatch/axioms/own_appends.h"

namespace isowatch::checkers::adya::internal {

namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;
using verdict::Anomaly;

constexpr uint32_t kNoPos = std::numeric_limits<uint32_t>::max();

// Who wrote a (key, value), best first: when several transactions wrote it, the best one names
// the version.
enum class WriteClass : uint8_t {
  kCommittedFinal = 0,         // a committed transaction's last write to the key: a version
  kCommittedIntermediate = 1,  // a committed transaction's earlier write to the key
  kUnknown = 2,                // a transaction of unknown outcome
  kAborted = 3,
};

struct WriteRef {
  uint32_t txn;
  uint32_t op;
  uint32_t pos;  // the version's position in its key's version order; kNoPos if none
  WriteClass cls;
};

// (key, value), packed into 16 bytes: the index is the checker's largest structure, and its
// lookups are cache misses.
struct VersionKey {
  VersionKey(uint32_t k, Value v) : payload(v.payload()), key(k), kind(v.kind()) {}
  int64_t payload;
  uint32_t key;
  history::ValueKind kind;
  bool operator==(const VersionKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const VersionKey& v) {
    return H::combine(std::move(h), v.payload, v.key, static_cast<uint8_t>(v.kind));
  }
};

struct Version {
  uint32_t txn;
  uint32_t op;        // the writer's final write (or append) to the key
  uint32_t list_end;  // lists: the length of the list this version holds
};

class Builder {
 public:
  Builder(const History& h, LimitPoller* poll)
      : h_(h),
        poll_(poll),
        out_{.graph = DependencyGraph(static_cast<uint32_t>(h.size()))},
        last_op_(h.key_count(), 0),
        op_base_(h.size() + 1, 0),
        versions_(h.key_count()),
        lists_(h.key_count()),
        list_started_(h.key_count(), 0),
        black_box_(h.key_count(), 0),
        unobserved_(h.key_count()),
        longest_(h.key_count(), {kNoPos, 0}),
        own_stamp_(h.key_count(), 0),
        own_last_(h.key_count(), 0) {
    for (uint32_t t = 0; t < h.size(); ++t)
      op_base_[t + 1] = op_base_[t] + h.txn(TxnId(t)).ops_count;
    op_pos_.assign(op_base_.back(), kNoPos);
  }

  BuiltGraph Run() && {
    if (!OrderVersions() || !IndexWrites() || !InferOrders()) return Stopped();
    AddWriteDependencies();
    for (uint32_t t = 0; t < h_.size(); ++t) {
      if (Expired()) return Stopped();
      Prefetch(t + kPrefetchDistance, /*writes=*/false);
      if (!h_.txn(TxnId(t)).committed()) continue;
      ++out_.counts.committed;
      std::span<const Op> ops = h_.ops(TxnId(t));
      ++stamp_;
      for (uint32_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        if (op.is_write()) {
          own_stamp_[op.key().value()] = stamp_;
          own_last_[op.key().value()] = i;
        }
        if (op.unknown()) continue;
        if (op.kind() == OpKind::kRead) ReadRegister(t, i, op);
        if (op.kind() == OpKind::kListRead) ReadList(t, i, op);
      }
    }
    out_.graph.Finish();
    return std::move(out_);
  }

 private:
  // Transactions ahead of the one being processed whose index entries are prefetched: the index
  // outgrows the caches, and its lookups, random by nature, dominate the build.
  static constexpr uint32_t kPrefetchDistance = 4;

  bool Expired() { return poll_ != nullptr && poll_->Expired(); }
  BuiltGraph Stopped() {
    out_.complete = false;
    return std::move(out_);
  }

  // Prefetches the index entries transaction `t` (if it exists) will insert (writes) or look up
  // (register reads).
  void Prefetch(uint32_t t, bool writes) const {
    if (t >= h_.size()) return;
    for (const Op& op : h_.ops(TxnId(t))) {
      if (writes ? op.is_write() : (op.kind() == OpKind::kRead && !op.unknown())) {
        index_.prefetch(VersionKey(op.key().value(), op.value()));
      }
    }
  }

  // Marks, in last_op_, the last write of transaction `ops` to each key it writes.
  void MarkFinalWrites(std::span<const Op> ops) {
    for (uint32_t i = 0; i < ops.size(); ++i) {
      if (ops[i].is_write()) last_op_[ops[i].key().value()] = i;
    }
  }
  // REQUIRES: MarkFinalWrites(ops) was the last call, ops[i] is a write.
  bool IsFinal(std::span<const Op> ops, uint32_t i) const {
    return last_op_[ops[i].key().value()] == i;
  }

  // False: the limits expired.
  bool IndexWrites() {
    size_t writes = 0;
    for (uint32_t t = 0; t < h_.size(); ++t) {
      for (const Op& op : h_.ops(TxnId(t))) writes += op.is_write() ? 1 : 0;
    }
    index_.reserve(writes);
    for (uint32_t t = 0; t < h_.size(); ++t) {
      if (Expired()) return false;
      Prefetch(t + kPrefetchDistance, /*writes=*/true);
      const Transaction& txn = h_.txn(TxnId(t));
      std::span<const Op> ops = h_.ops(txn);
      MarkFinalWrites(ops);
      for (uint32_t i = 0; i < ops.size(); ++i) {
        if (!ops[i].is_write()) continue;
        WriteClass cls = WriteClass::kAborted;
        if (txn.status == TxnStatus::kCommitted) {
          cls = IsFinal(ops, i) ? WriteClass::kCommittedFinal : WriteClass::kCommittedIntermediate;
        } else if (txn.status == TxnStatus::kUnknown) {
          cls = WriteClass::kUnknown;
        }
        WriteRef ref{t, i, op_pos_[op_base_[t] + i], cls};
        auto [it, inserted] = index_.try_emplace({ops[i].key().value(), ops[i].value()}, ref);
        if (inserted) continue;
        if (it->second.txn != t && cls == WriteClass::kCommittedFinal &&
            it->second.cls == WriteClass::kCommittedFinal) {
          ++out_.counts.duplicate_writes;  // the first one in input order keeps the version
        } else if (cls < it->second.cls) {
          it->second = ref;
        }
      }
    }
    return true;
  }

  // Per key, the committed final writes in (commit timestamp, input order) order. False: the
  // limits expired.
  bool OrderVersions() {
    struct Committer {
      history::Timestamp commit;
      uint32_t txn;
      auto operator<=>(const Committer&) const = default;
    };
    std::vector<Committer> order;
    for (uint32_t t = 0; t < h_.size(); ++t) {
      if (Expired()) return false;
      const Transaction& txn = h_.txn(TxnId(t));
      if (!txn.committed()) continue;
      std::span<const Op> ops = h_.ops(txn);
      if (std::none_of(ops.begin(), ops.end(), [](const Op& op) { return op.is_write(); })) {
        continue;
      }
      if (txn.has_commit) {
        order.push_back({txn.commit, t});
      } else {
        for (const Op& op : ops) {
          if (op.is_write()) black_box_[op.key().value()] = 1;
        }
      }
    }
    std::sort(order.begin(), order.end());
    for (const auto& [commit, t] : order) {
      if (Expired()) return false;
      std::span<const Op> ops = h_.ops(TxnId(t));
      for (const Op& op : ops) {
        if (op.kind() == OpKind::kAppend && !black_box_[op.key().value()]) {
          List(op.key()).push_back(op.value());
        }
      }
      MarkFinalWrites(ops);
      for (uint32_t i = 0; i < ops.size(); ++i) {
        if (!ops[i].is_write() || !IsFinal(ops, i)) continue;
        const uint32_t k = ops[i].key().value();
        if (black_box_[k]) continue;  // ordered by InferOrders
        std::vector<Version>& chain = versions_[k];
        if (!chain.empty() && h_.txn(TxnId(chain.back().txn)).commit == commit) {
          ++out_.counts.commit_ties;
        }
        uint32_t list_end = ops[i].kind() == OpKind::kAppend ? List(ops[i].key()).size() : 0;
        op_pos_[op_base_[t] + i] = chain.size();
        chain.push_back({t, i, list_end});
        ++out_.counts.versions;
      }
    }
    return true;
  }

  // The version orders of the keys some committed writer of which has no commit timestamp,
  // inferred from the reads (docs/checkers/adya.md, "Histories without timestamps"). False: the
  // limits expired.
  bool InferOrders() {
    if (std::find(black_box_.begin(), black_box_.end(), 1) == black_box_.end()) return true;
    // Per black-box key: its committed readers' reads and its committed final writes.
    using Refs = std::vector<std::pair<uint32_t, uint32_t>>;
    std::vector<Refs> reads(h_.key_count());
    std::vector<Refs> writes(h_.key_count());
    for (uint32_t t = 0; t < h_.size(); ++t) {
      if (Expired()) return false;
      if (!h_.txn(TxnId(t)).committed()) continue;
      std::span<const Op> ops = h_.ops(TxnId(t));
      MarkFinalWrites(ops);
      for (uint32_t i = 0; i < ops.size(); ++i) {
        const uint32_t k = ops[i].key().value();
        if (!black_box_[k]) continue;
        if (ops[i].is_read() && !ops[i].unknown()) reads[k].emplace_back(t, i);
        if (ops[i].is_write() && IsFinal(ops, i)) writes[k].emplace_back(t, i);
      }
    }
    std::vector<uint8_t> unordered(h_.size(), 0);
    for (uint32_t k = 0; k < h_.key_count(); ++k) {
      if (!black_box_[k]) continue;
      if (Expired()) return false;
      ++out_.counts.inferred_keys;
      if (h_.key(KeyId(k)).is_list) {
        InferList(k, reads[k], writes[k]);
      } else if (!InferRegister(k, writes[k])) {
        ++out_.counts.undetermined_keys;
        for (const auto& [t, i] : writes[k]) unordered[t] = 1;
      }
    }
    for (uint32_t t = 0; t < h_.size(); ++t) {
      if (unordered[t]) out_.unordered_writers.push_back(TxnId(t));
    }
    return true;
  }

  // Puts the committed final write `w` of `key` next in the key's version order.
  void Place(uint32_t key, uint32_t txn, uint32_t op, uint32_t list_end) {
    std::vector<Version>& chain = versions_[key];
    const uint32_t pos = static_cast<uint32_t>(chain.size());
    op_pos_[op_base_[txn] + op] = pos;
    auto it = index_.find(VersionKey(key, h_.ops(TxnId(txn))[op].value()));
    if (it != index_.end() && it->second.txn == txn && it->second.op == op) it->second.pos = pos;
    chain.push_back({txn, op, list_end});
    ++out_.counts.versions;
  }

  // A list's order is its longest read's (the reader's own appends at its end set aside): each
  // committed writer's version sits at its last append. Writers no read shows come after all of
  // those, in an order nobody observed (AddAntiDependency, AddWriteDependencies).
  void InferList(uint32_t k, std::span<const std::pair<uint32_t, uint32_t>> reads,
                 std::span<const std::pair<uint32_t, uint32_t>> writes) {
    std::span<const Value> longest;
    for (const auto& [t, i] : reads) {
      std::span<const Value> seen = WithoutOwnAppends(t, k, h_.list_elements(h_.ops(TxnId(t))[i]));
      if (longest_[k].first == kNoPos || seen.size() > longest.size()) {
        longest = seen;
        longest_[k] = {t, i};
      }
    }
    list_started_[k] = 1;
    lists_[k].assign(longest.begin(), longest.end());
    for (uint32_t p = 0; p < longest.size(); ++p) {
      auto it = index_.find(VersionKey(k, longest[p]));
      if (it == index_.end() || it->second.cls != WriteClass::kCommittedFinal) continue;
      if (op_pos_[op_base_[it->second.txn] + it->second.op] != kNoPos) continue;  // a duplicate
      Place(k, it->second.txn, it->second.op, p + 1);
    }
    // Appends no read shows; those whose writer read the whole observed list first all overwrote
    // its last version: lost updates, pairwise.
    const std::pair<uint32_t, uint32_t>* first_partner = nullptr;
    uint32_t first_read = 0;
    for (const auto& w : writes) {
      const auto [t, i] = w;
      if (op_pos_[op_base_[t] + i] != kNoPos) continue;
      unobserved_[k].emplace_back(t, i);
      ++out_.counts.unobserved_appends;
      const uint32_t read = ReadOfLastVersion(t, k, longest);
      if (read == kNoPos) continue;
      partners_.insert(Pair(k, t));
      if (first_partner == nullptr) {
        first_partner = &w;
        first_read = read;
        continue;
      }
      out_.lost_updates.push_back(
          {.key = KeyId(k),
           .first = TxnId(first_partner->first),
           .second = TxnId(t),
           .base = versions_[k].empty() ? TxnId() : TxnId(versions_[k].back().txn),
           .first_read = first_read,
           .second_read = read});
    }
  }

  // The op index of `txn`'s read of list `key` before it first appends to it, if that read saw
  // exactly `last` (the key's whole observed list); kNoPos otherwise.
  uint32_t ReadOfLastVersion(uint32_t txn, uint32_t key, std::span<const Value> last) const {
    std::span<const Op> ops = h_.ops(TxnId(txn));
    uint32_t read = kNoPos;
    for (uint32_t o = 0; o < ops.size(); ++o) {
      if (ops[o].key().value() != key) continue;
      if (ops[o].is_write()) break;
      if (ops[o].kind() == OpKind::kListRead && !ops[o].unknown()) read = o;
    }
    if (read == kNoPos) return kNoPos;
    std::span<const Value> seen = h_.list_elements(ops[read]);
    return std::equal(seen.begin(), seen.end(), last.begin(), last.end()) ? read : kNoPos;
  }

  // A register's order follows from what its writers read before they overwrote it: a writer
  // that read the version of W installs the version after W's (as commit order would have it).
  // Placed when those links chain every committed writer, from one that read the initial version
  // or nothing; otherwise the key is undetermined (false). A link is no ww edge of its own: the
  // read it comes from is already a wr edge between the same two transactions.
  bool InferRegister(uint32_t k, std::span<const std::pair<uint32_t, uint32_t>> writes) {
    if (writes.empty()) return true;
    absl::flat_hash_map<uint32_t, uint32_t> slot;  // writer txn -> index in `writes`
    for (uint32_t j = 0; j < writes.size(); ++j) slot.emplace(writes[j].first, j);
    constexpr uint32_t kNone = kNoPos;         // read nothing before writing (or nothing known)
    constexpr uint32_t kInitial = kNoPos - 1;  // read the initial version
    std::vector<uint32_t> pred(writes.size(), kNone);
    std::vector<uint32_t> read_op(writes.size(), 0);
    for (uint32_t j = 0; j < writes.size(); ++j) {
      const auto [t, i] = writes[j];
      std::span<const Op> ops = h_.ops(TxnId(t));
      uint32_t read = kNone;  // the last read of k before the transaction first writes it
      for (uint32_t o = 0; o < ops.size(); ++o) {
        if (ops[o].key().value() != k) continue;
        if (ops[o].is_write()) break;
        if (!ops[o].unknown()) read = o;
      }
      if (read == kNone) continue;
      read_op[j] = read;
      const Value v = ops[read].value();
      auto it = index_.find(VersionKey(k, v));
      if (it != index_.end() && it->second.cls == WriteClass::kCommittedFinal) {
        auto s = slot.find(it->second.txn);
        if (s != slot.end() && s->second != j) pred[j] = s->second;
      } else if ((v.absent() && h_.AbsentReadsInitial(KeyId(k))) ||
                 v == h_.InitialValue(KeyId(k))) {
        pred[j] = kInitial;
      }
    }
    // Links: each version's one successor. Two writers that overwrote one version lost an update.
    std::vector<uint32_t> succ(writes.size(), kNone);
    uint32_t initial_succ = kNone;
    uint32_t head = kNone;
    size_t heads = 0;
    bool chained = true;
    for (uint32_t j = 0; j < writes.size(); ++j) {
      if (pred[j] == kNone || pred[j] == kInitial) {
        ++heads;
        head = j;
      }
      if (pred[j] == kNone) continue;
      uint32_t& next = pred[j] == kInitial ? initial_succ : succ[pred[j]];
      if (next != kNone) {
        chained = false;
        out_.lost_updates.push_back(
            {.key = KeyId(k),
             .first = TxnId(writes[next].first),
             .second = TxnId(writes[j].first),
             .base = pred[j] == kInitial ? TxnId() : TxnId(writes[pred[j]].first),
             .first_read = read_op[next],
             .second_read = read_op[j]});
        continue;
      }
      next = j;
    }
    size_t length = 0;
    if (chained && heads == 1) {
      for (uint32_t j = head; j != kNone && length <= writes.size(); j = succ[j]) ++length;
    }
    if (length != writes.size()) {
      // Every writer's version follows the initial one: a reader of that has an rw edge to each
      // (a shortcut of the real rw and ww path, with as many anti-dependencies), except a reader
      // that also overwrote it, whose order against the others is a lost update (above).
      unobserved_[k].assign(writes.begin(), writes.end());
      for (uint32_t j = 0; j < writes.size(); ++j) {
        if (pred[j] == kInitial) partners_.insert(Pair(k, writes[j].first));
      }
      return false;
    }
    for (uint32_t j = head; j != kNone; j = succ[j]) Place(k, writes[j].first, writes[j].second, 0);
    return true;
  }

  // `seen`, a list read by `reader`, without the reader's own appends at its end.
  std::span<const Value> WithoutOwnAppends(uint32_t reader, uint32_t key,
                                           std::span<const Value> seen) const {
    size_t n = seen.size();
    while (n > 0) {
      const WriteRef* w = FindWrite(key, seen[n - 1]);
      if (w == nullptr || w->txn != reader) break;
      --n;
    }
    return seen.first(n);
  }

  // The committed contents of list `key` so far, starting with its initial contents.
  std::vector<Value>& List(KeyId key) {
    std::vector<Value>& list = lists_[key.value()];
    if (!list_started_[key.value()]) {
      list_started_[key.value()] = 1;
      std::span<const Value> initial = h_.InitialList(key);
      list.assign(initial.begin(), initial.end());
    }
    return list;
  }

  void AddWriteDependencies() {
    for (uint32_t k = 0; k < versions_.size(); ++k) {
      const std::vector<Version>& chain = versions_[k];
      for (size_t p = 1; p < chain.size(); ++p) {
        out_.graph.Add(chain[p - 1].txn, chain[p].txn, EdgeKind::kWw, chain[p].op);
      }
      // Unobserved appends follow every observed version.
      if (chain.empty()) continue;
      for (const auto& [t, i] : unobserved_[k])
        out_.graph.Add(chain.back().txn, t, EdgeKind::kWw, i);
    }
  }

  // An anti-dependency from `reader`, which read the version of `key` at `pos` (-1: the initial
  // version), to the writer of the next version.
  void AddAntiDependency(uint32_t reader, uint32_t op, uint32_t key, int64_t pos) {
    const std::vector<Version>& chain = versions_[key];
    if (static_cast<size_t>(pos + 1) < chain.size()) {
      out_.graph.Add(reader, chain[pos + 1].txn, EdgeKind::kRw, op);
      return;
    }
    // The last placed version: every unobserved write installs a later one.
    const bool partner = partners_.contains(Pair(key, reader));
    for (const auto& [t, i] : unobserved_[key]) {
      if (t == reader || (partner && partners_.contains(Pair(key, t)))) continue;
      out_.graph.Add(reader, t, EdgeKind::kRw, op);
    }
  }

  void AddFinding(Anomaly anomaly, uint32_t reader, uint32_t op, const WriteRef& w) {
    AddFinding(anomaly, reader, op, w.txn, w.op);
  }
  // An INT finding: read `op` of `reader` contradicts its own operation `own_op`.
  void AddOwnFinding(verdict::ReadFault fault, uint32_t reader, uint32_t op, uint32_t own_op) {
    if (AddFinding(Anomaly::kInt, reader, op, kNoPos, own_op)) out_.findings.back().fault = fault;
  }
  // Whether `reader` wrote `key` before the operation being judged.
  bool WroteBefore(uint32_t key) const { return own_stamp_[key] == stamp_; }
  // `writer` kNoPos: the finding names no other transaction.
  // False if the read's key already has a finding for this reader.
  bool AddFinding(Anomaly anomaly, uint32_t reader, uint32_t op, uint32_t writer, uint32_t write_op,
                  std::string expected = {}) {
    const uint32_t key = h_.ops(TxnId(reader))[op].key().value();
    if (!reported_.insert((static_cast<uint64_t>(reader) << 32) | key).second) return false;
    out_.findings.push_back({anomaly, TxnId(reader), writer == kNoPos ? TxnId() : TxnId(writer), op,
                             write_op, std::move(expected)});
    return true;
  }

  // A read of the version `w` names (kCommittedFinal), or the finding it is.
  void ReadWrite(uint32_t reader, uint32_t op, const WriteRef& w) {
    switch (w.cls) {
      case WriteClass::kAborted:
        AddFinding(Anomaly::kG1a, reader, op, w);
        return;
      case WriteClass::kCommittedIntermediate:
        AddFinding(Anomaly::kG1b, reader, op, w);
        return;
      case WriteClass::kUnknown:
        ++out_.counts.unknown_reads;
        return;
      case WriteClass::kCommittedFinal:
        break;
    }
    ++out_.counts.reads;
    out_.graph.Add(w.txn, reader, EdgeKind::kWr, op);
    if (w.pos != kNoPos) {
      AddAntiDependency(reader, op, h_.ops(TxnId(reader))[op].key().value(), w.pos);
    }
  }

  void ReadRegister(uint32_t reader, uint32_t op_index, const Op& op) {
    const uint32_t k = op.key().value();
    const Value v = op.value();
    const bool initial =
        (v.absent() && h_.AbsentReadsInitial(op.key())) || v == h_.InitialValue(op.key());
    auto it = index_.find(VersionKey{k, v});
    const std::optional<uint32_t> last_own =
        WroteBefore(k) ? std::optional<uint32_t>(own_last_[k]) : std::nullopt;
    if (it != index_.end() && it->second.txn == reader) {
      if (const auto fault = axioms::JudgeOwnWrite(op_index, it->second.op, last_own)) {
        AddOwnFinding(fault->fault, reader, op_index, fault->own_op);
      }
      ++out_.counts.own_reads;
      return;
    }
    // After writing the key, the transaction reads its own last write and nothing else; a value
    // nobody (or only an aborted transaction) wrote is reported as such below.
    if (initial || (it != index_.end() && it->second.cls != WriteClass::kAborted)) {
      if (const auto fault = axioms::JudgeOwnWrite(op_index, std::nullopt, last_own)) {
        AddOwnFinding(fault->fault, reader, op_index, fault->own_op);
      }
    }
    // The initial version, unless a committed transaction installed the same value.
    if (initial && (it == index_.end() || it->second.cls != WriteClass::kCommittedFinal)) {
      ++out_.counts.reads;
      AddAntiDependency(reader, op_index, k, -1);
      return;
    }
    if (it == index_.end()) {
      ++out_.counts.garbage_reads;
      AddFinding(Anomaly::kThinAir, reader, op_index, kNoPos, 0);
      return;
    }
    ReadWrite(reader, op_index, it->second);
  }

  const WriteRef* FindWrite(uint32_t key, Value v) const {
    auto it = index_.find(VersionKey{key, v});
    return it == index_.end() ? nullptr : &it->second;
  }

  // A list read names the version of its last element's writer, once the reader's own appends
  // (which end the list it sees) are set aside; the whole list must then equal that version.
  void ReadList(uint32_t reader, uint32_t op_index, const Op& op) {
    const uint32_t k = op.key().value();
    std::span<const Value> seen = WithoutOwnAppends(reader, k, h_.list_elements(op));
    for (const Value& e : seen) {  // an aborted element anywhere is an aborted read
      const WriteRef* w = FindWrite(k, e);
      if (w != nullptr && w->cls == WriteClass::kAborted) {
        AddFinding(Anomaly::kG1a, reader, op_index, *w);
        return;
      }
    }
    // Against the reader's own appends (docs/checkers/read-faults.md).
    if (WroteBefore(k) || seen.size() < op.list_size()) {
      if (const auto fault = axioms::JudgeOwnAppends(h_, TxnId(reader), op_index)) {
        AddOwnFinding(fault->fault, reader, op_index, fault->own_op);
      }
    }
    std::span<const Value> initial = h_.InitialList(op.key());
    if (seen.size() <= initial.size()) {
      if (std::equal(seen.begin(), seen.end(), initial.begin(), initial.end())) {
        ++out_.counts.reads;
        AddAntiDependency(reader, op_index, k, -1);
      } else {
        Incompatible(reader, op_index, seen, initial, nullptr);
      }
      return;
    }
    const WriteRef* w = FindWrite(k, seen.back());
    if (w == nullptr) {
      ++out_.counts.garbage_reads;
      AddFinding(Anomaly::kThinAir, reader, op_index, kNoPos, 0);
      return;
    }
    if (w->cls == WriteClass::kCommittedFinal && w->pos != kNoPos) {
      const std::vector<Value>& list = lists_[k];
      const uint32_t end = versions_[k][w->pos].list_end;
      if (!std::equal(seen.begin(), seen.end(), list.begin(), list.begin() + end)) {
        // Information did flow from the writer of the last element, but the list is no version
        // of the key, so what the reader missed is unknown: no anti-dependency.
        out_.graph.Add(w->txn, reader, EdgeKind::kWr, op_index);
        Incompatible(reader, op_index, seen, std::span<const Value>(list).first(end), w);
        return;
      }
    }
    ReadWrite(reader, op_index, *w);
  }

  // A list read `seen` that is no version of its key: `expected` is the version its last element
  // names (`w` its writer; nullptr: the initial list). Says why: an element nobody appended
  // (thin air), one element twice, or else an order the other reads contradict.
  void Incompatible(uint32_t reader, uint32_t op_index, std::span<const Value> seen,
                    std::span<const Value> expected, const WriteRef* w) {
    ++out_.counts.incompatible_reads;
    const uint32_t k = h_.ops(TxnId(reader))[op_index].key().value();
    std::span<const Value> initial = h_.InitialList(KeyId(k));
    absl::flat_hash_set<Value> elements;
    for (const Value& e : seen) {
      const bool initial_element = std::find(initial.begin(), initial.end(), e) != initial.end();
      if (FindWrite(k, e) == nullptr && !initial_element) {
        ++out_.counts.garbage_reads;
        AddFinding(Anomaly::kThinAir, reader, op_index, kNoPos, 0);
        return;
      }
      if (!elements.insert(e).second) {
        AddFinding(Anomaly::kDuplicateElements, reader, op_index, kNoPos, 0);
        return;
      }
    }
    // The other side: the longest read of an inferred key, or the version's writer.
    uint32_t other = kNoPos;
    uint32_t other_op = 0;
    if (black_box_[k] && longest_[k].first != kNoPos) {
      std::tie(other, other_op) = longest_[k];
      expected = lists_[k];
    } else if (w != nullptr) {
      other = w->txn;
      other_op = w->op;
    }
    AddFinding(Anomaly::kIncompatibleOrder, reader, op_index, other, other_op,
               h_.ListToString(expected));
  }

  const History& h_;
  LimitPoller* poll_;
  BuiltGraph out_;
  absl::flat_hash_map<VersionKey, WriteRef> index_;
  std::vector<uint32_t> last_op_;
  // Operation i of transaction t is op_base_[t] + i in op_pos_ (the history's own op pool need
  // not be dense: a live history keeps retired transactions' operations apart).
  std::vector<uint64_t> op_base_;
  // Per operation: the position of the version a final write installed in its key's version
  // order; kNoPos for every other operation.
  std::vector<uint32_t> op_pos_;
  std::vector<std::vector<Version>> versions_;
  std::vector<std::vector<Value>> lists_;
  std::vector<uint8_t> list_started_;
  // Per key: whether some committed writer of it has no commit timestamp (InferOrders).
  std::vector<uint8_t> black_box_;
  // Per inferred key: committed final writes (transaction, op) that follow every placed version
  // in an order nobody saw: a list's appends no read shows; every writer of an undetermined
  // register (the initial version is the only one placed).
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> unobserved_;
  // Per inferred list key: the read (transaction, op) that gave its order; kNoPos if none.
  std::vector<std::pair<uint32_t, uint32_t>> longest_;
  // (key, transaction) pairs of writers that read a key's last placed version (the initial one
  // of an undetermined register) and overwrote it with a version no read places: two of them
  // lost an update (BuiltGraph::lost_updates), and get no rw edge to each other.
  absl::flat_hash_set<uint64_t> partners_;
  static uint64_t Pair(uint32_t key, uint32_t txn) { return (uint64_t{key} << 32) | txn; }
  absl::flat_hash_set<uint64_t> reported_;  // (reader, key) with a finding
  // Per key: whether the transaction being judged wrote it before the current operation
  // (own_stamp_ == stamp_), and its last write to it so far.
  std::vector<uint32_t> own_stamp_;
  std::vector<uint32_t> own_last_;
  uint32_t stamp_ = 0;
};

}  // namespace

BuiltGraph BuildGraph(const History& h, LimitPoller* poll) { return Builder(h, poll).Run(); }

}  // namespace isowatch::checkers::adya::internal
