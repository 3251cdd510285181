// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/plume/internal/model.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include <fmt/format.h>

#include "isowatch/axioms/own_appends.h"
#include "isowatch/checkers/plume/internal/explain.h"

namespace isowatch::checkers::plume {
namespace {

using history::History;
using history::KeyValue;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;
using verdict::Anomaly;
using verdict::IsolationLevel;
using verdict::Violation;

constexpr uint32_t kNone = UINT32_MAX;
constexpr std::string_view kChecker = "plume";

// One write of a (key, value): by whom, where, and whether it was the writer's last of the key.
struct WriteRef {
  TxnId txn;
  uint32_t pos = 0;
  bool final = false;
  bool duplicate = false;  // another write of the same (key, value) exists
};

// Who wrote what a read returned.
struct Source {
  enum Kind : uint8_t { kNode, kInitial, kAborted, kThinAir, kAmbiguous } kind = kThinAir;
  uint32_t node = kNone;
  uint32_t pos = 0;
  bool final = true;
  TxnId aborted;
};

// The shared name of a TAP judged inside one read (verdict::ReadFault); kNone for the others.
verdict::ReadFault ReadFaultOf(Anomaly tap) {
  switch (tap) {
    case Anomaly::kTapA:
      return verdict::ReadFault::kThinAir;
    case Anomaly::kTapB:
      return verdict::ReadFault::kAborted;
    case Anomaly::kTapC:
      return verdict::ReadFault::kFuture;
    case Anomaly::kTapD:
      return verdict::ReadFault::kNotOwnWrite;
    case Anomaly::kTapE:
      return verdict::ReadFault::kNotLastWrite;
    case Anomaly::kTapF:
      return verdict::ReadFault::kIntermediate;
    default:
      return verdict::ReadFault::kNone;
  }
}

class Builder {
 public:
  Builder(const History& h, uint8_t levels, LimitPoller& poll, std::vector<Violation>* out)
      : h_(h), levels_(levels), poll_(poll), out_(out) {}

  Model Build() {
    IndexWrites();
    Judge();
    MakeNodes();
    m_.ext_begin.reserve(m_.size() + 1);
    for (uint32_t u = 0; u < m_.size(); ++u) {
      if (poll_.Expired()) return std::move(m_);
      Scan(u);
    }
    m_.ext_begin.push_back(static_cast<uint32_t>(m_.ext.size()));
    for (auto& [key, nodes] : m_.writers) {
      std::sort(nodes.begin(), nodes.end(), [&](uint32_t a, uint32_t b) {
        return std::pair(m_.session[a], m_.position[a]) < std::pair(m_.session[b], m_.position[b]);
      });
    }
    BuildWr();
    CheckLists();
    return std::move(m_);
  }

 private:
  uint32_t NodeOf(TxnId id) const {
    const uint64_t i = id.value() - h_.first_txn();
    return i < node_of_.size() ? node_of_[i] : kNone;
  }

  // Every write of every transaction not aborted (committed, or of unknown outcome), and the
  // aborted ones apart.
  void IndexWrites() {
    absl::flat_hash_map<KeyId, uint32_t> last;
    for (size_t i = 0; i < h_.txns().size(); ++i) {
      const TxnId id(h_.first_txn() + i);
      const Transaction& t = h_.txns()[i];
      std::span<const Op> ops = h_.ops(t);
      last.clear();
      for (uint32_t p = 0; p < ops.size(); ++p) {
        const Op& op = ops[p];
        if (!op.is_write()) continue;
        const KeyValue kv{op.key(), op.value()};
        if (t.status == TxnStatus::kAborted) {
          aborted_.try_emplace(kv, id);
          continue;
        }
        auto [it, fresh] = writes_.try_emplace(kv, WriteRef{.txn = id, .pos = p});
        if (!fresh && !it->second.duplicate) {
          it->second.duplicate = true;
          ++m_.duplicate_writes;
        }
        last[op.key()] = p;
      }
      for (const auto& [key, p] : last) {
        auto it = writes_.find(KeyValue{key, ops[p].value()});
        if (it->second.txn == id && it->second.pos == p) it->second.final = true;
      }
    }
  }

