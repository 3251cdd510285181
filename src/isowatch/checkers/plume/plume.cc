// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/plume/plume.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include <fmt/format.h>

#include "isowatch/checkers/plume/internal/causal.h"
#include "isowatch/checkers/plume/internal/explain.h"
#include "isowatch/checkers/plume/internal/model.h"

namespace isowatch::checkers::plume {
namespace {

using history::History;
using history::Op;
using verdict::Anomaly;
using verdict::IsolationLevel;
using verdict::Violation;

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint32_t kPathSteps = 64;  // longest causal path walked for an explanation
constexpr size_t kShownSteps = 6;    // longer paths show their ends only

// A commit-order edge t2 -> t1 that a level's axiom forces: t3 read `key` from t1 (at operation
// px) although t2, which also wrote `key`, is before t3 (by a read of another key at py, by
// session order, or by causal order). `label` is the TAP the edge gives when t1 must also commit
// before t2; `levels` the levels whose axiom forces it.
struct Forced {
  uint32_t t1;
  uint32_t t2;
  uint32_t t3;
  KeyId key;
  uint32_t px;
  uint32_t py;  // kNone: t2 is before t3 by session or causal order only
  Anomaly label;
  uint8_t levels;
};

class Check {
 public:
  Check(const History& h, const PlumeOptions& o) : h_(h), o_(o), poll_(o.limits) {
    for (IsolationLevel l : o.levels) levels_ |= LevelBit(l);
  }

  PlumeResult Run() {
    PlumeResult r;
    // Out of time before it starts (a window checked after its deadline): no model at all.
    if (!poll_.ExpiredNow()) m_ = BuildModel(h_, levels_, poll_, &out_);
    if (!poll_.expired()) {
      co_.emplace(m_, poll_);
      if (!poll_.expired()) ReportCycles();
      if (!poll_.expired()) Triples();
      if (!poll_.expired()) CommitOrder();
      if (!poll_.expired() && !m_.ww.empty()) ListCycles();
    }
    PlumeStats& s = r.stats;
    s.nodes = m_.size();
    for (TxnId t : m_.txn) s.counted += t.value() >= o_.first_counted ? 1 : 0;
    s.sessions = m_.session_nodes.size();
    s.wr_edges = m_.wr_pred.size();
    s.ww_edges = m_.ww.size();
    s.co_components = co_.has_value() ? co_->components().count : 0;
    for (const Forced& f : forced_) {
      s.forced_rc += (f.levels & kRc) != 0 ? 1 : 0;
      s.forced_ra += (f.levels & kRa) != 0 ? 1 : 0;
      s.forced_tcc += (f.levels & kTcc) != 0 ? 1 : 0;
    }
    s.unknown_committed = m_.unknown_committed;
    s.unknown_dropped = m_.unknown_dropped;
    s.unobserved_reads = m_.unobserved_reads;
    s.ambiguous_reads = m_.ambiguous_reads;
    s.duplicate_writes = m_.duplicate_writes;
    if (poll_.ExpiredNow()) {
      r.complete = false;
      return r;
    }
    if (m_.ambiguous_reads > 0) {
      r.complete = false;
      r.undecided = fmt::format(
          "{} read{} not judged: {} a value written to its key more than once ({} such value{}), "
          "and plume needs unique written values",
          m_.ambiguous_reads, m_.ambiguous_reads == 1 ? "" : "s",
          m_.ambiguous_reads == 1 ? "it returned" : "each returned", m_.duplicate_writes,
          m_.duplicate_writes == 1 ? "" : "s");
    }
    r.violations = std::move(out_);
    verdict::SortViolations(r.violations);
    return r;
  }

 private:
  std::string N(uint32_t u) const { return Name(h_, m_, u); }
  const Op& OpAt(uint32_t u, uint32_t pos) const { return h_.ops(m_.txn[u])[pos]; }

