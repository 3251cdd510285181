// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/internal/model.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include <fmt/format.h>

#include "isowatch/axioms/own_appends.h"

namespace isowatch::checkers::polygraph {
namespace {

using history::History;
using history::KeyValue;
using history::Op;
using history::OpKind;
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

// A read of a list key, as the version it saw: the list without the reader's own appends.
struct ListRead {
  uint32_t reader = 0;
  KeyId key;
  std::vector<Value> version;
};

uint64_t Pack(KeyId key, uint32_t node) { return (uint64_t{key.value()} << 32) | node; }

class Builder {
 public:
  Builder(const History& h, const CheckLimits* limits, size_t max_constraint_edges,
          size_t lazy_chains)
      : h_(h),
        poll_(limits, 64),
        max_constraint_edges_(max_constraint_edges),
        constraint_edge_budget_(max_constraint_edges),
        lazy_chains_(lazy_chains) {}

  Model Build() && {
    IndexWrites();
    if (Stopped()) return std::move(model_);
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
    if (!Stopped()) AddListKeys();
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

  void Find(Anomaly anomaly, std::vector<TxnId> txns, KeyId key, std::string explanation,
            verdict::ReadFault fault = verdict::ReadFault::kNone) {
    Violation v;
    v.anomaly = anomaly;
    v.read_fault = fault;
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
        if (!op.is_write()) continue;
        const KeyValue kv{op.key(), op.value()};
        auto [it, fresh] = writes_.try_emplace(kv, WriteRef{id, false});
        // An element appended twice, even by one transaction, leaves a list read ambiguous.
        if (!fresh && (it->second.txn != id || op.kind() == OpKind::kAppend)) {
          ++model_.stats.duplicate_writes;
        }
        if (fresh && op.kind() == OpKind::kWrite && IsInitial(op.key(), op.value()) &&
            !op.value().absent()) {
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
      model_.position.push_back(h_.txns()[i].seq);
      if (!h_.txns()[i].committed()) ++model_.stats.unknown_committed;
      auto promote = [&](KeyId k, Value v) {
        auto it = writes_.find(KeyValue{k, v});
        if (it == writes_.end()) return;
        const uint64_t w = it->second.txn.value() - h_.first_txn();
        if (h_.txns()[w].status == TxnStatus::kUnknown && node_of_[w] == kNoNode) {
          queue.push_back(w);
        }
      };
      for (const history::RangeRead& r : h_.range_reads(id)) {
        for (const KeyValue& kv : h_.range_live(r)) promote(kv.key, kv.value);
        for (const KeyValue& kv : h_.range_dead(r)) promote(kv.key, kv.value);
      }
      for (const Op& op : h_.ops(id)) {
        if (!op.is_read() || op.unknown()) continue;
        if (op.kind() == OpKind::kRead) {
          promote(op.key(), op.value());
          continue;
        }
        for (Value e : h_.list_elements(op)) promote(op.key(), e);
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
    Scope scope;
    const size_t ext_begin = ext_.size();
    absl::flat_hash_map<KeyId, std::vector<Value>> appended;
    absl::flat_hash_map<KeyId, size_t> first_list;  // key -> index in list_reads_
    const std::span<const Op> ops = h_.ops(id);
    const std::span<const history::RangeRead> ranges = h_.range_reads(id);
    size_t next_range = 0;
    for (size_t pos = 0; pos <= ops.size(); ++pos) {
      while (next_range < ranges.size() && ranges[next_range].position == pos) {
        RangeReadOf(node, ranges[next_range++], static_cast<uint32_t>(pos), scope);
      }
      if (pos == ops.size()) break;
      const Op& op = ops[pos];
      const KeyId k = op.key();
      const uint32_t at = static_cast<uint32_t>(pos);
      if (op.kind() == OpKind::kWrite) {
        scope.own[k] = at;
      } else if (op.kind() == OpKind::kAppend) {
        appended[k].push_back(op.value());
      } else if (op.unknown()) {
        ++model_.stats.unobserved_reads;
      } else if (op.kind() == OpKind::kListRead) {
        ListReadOf(node, at, k, h_.list_elements(op), appended[k], first_list);
      } else {
        RegisterRead(node, at, k, op.value(), scope);
      }
    }
    for (size_t e = ext_begin; e < ext_.size(); ++e) {
      ext_[e].rmw = scope.own.contains(ext_[e].key);
    }
  }

  // What a transaction has written and read of registers so far: per key, the index of its last
  // write, and the first value it read.
  struct Scope {
    absl::flat_hash_map<KeyId, uint32_t> own;
    absl::flat_hash_map<KeyId, Value> first_read;
  };

  // The index of `id`'s write of `k` = `v`. REQUIRES: it wrote it.
  uint32_t OwnWriteAt(TxnId id, KeyId k, Value v) const {
    const std::span<const Op> ops = h_.ops(id);
    uint32_t j = 0;
    while (j + 1 < ops.size() &&
           !(ops[j].kind() == OpKind::kWrite && ops[j].key() == k && ops[j].value() == v)) {
      ++j;
    }
    return j;
  }

  // Reports a read of `k` = `v` by `reader` that no transaction wrote (nor is it the initial
  // value) or that only an aborted one did; false if it is neither.
  bool Unwritten(TxnId reader, KeyId k, Value v) {
    auto it = writes_.find(KeyValue{k, v});
    if (it == writes_.end()) {
      if (IsInitial(k, v)) return false;
      Find(Anomaly::kThinAir, {reader}, k,
           fmt::format("{} read {} = {}, which no transaction wrote and which is not the initial "
                       "value",
                       Name(reader), Key(k), Val(v)),
           verdict::ReadFault::kThinAir);
      return true;
    }
    const TxnId writer = it->second.txn;
    if (NodeOf(writer) != kNoNode) return false;
    Find(Anomaly::kG1a, {reader, writer}, k,
         fmt::format("{} read {} = {}, written by {}, which aborted", Name(reader), Key(k), Val(v),
                     Name(writer)),
         verdict::ReadFault::kAborted);
    return true;
  }

  // The internal checks of a read of register `k` = `v` by `node`, standing at `at` among its
  // operations; an external one goes to ext_.
  void RegisterRead(uint32_t node, uint32_t at, KeyId k, Value v, Scope& scope) {
    const TxnId id = model_.txns[node];
    auto own = scope.own.find(k);
    const std::optional<uint32_t> last_own =
        own == scope.own.end() ? std::nullopt : std::optional<uint32_t>(own->second);
    auto w = writes_.find(KeyValue{k, v});
    const std::optional<uint32_t> source = w != writes_.end() && w->second.txn == id
                                               ? std::optional<uint32_t>(OwnWriteAt(id, k, v))
                                               : std::nullopt;
    // A read of an own write, or any read after one, is internal: it says nothing of others.
    if (source.has_value() || last_own.has_value()) {
      if (!source.has_value() && Unwritten(id, k, v)) return;
      const std::optional<axioms::IntRead> fault = axioms::JudgeOwnWrite(at, source, last_own);
      if (!fault.has_value()) return;
      const Value last = last_own ? h_.ops(id)[*last_own].value() : Value();
      std::string text;
      switch (fault->fault) {
        case verdict::ReadFault::kFuture:
          text =
              fmt::format("{} read {} = {}, a value it wrote only later", Name(id), Key(k), Val(v));
          break;
        case verdict::ReadFault::kNotLastWrite:
          text = fmt::format("{} read {} = {}, its own write, though it had since written {} = {}",
                             Name(id), Key(k), Val(v), Key(k), Val(last));
          break;
        default:
          text = fmt::format("{} read {} = {} after writing {} = {} itself", Name(id), Key(k),
                             Val(v), Key(k), Val(last));
      }
      Find(Anomaly::kInt, {id}, k, std::move(text), fault->fault);
      return;
    }
    if (auto it = scope.first_read.find(k); it != scope.first_read.end()) {
      if (it->second != v) {
        Find(Anomaly::kInt, {id}, k,
             fmt::format("{} read {} twice from one snapshot and saw {} then {}", Name(id), Key(k),
                         Val(it->second), Val(v)));
      }
      return;
    }
    scope.first_read[k] = v;
    ext_.push_back({node, k, v, kNoNode, false});
  }

  // A range read (docs/checkers/polygraph.md, "Range reads"): every record it returned, live or
  // tombstoned, is a read of its key; every other register key of the history in its range was
  // absent, a read of the initial state.
  void RangeReadOf(uint32_t node, const history::RangeRead& r, uint32_t at, Scope& scope) {
    const TxnId id = model_.txns[node];
    if (sorted_keys_.empty()) {
      for (uint32_t k = 0; k < h_.key_count(); ++k) {
        if (!h_.key(KeyId(k)).is_list && !h_.key(KeyId(k)).forgotten)
          sorted_keys_.push_back(KeyId(k));
      }
      std::sort(sorted_keys_.begin(), sorted_keys_.end(),
                [&](KeyId a, KeyId b) { return KeyLess(a, b); });
    }
    auto in_range = [&](KeyId k) {
      return (r.low.unbounded || !KeyLess(k, r.low.key)) &&
             (r.high.unbounded || !KeyLess(r.high.key, k));
    };
    absl::flat_hash_set<KeyId> returned;
    for (std::span<const KeyValue> part : {h_.range_live(r), h_.range_dead(r)}) {
      for (const KeyValue& kv : part) {
        if (!in_range(kv.key)) {
          Find(Anomaly::kThinAir, {id}, kv.key,
               fmt::format("{} read {} = {} from a range that does not hold {}", Name(id),
                           Key(kv.key), Val(kv.value), Key(kv.key)));
          continue;
        }
        returned.insert(kv.key);
        RegisterRead(node, at, kv.key, kv.value, scope);
      }
    }
    auto first = r.low.unbounded
                     ? sorted_keys_.begin()
                     : std::lower_bound(sorted_keys_.begin(), sorted_keys_.end(), r.low.key,
                                        [&](KeyId a, KeyId b) { return KeyLess(a, b); });
    for (auto it = first; it != sorted_keys_.end() && in_range(*it); ++it) {
      if (!returned.contains(*it)) RegisterRead(node, at, *it, Value::Absent(), scope);
    }
  }

  // The order of keys in a range: integers by value, then byte strings by their bytes.
  bool KeyLess(KeyId a, KeyId b) const {
    const history::KeyInfo& x = h_.key(a);
    const history::KeyInfo& y = h_.key(b);
    if (x.is_int != y.is_int) return x.is_int;
    if (x.is_int) return x.payload < y.payload;
    return h_.bytes(static_cast<uint32_t>(x.payload)) < h_.bytes(static_cast<uint32_t>(y.payload));
  }

  // Finds the writer of an external read; adds its wr edge, or a finding.
  void Resolve(ExtRead r) {
    const Value v = r.value;
    const TxnId reader = model_.txns[r.reader];
    if (Unwritten(reader, r.key, v)) return;
    auto it = writes_.find(KeyValue{r.key, v});
    if (it == writes_.end()) {
      r.writer = kGenesis;
      reads_.push_back(r);
      return;
    }
    const TxnId writer = it->second.txn;
    const uint32_t w = NodeOf(writer);
    if (!it->second.final) {
      Find(Anomaly::kG1b, {reader, writer}, r.key,
           fmt::format("{} read {} = {}, which {} overwrote before it committed (an intermediate "
                       "write)",
                       Name(reader), Key(r.key), Val(v), Name(writer)),
           verdict::ReadFault::kIntermediate);
      return;
    }
    r.writer = w;
    reads_.push_back(r);
    model_.known.push_back({w, r.reader, EdgeKind::kWr, r.key});
  }

  // The internal checks of one list read `seen` of `k` by `node`, which appended `own` to `k`
  // before it; the first read of a key is external and goes to list_reads_ (its index to
  // `first`).
  void ListReadOf(uint32_t node, uint32_t at, KeyId k, std::span<const Value> seen,
                  const std::vector<Value>& own, absl::flat_hash_map<KeyId, size_t>& first) {
    const TxnId id = model_.txns[node];
    if (seen.size() < own.size() || !std::equal(own.begin(), own.end(), seen.end() - own.size())) {
      const std::optional<axioms::IntRead> fault = axioms::JudgeOwnAppends(h_, id, at);
      Find(Anomaly::kInt, {id}, k,
           fmt::format("{} read {} = {} after appending {} itself", Name(id), Key(k),
                       h_.ListToString(seen), h_.ListToString(own)),
           fault ? fault->fault : verdict::ReadFault::kNone);
      return;
    }
    const std::span<const Value> version = seen.first(seen.size() - own.size());
    if (auto it = first.find(k); it != first.end()) {
      const std::vector<Value>& before = list_reads_[it->second].version;
      if (!std::equal(before.begin(), before.end(), version.begin(), version.end())) {
        Find(Anomaly::kInt, {id}, k,
             fmt::format("{} read {} twice from one snapshot and saw {} then {}", Name(id), Key(k),
                         h_.ListToString(before), h_.ListToString(version)));
      }
      return;
    }
    for (Value e : version) {
      auto w = writes_.find(KeyValue{k, e});
      if (w != writes_.end() && w->second.txn == id) {
        Find(Anomaly::kInt, {id}, k,
             fmt::format("{} read {} = {}, with {}, which it appends only later", Name(id), Key(k),
                         h_.ListToString(seen), Val(e)),
             verdict::ReadFault::kFuture);
        return;
      }
    }
    first[k] = list_reads_.size();
    list_reads_.push_back({node, k, std::vector<Value>(version.begin(), version.end())});
  }

  // List keys (docs/checkers/polygraph.md, "List keys"): the longest read of a key gives its
  // version order, so edges between versions are known; only the order of appends no read saw
  // is left to constraints.
  void AddListKeys() {
    absl::flat_hash_map<KeyId, std::vector<size_t>> by_key;
    for (size_t i = 0; i < list_reads_.size(); ++i) by_key[list_reads_[i].key].push_back(i);
    absl::flat_hash_map<KeyId, std::vector<uint32_t>> appenders;
    for (uint32_t node = 0; node < model_.txns.size(); ++node) {
      for (const Op& op : h_.ops(model_.txns[node])) {
        if (op.kind() != OpKind::kAppend) continue;
        std::vector<uint32_t>& as = appenders[op.key()];
        if (as.empty() || as.back() != node) as.push_back(node);
      }
    }
    for (const auto& [k, as] : appenders) by_key[k];
    for (auto& [k, reads] : by_key) {
      if (Stopped()) return;
      OrderList(k, reads, appenders[k]);
    }
  }

  // What `node` appended to `k`, in program order.
  std::vector<Value> AppendsOf(uint32_t node, KeyId k) const {
    std::vector<Value> out;
    for (const Op& op : h_.ops(model_.txns[node])) {
      if (op.kind() == OpKind::kAppend && op.key() == k) out.push_back(op.value());
    }
    return out;
  }

  // One list key: its reads (indices into list_reads_) and its appenders (nodes).
  void OrderList(KeyId k, std::vector<size_t>& reads, std::vector<uint32_t> appenders) {
    std::sort(reads.begin(), reads.end(), [&](size_t a, size_t b) {
      return list_reads_[a].version.size() > list_reads_[b].version.size();
    });
    const std::span<const Value> initial = h_.InitialList(k);
    const std::vector<Value> empty;
    const std::vector<Value>& longest = reads.empty() ? empty : list_reads_[reads[0]].version;
    for (size_t r : reads) {
      const ListRead& read = list_reads_[r];
      const bool prefix = std::equal(read.version.begin(), read.version.end(), longest.begin());
      const bool from_initial = read.version.size() >= initial.size() &&
                                std::equal(initial.begin(), initial.end(), read.version.begin());
      if (!prefix || !from_initial) {
        Find(Anomaly::kIncompatibleOrder,
             {model_.txns[read.reader], model_.txns[list_reads_[reads[0]].reader]}, k,
             fmt::format("{} read {} = {}, which is no prefix of {} read by {}",
                         Name(model_.txns[read.reader]), Key(k), h_.ListToString(read.version),
                         from_initial ? h_.ListToString(longest) : h_.ListToString(initial),
                         from_initial ? Name(model_.txns[list_reads_[reads[0]].reader])
                                      : std::string("the initial state")));
        return;
      }
    }
    // The appenders in list order, each once (a run of its elements), and where each version
    // ends: versions[i] is the list length when writer i's appends end.
    std::vector<uint32_t> writers;
    std::vector<size_t> ends;
    absl::flat_hash_set<uint32_t> seen;
    const TxnId witness = reads.empty() ? TxnId() : model_.txns[list_reads_[reads[0]].reader];
    for (size_t i = initial.size(); i < longest.size(); ++i) {
      auto w = writes_.find(KeyValue{k, longest[i]});
      if (w == writes_.end()) {
        Find(Anomaly::kThinAir, {witness}, k,
             fmt::format("{} read {} = {}, with {}, which no transaction appended", Name(witness),
                         Key(k), h_.ListToString(longest), Val(longest[i])),
             verdict::ReadFault::kThinAir);
        return;
      }
      const uint32_t node = NodeOf(w->second.txn);
      if (node == kNoNode) {
        Find(Anomaly::kG1a, {witness, w->second.txn}, k,
             fmt::format("{} read {} = {}, with {}, appended by {}, which aborted", Name(witness),
                         Key(k), h_.ListToString(longest), Val(longest[i]), Name(w->second.txn)),
             verdict::ReadFault::kAborted);
        return;
      }
      // A writer's elements stand in the list as it appended them, each once.
      const bool same_run = !writers.empty() && writers.back() == node;
      const size_t at =
          same_run ? i - (ends.size() > 1 ? ends[ends.size() - 2] : initial.size()) : 0;
      const std::vector<Value> own = AppendsOf(node, k);
      if (at >= own.size() || own[at] != longest[i]) {
        const bool twice =
            std::find(longest.begin(), longest.begin() + i, longest[i]) != longest.begin() + i;
        Find(twice ? Anomaly::kDuplicateElements : Anomaly::kIncompatibleOrder,
             {witness, w->second.txn}, k,
             fmt::format("{} read {} = {}, which holds {}'s append {} {}", Name(witness), Key(k),
                         h_.ListToString(longest), Name(w->second.txn), Val(longest[i]),
                         twice ? "twice" : "out of the order it appended in"));
        return;
      }
      if (same_run) {
        ends.back() = i + 1;
        continue;
      }
      if (!seen.insert(node).second) {
        Find(Anomaly::kG1b, {witness, w->second.txn}, k,
             fmt::format("{} read {} = {}, where another transaction's append sits between "
                         "{}'s appends",
                         Name(witness), Key(k), h_.ListToString(longest), Name(w->second.txn)));
        return;
      }
      writers.push_back(node);
      ends.push_back(i + 1);
    }
    // Each read's version: the number of writers whose appends it holds.
    std::vector<std::vector<uint32_t>> readers(writers.size() + 1);
    for (size_t r : reads) {
      const ListRead& read = list_reads_[r];
      const size_t v = static_cast<size_t>(
          std::upper_bound(ends.begin(), ends.end(), read.version.size()) - ends.begin());
      const bool whole =
          v == 0 ? read.version.size() == initial.size() : ends[v - 1] == read.version.size();
      if (!whole || (v > 0 && !writes_.at(KeyValue{k, read.version.back()}).final)) {
        const TxnId writer = writes_.at(KeyValue{k, read.version.back()}).txn;
        Find(Anomaly::kG1b, {model_.txns[read.reader], writer}, k,
             fmt::format("{} read {} = {}, which ends inside {}'s appends (an intermediate "
                         "version)",
                         Name(model_.txns[read.reader]), Key(k), h_.ListToString(read.version),
                         Name(writer)),
             verdict::ReadFault::kIntermediate);
        continue;
      }
      readers[v].push_back(read.reader);
      if (v > 0) model_.known.push_back({writers[v - 1], read.reader, EdgeKind::kWr, k});
    }
    for (size_t v = 0; v < writers.size(); ++v) {
      if (v > 0) model_.known.push_back({writers[v - 1], writers[v], EdgeKind::kWw, k});
      for (uint32_t r : readers[v]) {
        if (r != writers[v]) model_.known.push_back({r, writers[v], EdgeKind::kRw, k});
      }
    }
    // Appends no read saw come after every version read, in an order only constraints give.
    std::erase_if(appenders, [&](uint32_t a) { return seen.contains(a); });
    for (uint32_t u : appenders) {
      if (!writers.empty()) model_.known.push_back({writers.back(), u, EdgeKind::kWw, k});
      for (uint32_t r : readers.back()) {
        if (r != u) model_.known.push_back({r, u, EdgeKind::kRw, k});
      }
    }
    for (size_t a = 0; a < appenders.size(); ++a) {
      for (size_t b = a + 1; b < appenders.size(); ++b) {
        Constraint c{.key = k, .first_head = appenders[a], .second_head = appenders[b]};
        c.begin = static_cast<uint32_t>(model_.constraint_edges.size());
        model_.constraint_edges.push_back({appenders[a], appenders[b], EdgeKind::kWw, k});
        c.mid = c.begin + 1;
        model_.constraint_edges.push_back({appenders[b], appenders[a], EdgeKind::kWw, k});
        c.end = c.begin + 2;
        model_.constraints.push_back(c);
      }
    }
    model_.stats.chains += writers.size() + appenders.size();
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
      KeyChains chains{.key = k};
      chains.reader_begin.push_back(0);
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
        chains.heads.push_back(head);
        chains.tails.push_back(tail);
        if (auto rs = readers.find(Pack(k, tail)); rs != readers.end()) {
          chains.readers.insert(chains.readers.end(), rs->second.begin(), rs->second.end());
        }
        chains.reader_begin.push_back(static_cast<uint32_t>(chains.readers.size()));
      }
      model_.stats.chains += chains.size();
      const size_t w = ws.size();
      model_.stats.raw_constraints += w * (w - 1) / 2 + reads * (w - 1);
      if (auto g = readers.find(Pack(k, kGenesis)); g != readers.end()) {
        model_.stats.raw_constraints += g->second.size() * (w - 1);
        for (uint32_t r : g->second) {
          for (uint32_t head : chains.heads) {
            if (r != head) model_.known.push_back({r, head, EdgeKind::kRw, k});
          }
        }
      }
      if (chains.size() > lazy_chains_) {
        ++model_.stats.lazy_keys;
        model_.lazy.push_back({.chains = std::move(chains), .added = {}});
        continue;
      }
      // The constraints' edges: each pair of chains, both orders, a ww edge and one per reader
      // of the earlier chain's tail. Past the budget the history is left undecided rather than
      // held in memory it may not have.
      const size_t per_order = chains.size() + chains.readers.size();
      constraint_edge_budget_ -= std::min(
          constraint_edge_budget_, per_order * (chains.size() - (chains.size() == 0 ? 0 : 1)));
      if (constraint_edge_budget_ == 0) {
        model_.unjudgeable = fmt::format(
            "the unknown write orders need more than {} constraint edges (hot keys with many "
            "writers: {} has {} chains of writers), more than the checker holds in memory",
            max_constraint_edges_, Key(k), chains.size());
        return;
      }
      for (uint32_t a = 0; a < chains.size(); ++a) {
        if (Stopped()) return;
        for (uint32_t b = a + 1; b < chains.size(); ++b) AddPairConstraint(chains, a, b, model_);
      }
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
    model_.findings.back().cycle_kind = verdict::CycleKind::kLostUpdate;
  }

  const History& h_;
  LimitPoller poll_;
  Model model_;
  absl::flat_hash_map<KeyValue, WriteRef> writes_;
  std::vector<uint32_t> node_of_;  // history index -> node
  std::vector<ListRead> list_reads_;
  const size_t max_constraint_edges_;
  size_t constraint_edge_budget_;
  const size_t lazy_chains_;
  std::vector<KeyId> sorted_keys_;  // register keys in range order, once a range read needs them
  std::vector<ExtRead> ext_;
  std::vector<ExtRead> reads_;  // resolved, with their writers
};

}  // namespace

Model BuildModel(const History& h, const CheckLimits* limits, size_t max_constraint_edges,
                 size_t lazy_chains) {
  return Builder(h, limits, max_constraint_edges, lazy_chains).Build();
}

}  // namespace isowatch::checkers::polygraph