  // The transactions judged: the committed ones, and those of unknown outcome that a judged
  // transaction read from (they must have committed).
  void Judge() {
    judged_.assign(h_.txns().size(), 0);
    std::vector<uint64_t> queue;
    for (size_t i = 0; i < judged_.size(); ++i) {
      if (h_.txns()[i].committed()) {
        judged_[i] = 1;
        queue.push_back(i);
      }
    }
    auto observe = [&](KeyId key, Value v) {
      auto it = writes_.find(KeyValue{key, v});
      if (it == writes_.end() || it->second.duplicate) return;
      const uint64_t w = it->second.txn.value() - h_.first_txn();
      if (judged_[w] != 0) return;
      judged_[w] = 1;
      ++m_.unknown_committed;
      queue.push_back(w);
    };
    while (!queue.empty()) {
      const uint64_t i = queue.back();
      queue.pop_back();
      for (const Op& op : h_.ops(h_.txns()[i])) {
        if (op.unknown()) continue;
        if (op.kind() == OpKind::kRead) observe(op.key(), op.value());
        if (op.kind() == OpKind::kListRead) {
          for (Value e : h_.list_elements(op)) observe(op.key(), e);
        }
      }
    }
    for (size_t i = 0; i < judged_.size(); ++i) {
      if (judged_[i] == 0 && h_.txns()[i].status == TxnStatus::kUnknown) ++m_.unknown_dropped;
    }
  }

  void MakeNodes() {
    node_of_.assign(h_.txns().size(), kNone);
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> by_session(h_.session_count());
    for (size_t i = 0; i < h_.txns().size(); ++i) {
      if (judged_[i] == 0) continue;
      const auto u = static_cast<uint32_t>(m_.txn.size());
      node_of_[i] = u;
      const Transaction& t = h_.txns()[i];
      m_.txn.emplace_back(h_.first_txn() + i);
      m_.session.push_back(t.session.value());
      m_.position.push_back(0);
      by_session[t.session.value()].emplace_back(t.seq, u);
    }
    m_.session_nodes.resize(by_session.size());
    for (size_t s = 0; s < by_session.size(); ++s) {
      std::sort(by_session[s].begin(), by_session[s].end());
      for (const auto& [seq, u] : by_session[s]) {
        m_.session_nodes[s].push_back(u);
        m_.position[u] = static_cast<uint32_t>(m_.session_nodes[s].size());
      }
    }
  }

  bool InitialListHolds(KeyId key, Value v) const {
    std::span<const Value> init = h_.InitialList(key);
    return std::find(init.begin(), init.end(), v) != init.end();
  }

  // Who wrote `v` to `key`. `list`: v is an element of a list read.
  Source Resolve(KeyId key, Value v, bool list) const {
    const bool initial = list ? InitialListHolds(key, v) : v == h_.InitialValue(key);
    auto it = writes_.find(KeyValue{key, v});
    if (it != writes_.end()) {
      if (it->second.duplicate || initial) return {.kind = Source::kAmbiguous};
      const uint32_t u = NodeOf(it->second.txn);
      if (u == kNone) return {.kind = Source::kAmbiguous};
      return {.kind = Source::kNode, .node = u, .pos = it->second.pos, .final = it->second.final};
    }
    if (initial) return {.kind = Source::kInitial, .node = kInit};
    if (auto a = aborted_.find(KeyValue{key, v}); a != aborted_.end()) {
      return {.kind = Source::kAborted, .aborted = a->second};
    }
    return {.kind = Source::kThinAir};
  }

  void Report(Anomaly tap, std::vector<TxnId> txns, KeyId key, std::string observed,
              std::string sentence, uint8_t forbidding) {
    Violation v;
    v.checker = std::string(kChecker);
    v.anomaly = tap;
    v.read_fault = ReadFaultOf(tap);
    if (!SetLevels(forbidding & levels_, &v)) return;
    v.txns = std::move(txns);
    v.key = key;
    v.observed = std::move(observed);
    v.explanation =
        fmt::format("{}: {}{}.", Title(tap), sentence, LevelClause(forbidding & levels_));
    out_->push_back(std::move(v));
  }

  // A read no judged transaction wrote: TAP-a or TAP-b.
  void ReportUnwritten(uint32_t u, const Op& read, Value v, const Source& s) {
    const std::string who = Name(h_, m_, u);
    const std::string val = h_.ValueToString(v);
    const std::string key = h_.KeyToString(read.key());
    if (s.kind == Source::kAborted) {
      Report(Anomaly::kTapB, {m_.txn[u], s.aborted}, read.key(), val,
             fmt::format("{} read {}, and {} was written to key {} only by {}, which aborted", who,
                         ReadText(h_, read), val, key, Name(h_, s.aborted)),
             Forbidding(Anomaly::kTapB));
    } else {
      Report(Anomaly::kTapA, {m_.txn[u]}, read.key(), val,
             fmt::format("{} read {}, and no transaction wrote {} to key {}, nor is it the key's "
                         "initial value",
                         who, ReadText(h_, read), val, key),
             Forbidding(Anomaly::kTapA));
    }
  }