  // " -wr(x)-> T4" for an edge into `to` tagged `tag` from `from`.
  std::string Step(uint32_t tag, uint32_t from, uint32_t to) const {
    switch (KindOf(tag)) {
      case EdgeKind::kSession:
        return fmt::format(" -so-> {}", N(to));
      case EdgeKind::kWr:
        for (const ExtRead& r : m_.ExtReads(to)) {
          if (r.writer == from) return fmt::format(" -wr({})-> {}", h_.KeyToString(r.key), N(to));
        }
        return fmt::format(" -wr-> {}", N(to));
      case EdgeKind::kWw:
        return fmt::format(" -ww({})-> {}", h_.KeyToString(m_.ww[IndexOf(tag)].key), N(to));
      case EdgeKind::kForced:
        return fmt::format(" -cm[{}]-> {}", N(forced_[IndexOf(tag)].t3), N(to));
    }
    return " -> " + N(to);
  }

  std::string PathText(uint32_t from, std::span<const std::pair<uint32_t, uint32_t>> path,
                       uint32_t to) const {
    if (path.empty() || path.back().second != to) return fmt::format("{} ... {}", N(from), N(to));
    std::string out = N(from);
    uint32_t at = from;
    for (size_t i = 0; i < path.size(); ++i) {
      const auto [tag, next] = path[i];
      if (path.size() > kShownSteps && i == kShownSteps / 2) {
        out += fmt::format(" ... ({} steps)", path.size() - kShownSteps);
      }
      if (path.size() <= kShownSteps || i < kShownSteps / 2 || i >= path.size() - 2) {
        out += Step(tag, at, next);
      }
      at = next;
    }
    return out;
  }

  // "overwrote it with 2", or for a list "appended 2 to it".
  std::string Overwrote(uint32_t u, KeyId key, std::string_view it) const {
    const std::string v = LastWrite(h_, m_, u, key);
    return h_.key(key).is_list ? fmt::format("appended {} to {}", v, it)
                               : fmt::format("overwrote {} with {}", it, v);
  }

  std::string CausalPath(uint32_t from, uint32_t to) const {
    return PathText(from, co_->Path(from, to, kPathSteps), to);
  }

  void Add(Violation v, uint8_t bits, const std::string& sentence) {
    v.checker = "plume";
    if (!SetLevels(bits & levels_, &v)) return;
    v.explanation =
        fmt::format("{}: {}{}.", Title(v.anomaly), sentence, LevelClause(bits & levels_));
    out_.push_back(std::move(v));
  }

  // TAP-g: one cycle per strongly connected component of the causal order.
  void ReportCycles() {
    const Components& c = co_->components();
    std::vector<uint8_t> done(c.count, 0);
    for (uint32_t v = 0; v < m_.size(); ++v) {
      const uint32_t comp = c.id[v];
      if (c.size[comp] < 2 || done[comp] != 0) continue;
      for (uint32_t p : m_.WrPreds(v)) {
        if (c.id[p] != comp) continue;
        done[comp] = 1;
        auto path = PathWithin(co_->graph(), c, v, p, poll_);
        Violation out;
        out.anomaly = Anomaly::kTapG;
        out.txns = {m_.txn[p], m_.txn[v]};
        for (const auto& step : path) {
          if (step.second != p) out.txns.push_back(m_.txn[step.second]);
        }
        std::string text = N(p) + Step(Tag(EdgeKind::kWr), p, v);
        text += PathText(v, path, p).substr(N(v).size());
        Add(std::move(out), Forbidding(Anomaly::kTapG),
            fmt::format("{}: session order and reads form a cycle, so each of these "
                        "transactions causally precedes itself",
                        text));
        break;
      }
    }
  }