  // The source of list read `op` (its last element), after judging every element.
  Source ResolveList(uint32_t u, uint32_t p, const Op& op) {
    std::span<const Value> list = h_.list_elements(op);
    seen_.clear();
    bool twice = false;
    bool unwritten = false;
    for (Value e : list) {
      if (!seen_.insert(e).second && !twice) {
        Report(Anomaly::kDuplicateElements, {m_.txn[u]}, op.key(), h_.ValueToString(e),
               fmt::format("{} read {}, which holds {} twice, though it was appended once",
                           Name(h_, m_, u), ReadText(h_, op), h_.ValueToString(e)),
               kRc | kRa | kTcc);
        twice = true;
      }
      Source s = Resolve(op.key(), e, true);
      if ((s.kind == Source::kAborted || s.kind == Source::kThinAir) && !unwritten) {
        ReportUnwritten(u, op, e, s);
        unwritten = true;
      }
    }
    list_reads_.emplace_back(u, p);
    auto [it, fresh] = longest_.try_emplace(op.key(), u, p);
    if (!fresh && h_.ops(m_.txn[it->second.first])[it->second.second].list_size() < list.size()) {
      it->second = {u, p};
    }
    if (list.empty()) return {.kind = Source::kInitial, .node = kInit};
    return Resolve(op.key(), list.back(), true);
  }

  void Scan(uint32_t u) {
    m_.ext_begin.push_back(static_cast<uint32_t>(m_.ext.size()));
    std::span<const Op> ops = h_.ops(m_.txn[u]);
    own_.clear();
    const std::string who = Name(h_, m_, u);
    for (uint32_t p = 0; p < ops.size(); ++p) {
      const Op& op = ops[p];
      if (op.is_write()) {
        own_[op.key()] = p;
        if (op.kind() == OpKind::kAppend) appends_.push_back({op.key(), op.value(), u});
        continue;
      }
      if (op.unknown()) {
        ++m_.unobserved_reads;
        continue;
      }
      Source s;
      if (op.kind() == OpKind::kListRead) {
        s = ResolveList(u, p, op);
        if (s.kind == Source::kAborted || s.kind == Source::kThinAir) continue;  // reported
      } else {
        s = Resolve(op.key(), op.value(), false);
        if (s.kind == Source::kAborted || s.kind == Source::kThinAir) {
          ReportUnwritten(u, op, op.value(), s);
          continue;
        }
      }
      if (s.kind == Source::kAmbiguous) {
        ++m_.ambiguous_reads;
        continue;
      }
      const KeyId key = op.key();
      const std::string text = ReadText(h_, op);
      auto own = own_.find(key);
      const std::optional<uint32_t> last_own =
          own == own_.end() ? std::nullopt : std::optional<uint32_t>(own->second);
      const std::optional<axioms::IntRead> fault = axioms::JudgeOwnWrite(
          p, s.node == u ? std::optional<uint32_t>(s.pos) : std::nullopt, last_own);
      const verdict::ReadFault named = fault ? fault->fault : verdict::ReadFault::kNone;
      if (named == verdict::ReadFault::kFuture) {
        Report(Anomaly::kTapC, {m_.txn[u]}, key, text,
               fmt::format("{} read {}, a value it wrote itself only later, at operation {}", who,
                           text, fault->own_op + 1),
               Forbidding(Anomaly::kTapC));
      } else if (named == verdict::ReadFault::kNotLastWrite) {
        Report(Anomaly::kTapE, {m_.txn[u]}, key, text,
               fmt::format("{} read {}, its own write at operation {}, though it had since "
                           "written {} at operation {}",
                           who, text, s.pos + 1, h_.ValueToString(ops[fault->own_op].value()),
                           fault->own_op + 1),
               Forbidding(Anomaly::kTapE));
      }
      if (s.node == u) continue;
      const std::string writer = Name(h_, m_, s.node);
      if (named == verdict::ReadFault::kNotOwnWrite) {
        std::vector<TxnId> txns = {m_.txn[u]};
        if (s.node != kInit) txns.push_back(m_.txn[s.node]);
        Report(Anomaly::kTapD, std::move(txns), key, text,
               fmt::format("{} read {} from {} after writing {} itself at operation {}", who, text,
                           writer, h_.ValueToString(ops[fault->own_op].value()), fault->own_op + 1),
               Forbidding(Anomaly::kTapD));
      }
      if (s.node != kInit && !s.final) {
        Report(Anomaly::kTapF, {m_.txn[u], m_.txn[s.node]}, key, text,
               fmt::format("{} read {}, which {} wrote and then overwrote with {} before it "
                           "committed",
                           who, text, writer, LastWrite(h_, m_, s.node, key)),
               Forbidding(Anomaly::kTapF));
      }
      m_.ext.push_back({.key = key, .writer = s.node, .pos = p, .writer_pos = s.pos});
    }
    CheckRepeatable(u);
    for (const auto& [key, p] : own_) m_.writers[key].push_back(u);
  }

  // TAP-j: two reads of one key, from two other transactions.
  void CheckRepeatable(uint32_t u) {
    first_.clear();
    std::span<const ExtRead> reads(m_.ext.data() + m_.ext_begin[u],
                                   m_.ext.size() - m_.ext_begin[u]);
    std::span<const Op> ops = h_.ops(m_.txn[u]);
    for (uint32_t i = 0; i < reads.size(); ++i) {
      auto [it, fresh] = first_.try_emplace(reads[i].key, i);
      if (fresh || it->second == kNone || reads[it->second].writer == reads[i].writer) continue;
      const ExtRead& a = reads[it->second];
      const ExtRead& b = reads[i];
      it->second = kNone;  // once per key
      std::vector<TxnId> txns = {m_.txn[u]};
      for (uint32_t w : {a.writer, b.writer}) {
        if (w != kInit) txns.push_back(m_.txn[w]);
      }
      Report(Anomaly::kTapJ, std::move(txns), b.key, ReadText(h_, ops[b.pos]),
             fmt::format("{} read {} from {} at operation {} and then {} from {} at operation {}",
                         Name(h_, m_, u), ReadText(h_, ops[a.pos]), Name(h_, m_, a.writer),
                         a.pos + 1, ReadText(h_, ops[b.pos]), Name(h_, m_, b.writer), b.pos + 1),
             Forbidding(Anomaly::kTapJ));
    }
  }

  void BuildWr() {
    m_.wr_begin.reserve(m_.size() + 1);
    for (uint32_t u = 0; u < m_.size(); ++u) {
      m_.wr_begin.push_back(static_cast<uint32_t>(m_.wr_pred.size()));
      const size_t from = m_.wr_pred.size();
      for (const ExtRead& r : m_.ExtReads(u)) {
        if (r.writer != kInit) m_.wr_pred.push_back(r.writer);
      }
      std::sort(m_.wr_pred.begin() + static_cast<ptrdiff_t>(from), m_.wr_pred.end());
      m_.wr_pred.erase(
          std::unique(m_.wr_pred.begin() + static_cast<ptrdiff_t>(from), m_.wr_pred.end()),
          m_.wr_pred.end());
    }
    m_.wr_begin.push_back(static_cast<uint32_t>(m_.wr_pred.size()));
  }

  // Every list read must be a prefix of its key's longest; the longest gives the version order.
  void CheckLists() {
    for (const auto& [u, p] : list_reads_) {
      const Op& op = h_.ops(m_.txn[u])[p];
      const auto [lu, lp] = longest_.at(op.key());
      const Op& longest = h_.ops(m_.txn[lu])[lp];
      std::span<const Value> mine = h_.list_elements(op);
      std::span<const Value> all = h_.list_elements(longest);
      if (std::equal(mine.begin(), mine.end(), all.begin())) continue;
      Report(
          Anomaly::kIncompatibleOrder, {m_.txn[u], m_.txn[lu]}, op.key(), ReadText(h_, op),
          fmt::format("{} read {}, which is no prefix of {}'s read {}, so no order of the "
                      "appends explains both",
                      Name(h_, m_, u), ReadText(h_, op), Name(h_, m_, lu), ReadText(h_, longest)),
          kRc | kRa | kTcc);
    }
    // Per key, the writer of the longest read's last element (kNone: no element has one).
    absl::flat_hash_map<KeyId, uint32_t> last;
    for (const auto& [key, at] : longest_) {
      uint32_t prev = kNone;
      for (Value e : h_.list_elements(h_.ops(m_.txn[at.first])[at.second])) {
        const Source s = Resolve(key, e, true);
        if (s.kind != Source::kNode) continue;
        if (prev != kNone && prev != s.node) m_.ww.push_back({prev, s.node, key});
        prev = s.node;
      }
      last[key] = prev;
    }
    // An append no read shows comes after everything the longest read shows: a read returns
    // the whole list, so an append before its last element would be in it.
    for (const Append& a : appends_) {
      auto it = last.find(a.key);
      if (it == last.end() || it->second == kNone || it->second == a.node) continue;
      const auto [lu, lp] = longest_.at(a.key);
      std::span<const Value> all = h_.list_elements(h_.ops(m_.txn[lu])[lp]);
      if (std::find(all.begin(), all.end(), a.value) == all.end()) {
        m_.ww.push_back({it->second, a.node, a.key});
      }
    }
  }