  // The writers t2 of r.key that a level's axiom may set against t3's read r from t1: per level,
  // enough of them that every cycle they close is found.
  void Candidates(uint32_t t3, const ExtRead& r, std::vector<uint32_t>* out) const {
    out->clear();
    auto add = [&](uint32_t w) {
      if (w == kInit || w == t3 || w == r.writer) return;
      if (std::find(out->begin(), out->end(), w) == out->end()) out->push_back(w);
    };
    auto it = m_.writers.find(r.key);
    if (it == m_.writers.end()) return;
    const std::vector<uint32_t>& ws = it->second;
    if ((levels_ & kRc) != 0) {
      for (const ExtRead& y : m_.ExtReads(t3)) {
        if (y.pos >= r.pos) break;
        if (y.key != r.key && y.writer != kInit && m_.Writes(y.writer, r.key)) add(y.writer);
      }
    }
    if ((levels_ & kRa) != 0) {
      add(m_.LastWriterUpTo(r.key, m_.session[t3], m_.position[t3] - 1));
      for (uint32_t p : m_.WrPreds(t3)) {
        if (p != r.writer && m_.Writes(p, r.key)) add(p);
      }
    }
    if ((levels_ & kTcc) != 0) {
      // Per session, the last writer of the key that is causally before t3 (not t3 itself):
      // an earlier one reaches it by session order, so adds no cycle it does not. A writer
      // causally before t1 as well adds none either (its edge to t1 is in the causal order):
      // only sessions where t3 knows more than t1 can hold a candidate.
      const std::vector<uint32_t>& starts = groups_.at(r.key);
      for (size_t g = 0; g + 1 < starts.size(); ++g) {
        const auto begin = ws.begin() + starts[g];
        const auto end = ws.begin() + starts[g + 1];
        const uint32_t s = m_.session[*begin];
        const uint32_t known = co_->Known(t3, s);
        const uint32_t known_by_t1 = r.writer == kInit ? 0 : co_->Known(r.writer, s);
        if (known <= known_by_t1) continue;
        auto last =
            std::partition_point(begin, end, [&](uint32_t w) { return m_.position[w] <= known; });
        if (last != begin && *std::prev(last) == t3) --last;
        if (last != begin && m_.position[*std::prev(last)] > known_by_t1) add(*std::prev(last));
      }
    }
  }

  // Where each session's run starts in every key's writers (Model::writers), and the end.
  void GroupWriters() {
    for (const auto& [key, ws] : m_.writers) {
      std::vector<uint32_t>& starts = groups_[key];
      for (uint32_t i = 0; i < ws.size(); ++i) {
        if (i == 0 || m_.session[ws[i]] != m_.session[ws[i - 1]]) starts.push_back(i);
      }
      starts.push_back(static_cast<uint32_t>(ws.size()));
    }
  }

  void Triples() {
    if ((levels_ & kTcc) != 0) GroupWriters();
    std::vector<uint32_t> cands;
    for (uint32_t t3 = 0; t3 < m_.size(); ++t3) {
      for (const ExtRead& r : m_.ExtReads(t3)) {
        if (poll_.Expired()) return;
        Candidates(t3, r, &cands);
        for (uint32_t t2 : cands) Classify(t3, r, t2);
      }
    }
  }

  // Judges t2 against t3's read r from t1: reports it at once when t1 causally precedes t2 (the
  // CO family: TAP-h, k, m), or keeps the forced edge t2 -> t1 for the commit order (i, l, n).
  void Classify(uint32_t t3, const ExtRead& r, uint32_t t2) {
    const uint32_t t1 = r.writer;
    const bool co_family = co_->Reaches(t1, t2);
    // t2 -> t1 is then in the causal order already (unless both reach each other: a TAP-g).
    if (t1 != kInit && !co_family && co_->Reaches(t2, t1)) return;
    uint32_t mono = kNone;
    uint32_t frac = kNone;
    for (const ExtRead& y : m_.ExtReads(t3)) {
      if (y.writer != t2 || y.key == r.key) continue;
      if (y.pos < r.pos && mono == kNone) mono = y.pos;
      if (y.pos > r.pos && frac == kNone) frac = y.pos;
    }
    const bool so = m_.SessionBefore(t2, t3);
    std::span<const uint32_t> preds = m_.WrPreds(t3);
    const bool wr = std::binary_search(preds.begin(), preds.end(), t2);
    uint8_t bits = co_->Reaches(t2, t3) ? kTcc : 0;
    if (so || wr) bits |= kRa | kTcc;
    if (mono != kNone) bits |= kRc | kRa | kTcc;
    bits &= levels_;
    if (bits == 0) return;
    Anomaly label = co_family ? Anomaly::kTapM : Anomaly::kTapN;
    uint32_t py = kNone;
    if (mono != kNone) {
      label = co_family ? Anomaly::kTapH : Anomaly::kTapI;
      py = mono;
    } else if (so || frac != kNone) {
      label = co_family ? Anomaly::kTapK : Anomaly::kTapL;
      py = frac;
    }
    Forced f{t1, t2, t3, r.key, r.pos, py, label, bits};
    if (co_family) {
      const std::string before =
          t1 == kInit ? fmt::format("{} had {}", N(t2), Overwrote(t2, r.key, "its initial value"))
                      : fmt::format("{} causally precedes {} ({}), which {}", N(t1), N(t2),
                                    CausalPath(t1, t2), Overwrote(t2, r.key, "it"));
      Report(f, before, Forbidding(label));
    } else {
      forced_.push_back(f);
    }
  }

  // The finding for triple f; `before` says why t1's write precedes t2's.
  void Report(const Forced& f, const std::string& before, uint8_t bits) {
    Violation v;
    v.anomaly = f.label;
    v.txns = {m_.txn[f.t3]};
    if (f.t1 != kInit) v.txns.push_back(m_.txn[f.t1]);
    v.txns.push_back(m_.txn[f.t2]);
    v.key = f.key;
    const std::string rx = ReadText(h_, OpAt(f.t3, f.px));
    v.observed = rx;
    v.expected = fmt::format("key {} = {}", h_.KeyToString(f.key), LastWrite(h_, m_, f.t2, f.key));
    const std::string key = h_.KeyToString(f.key);
    std::string seen;
    if (f.py != kNone && f.py < f.px) {
      seen = fmt::format("{} read {} from {} and then {} from {}", N(f.t3),
                         ReadText(h_, OpAt(f.t3, f.py)), N(f.t2), rx, N(f.t1));
    } else if (f.py != kNone) {
      seen = fmt::format("{} read {} from {} and {} from {}", N(f.t3), rx, N(f.t1),
                         ReadText(h_, OpAt(f.t3, f.py)), N(f.t2));
    } else if (m_.SessionBefore(f.t2, f.t3)) {
      seen =
          fmt::format("{} read {} from {}, after {} in its session", N(f.t3), rx, N(f.t1), N(f.t2));
    } else {
      seen = fmt::format("{} read {} from {}, after {} in causal order ({})", N(f.t3), rx, N(f.t1),
                         N(f.t2), CausalPath(f.t2, f.t3));
    }
    Add(std::move(v), bits,
        fmt::format("{}, yet {}, so {} saw {}'s effects but not its write of key {}", seen, before,
                    N(f.t3), N(f.t2), key));
  }