  const History& h_;
  uint8_t levels_;
  LimitPoller& poll_;
  std::vector<Violation>* out_;
  Model m_;
  absl::flat_hash_map<KeyValue, WriteRef> writes_;
  absl::flat_hash_map<KeyValue, TxnId> aborted_;
  std::vector<uint8_t> judged_;    // by index from first_txn
  std::vector<uint32_t> node_of_;  // by index from first_txn
  // Per transaction scanned: the last own write of each key so far, the first external read of
  // each key, the elements of one list read.
  absl::flat_hash_map<KeyId, uint32_t> own_;
  absl::flat_hash_map<KeyId, uint32_t> first_;
  absl::flat_hash_set<Value> seen_;
  // Appends of the judged transactions.
  struct Append {
    KeyId key;
    Value value;
    uint32_t node;
  };
  std::vector<Append> appends_;
  // List reads (node, operation), and per key the longest.
  std::vector<std::pair<uint32_t, uint32_t>> list_reads_;
  absl::flat_hash_map<KeyId, std::pair<uint32_t, uint32_t>> longest_;
};

}  // namespace

bool Model::Writes(uint32_t u, KeyId key) const {
  auto it = writers.find(key);
  if (it == writers.end()) return false;
  const auto at = std::pair(session[u], position[u]);
  auto found = std::lower_bound(it->second.begin(), it->second.end(), at,
                                [&](uint32_t w, const std::pair<uint32_t, uint32_t>& x) {
                                  return std::pair(session[w], position[w]) < x;
                                });
  return found != it->second.end() && *found == u;
}

uint32_t Model::LastWriterUpTo(KeyId key, uint32_t s, uint32_t max_position) const {
  auto it = writers.find(key);
  if (it == writers.end()) return kInit;
  const auto at = std::pair(s, max_position);
  auto after = std::upper_bound(it->second.begin(), it->second.end(), at,
                                [&](const std::pair<uint32_t, uint32_t>& x, uint32_t w) {
                                  return x < std::pair(session[w], position[w]);
                                });
  if (after == it->second.begin()) return kInit;
  const uint32_t w = *std::prev(after);
  return session[w] == s ? w : kInit;
}

Model BuildModel(const History& h, uint8_t levels, LimitPoller& poll, std::vector<Violation>* out) {
  return Builder(h, levels, poll, out).Build();
}

uint8_t LevelBit(IsolationLevel level) {
  switch (level) {
    case IsolationLevel::kReadCommitted:
      return kRc;
    case IsolationLevel::kReadAtomic:
      return kRa;
    case IsolationLevel::kCausal:
      return kTcc;
    default:
      return 0;
  }
}

uint8_t Forbidding(Anomaly tap) {
  switch (tap) {
    case Anomaly::kTapJ:
    case Anomaly::kTapK:
    case Anomaly::kTapL:
      return kRa | kTcc;
    case Anomaly::kTapM:
    case Anomaly::kTapN:
      return kTcc;
    default:
      return kRc | kRa | kTcc;
  }
}

bool SetLevels(uint8_t bits, Violation* v) {
  v->levels.clear();
  if ((bits & kRc) != 0) v->levels.push_back(IsolationLevel::kReadCommitted);
  if ((bits & kRa) != 0) v->levels.push_back(IsolationLevel::kReadAtomic);
  if ((bits & kTcc) != 0) v->levels.push_back(IsolationLevel::kCausal);
  if (v->levels.empty()) return false;
  v->level = v->levels.front();
  return true;
}

}  // namespace isowatch::checkers::plume