  // Commit-order cycles, per level: the causal order, the list orders and the level's forced
  // edges; a forced edge t2 -> t1 inside a component is a TAP-i, l or n.
  void CommitOrder() {
    const auto n = static_cast<uint32_t>(m_.size());
    std::vector<Graph::Edge> base = CausalEdges(m_);
    for (uint32_t i = 0; i < m_.ww.size(); ++i) {
      base.push_back({m_.ww[i].from, m_.ww[i].to, Tag(EdgeKind::kWw, i)});
    }
    std::vector<uint8_t> found(forced_.size(), 0);
    std::vector<std::string> paths(forced_.size());
    uint32_t explained = 0;
    for (uint8_t level : {kRc, kRa, kTcc}) {
      if ((levels_ & level) == 0) continue;
      std::vector<Graph::Edge> edges = base;
      for (uint32_t i = 0; i < forced_.size(); ++i) {
        if ((forced_[i].levels & level) != 0) {
          edges.push_back({forced_[i].t2, forced_[i].t1, Tag(EdgeKind::kForced, i)});
        }
      }
      if (edges.size() == base.size()) continue;
      const Graph g = Graph::FromEdges(n, edges);
      edges = {};
      const Components c = FindComponents(g, poll_);
      if (poll_.expired()) return;
      for (uint32_t i = 0; i < forced_.size(); ++i) {
        const Forced& f = forced_[i];
        if ((f.levels & level) == 0 || c.id[f.t1] != c.id[f.t2]) continue;
        if (found[i] == 0) {
          if (explained < o_.max_explained_cycles) {
            ++explained;
            paths[i] = PathText(f.t1, PathWithin(g, c, f.t1, f.t2, poll_), f.t2);
          } else {
            paths[i] = fmt::format("{} ... {}", N(f.t1), N(f.t2));
          }
        }
        found[i] |= level;
      }
    }
    for (uint32_t i = 0; i < forced_.size(); ++i) {
      if (found[i] == 0) continue;
      const Forced& f = forced_[i];
      const std::string before =
          fmt::format("{} {}, and every commit order the level allows puts {} before {} ({})",
                      N(f.t2), Overwrote(f.t2, f.key, "it"), N(f.t1), N(f.t2), paths[i]);
      Report(f, before, found[i] & Forbidding(f.label));
    }
  }

  // List orders that contradict the causal order: a cycle of causal and list-order edges.
  void ListCycles() {
    std::vector<Graph::Edge> edges = CausalEdges(m_);
    for (uint32_t i = 0; i < m_.ww.size(); ++i) {
      edges.push_back({m_.ww[i].from, m_.ww[i].to, Tag(EdgeKind::kWw, i)});
    }
    const Graph g = Graph::FromEdges(static_cast<uint32_t>(m_.size()), edges);
    const Components c = FindComponents(g, poll_);
    if (poll_.expired()) return;
    const Components& co = co_->components();
    std::vector<uint8_t> done(c.count, 0);
    for (const Model::Ww& w : m_.ww) {
      const uint32_t comp = c.id[w.from];
      if (comp != c.id[w.to] || done[comp] != 0 || co.id[w.from] == co.id[w.to]) continue;
      done[comp] = 1;
      Violation v;
      v.anomaly = Anomaly::kIncompatibleOrder;
      v.txns = {m_.txn[w.to], m_.txn[w.from]};
      v.key = w.key;
      const std::string key = h_.KeyToString(w.key);
      Add(std::move(v), kRc | kRa | kTcc,
          fmt::format("the reads of key {} show {}'s append of {} before {}'s append of {}, yet "
                      "{} precedes {} in causal and list order ({})",
                      key, N(w.from), LastWrite(h_, m_, w.from, w.key), N(w.to),
                      LastWrite(h_, m_, w.to, w.key), N(w.to), N(w.from),
                      PathText(w.to, PathWithin(g, c, w.to, w.from, poll_), w.from)));
    }
  }

  const History& h_;
  const PlumeOptions& o_;
  LimitPoller poll_;
  uint8_t levels_ = 0;
  Model m_;
  std::optional<CausalOrder> co_;
  std::vector<Forced> forced_;
  absl::flat_hash_map<KeyId, std::vector<uint32_t>> groups_;
  std::vector<Violation> out_;
};

}  // namespace

PlumeResult CheckPlume(const History& h, const PlumeOptions& options) {
  return Check(h, options).Run();
}

}  // namespace isowatch::checkers::plume
