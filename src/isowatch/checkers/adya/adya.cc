// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/adya/adya.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include <fmt/format.h>

#include "isowatch/axioms/explain.h"
#include "isowatch/checkers/adya/cycle_search.h"
#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/adya/internal/explain.h"
#include "isowatch/checkers/adya/internal/graph_builder.h"

namespace isowatch::checkers::adya {

namespace {

using history::History;
using history::Op;
using history::Transaction;
using verdict::Anomaly;
using verdict::IsolationLevel;
using verdict::Violation;

// The levels in the order findings list them.
constexpr std::array<IsolationLevel, 4> kCanonicalOrder = {
    IsolationLevel::kReadCommitted, IsolationLevel::kRepeatableRead,
    IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable};

using LevelSet = uint8_t;
constexpr LevelSet Bit(IsolationLevel level) {
  return static_cast<LevelSet>(1u << static_cast<int>(level));
}
constexpr LevelSet kRc = Bit(IsolationLevel::kReadCommitted);
constexpr LevelSet kRr = Bit(IsolationLevel::kRepeatableRead);
constexpr LevelSet kSi = Bit(IsolationLevel::kSnapshotIsolation);
constexpr LevelSet kSer = Bit(IsolationLevel::kSerializable);

// The levels that proscribe each phenomenon (Adya 1999; docs/checkers/adya.md).
LevelSet Proscribing(Anomaly anomaly) {
  switch (anomaly) {
    case Anomaly::kG0:
    case Anomaly::kG1a:
    case Anomaly::kG1b:
    case Anomaly::kG1c:
      return kRc | kRr | kSi | kSer;
    case Anomaly::kGSingle:
      return kRr | kSi | kSer;
    case Anomaly::kG2Item:
      return kRr | kSer;
    case Anomaly::kGSIa:
    case Anomaly::kGSIb:
      return kSi;
    case Anomaly::kThinAir:
    case Anomaly::kIncompatibleOrder:
    case Anomaly::kDuplicateElements:
    case Anomaly::kInt:
      return kRc | kRr | kSi | kSer;
    default:
      return 0;
  }
}

Anomaly ToAnomaly(CycleClass c) {
  switch (c) {
    case CycleClass::kG0:
      return Anomaly::kG0;
    case CycleClass::kG1c:
      return Anomaly::kG1c;
    case CycleClass::kGSingle:
      return Anomaly::kGSingle;
    case CycleClass::kG2Item:
      return Anomaly::kG2Item;
  }
  return Anomaly::kG0;
}

const char* Title(Anomaly anomaly) {
  switch (anomaly) {
    case Anomaly::kG0:
      return "G0 (write cycle)";
    case Anomaly::kG1a:
      return "G1a (aborted read)";
    case Anomaly::kG1b:
      return "G1b (intermediate read)";
    case Anomaly::kG1c:
      return "G1c (circular information flow)";
    case Anomaly::kGSingle:
      return "G-single (single anti-dependency cycle)";
    case Anomaly::kG2Item:
      return "G2-item (anti-dependency cycle)";
    case Anomaly::kGSIa:
      return "G-SIa (interference)";
    case Anomaly::kGSIb:
      return "G-SIb (missed effects)";
    case Anomaly::kThinAir:
      return "Thin-air read";
    case Anomaly::kIncompatibleOrder:
      return "Incompatible order";
    case Anomaly::kDuplicateElements:
      return "Duplicate elements";
    case Anomaly::kInt:
      return "INT (a read its own transaction contradicts)";
    default:
      return verdict::AnomalyName(anomaly);
  }
}

class Checker {
 public:
  Checker(const History& h, const AdyaOptions& options)
      : h_(h), options_(options), poll_(options.limits) {
    for (IsolationLevel level : options.levels) judged_ |= Bit(level);
  }

  AdyaResult Run() && {
    if (poll_.ExpiredNow()) return Incomplete();
    internal::BuiltGraph built = internal::BuildGraph(h_, &poll_);
    if (!built.complete) return Incomplete();
    const DependencyGraph& g = built.graph;
    AdyaStats& s = result_.stats;
    s.nodes = built.counts.committed;
    s.versions = built.counts.versions;
    s.ww_edges = g.count(EdgeKind::kWw);
    s.wr_edges = g.count(EdgeKind::kWr);
    s.rw_edges = g.count(EdgeKind::kRw);
    s.unordered_writers = built.unordered_writers.size();
    s.commit_ties = built.counts.commit_ties;
    s.garbage_reads = built.counts.garbage_reads;
    s.unknown_reads = built.counts.unknown_reads;
    s.incompatible_reads = built.counts.incompatible_reads;
    s.duplicate_writes = built.counts.duplicate_writes;
    s.inferred_keys = built.counts.inferred_keys;
    s.undetermined_keys = built.counts.undetermined_keys;
    s.unobserved_appends = built.counts.unobserved_appends;
    result_.unordered_writers = std::move(built.unordered_writers);

    for (const internal::ReadFinding& f : built.findings) ReportRead(f);
    for (const internal::LostUpdate& u : built.lost_updates) ReportLostUpdate(u);
    if (judged_ & kSi) CheckSnapshotEdges(g);
    if (poll_.ExpiredNow()) return Incomplete();
    FindCycles(g);
    if (poll_.expired()) return Incomplete();
    Undecided();
    return std::move(result_);
  }

 private:
  // What the graph cannot tell: the version order of undetermined registers; at snapshot
  // isolation, whether an anti-dependency cycle between transactions without the timestamps
  // that say who saw whom is one SI allows (two adjacent anti-dependencies) or not; and what a
  // cycle search that ran out of steps could not find or rule out.
  void Undecided() {
    std::vector<std::string> parts;
    const AdyaStats& s = result_.stats;
    if (s.undetermined_keys > 0) {
      parts.push_back(fmt::format(
          "the version order of {} register key{} (written by {} transactions without commit "
          "timestamps) does not follow from the reads",
          s.undetermined_keys, s.undetermined_keys == 1 ? "" : "s",
          result_.unordered_writers.size()));
    }
    if ((judged_ & kSi) && s.unjudged_si_edges > 0 && g2_cycles_ > 0) {
      parts.push_back(fmt::format(
          "snapshot isolation allows some anti-dependency cycles, and {} component{} with one "
          "lack the start timestamps that would tell",
          g2_cycles_, g2_cycles_ == 1 ? "" : "s"));
    }
    if (unresolved_searches_ > 0) {
      parts.push_back(fmt::format(
          "{} cycle search{} ran out of steps (max_search_steps {}) before finding a cycle of {} "
          "class or ruling one out, in components of up to {} transactions",
          unresolved_searches_, unresolved_searches_ == 1 ? "" : "es", options_.max_search_steps,
          unresolved_searches_ == 1 ? "its" : "their", unresolved_largest_));
    }
    if (parts.empty()) return;
    result_.complete = false;
    result_.undecided = fmt::format("{}", fmt::join(parts, "; "));
  }

  // What a check the limits stopped returns: no verdict, only the counts so far.
  AdyaResult Incomplete() {
    result_.complete = false;
    result_.violations.clear();
    return std::move(result_);
  }

  // A violation of `anomaly` with its levels, or nullptr if it violates no judged level.
  Violation* Add(Anomaly anomaly, KeyId key) {
    const LevelSet violated = Proscribing(anomaly) & judged_;
    if (violated == 0) return nullptr;
    Violation& v = result_.violations.emplace_back();
    v.checker = "adya";
    v.anomaly = anomaly;
    v.key = key;
    if (anomaly == Anomaly::kG1a) v.read_fault = verdict::ReadFault::kAborted;
    if (anomaly == Anomaly::kG1b) v.read_fault = verdict::ReadFault::kIntermediate;
    if (anomaly == Anomaly::kThinAir) v.read_fault = verdict::ReadFault::kThinAir;
    for (IsolationLevel level : kCanonicalOrder) {
      if (violated & Bit(level)) v.levels.push_back(level);
    }
    v.level = v.levels.front();
    return &v;
  }

  std::string Violates(const Violation& v) const {
    return fmt::format("Violates {}.", internal::LevelList(v.levels));
  }

  void ReportRead(const internal::ReadFinding& f) {
    const Op& read = h_.ops(f.reader)[f.op];
    if (f.anomaly == Anomaly::kInt) {
      ReportOwnRead(f, read);
      return;
    }
    if (!f.writer.valid() || f.anomaly == Anomaly::kIncompatibleOrder) {
      ReportUnexplainedRead(f, read);
      return;
    }
    Violation* v = Add(f.anomaly, read.key());
    if (v == nullptr) return;
    v->txns = {f.reader, f.writer};
    const std::string reader = internal::TxnLabel(h_, f.reader.value());
    const std::string writer = internal::TxnLabel(h_, f.writer.value());
    const Op& write = h_.ops(f.writer)[f.write_op];
    const std::string value = h_.ValueToString(write.value());
    const std::string read_text = internal::DescribeRead(h_, read);
    v->observed = read.kind() == history::OpKind::kListRead
                      ? h_.ListToString(h_.list_elements(read))
                      : h_.ValueToString(read.value());
    std::string why;
    if (f.anomaly == Anomaly::kG1a) {
      why = h_.key(read.key()).is_list
                ? fmt::format("{} read {}, which includes {}, appended only by {}, which aborted",
                              reader, read_text, value, writer)
                : fmt::format("{} read {}, which only {} wrote, and {} aborted", reader, read_text,
                              writer, writer);
    } else {
      const std::string last = internal::LastWritten(h_, f.writer.value(), read.key());
      why = h_.key(read.key()).is_list
                ? fmt::format(
                      "{} read {}, which ends with {}'s append of {}, not its last: it "
                      "went on to append {} before committing",
                      reader, read_text, writer, value, last)
                : fmt::format(
                      "{} read {}, which {} wrote and then overwrote with {} before "
                      "committing",
                      reader, read_text, writer, last);
    }
    v->explanation = fmt::format("{}: {}. {}", Title(f.anomaly), why, Violates(*v));
  }

  // A read the reader's own operation `f.write_op` contradicts.
  void ReportOwnRead(const internal::ReadFinding& f, const Op& read) {
    Violation* v = Add(Anomaly::kInt, read.key());
    if (v == nullptr) return;
    v->read_fault = f.fault;
    v->txns = {f.reader};
    const bool list = read.kind() == history::OpKind::kListRead;
    v->observed = list ? h_.ListToString(h_.list_elements(read)) : h_.ValueToString(read.value());
    const std::string why = axioms::OwnReadSentence(
        h_, internal::TxnLabel(h_, f.reader.value()), f.reader, read.key(), v->observed, "",
        {.read_op = f.op, .fault = f.fault, .own_op = f.write_op});
    v->explanation = fmt::format("{} [{}]: {}. {}", Title(Anomaly::kInt),
                                 verdict::ReadFaultName(f.fault), why, Violates(*v));
  }

  void ReportLostUpdate(const internal::LostUpdate& u) {
    Violation* v = Add(Anomaly::kGSingle, u.key);
    if (v == nullptr) return;
    v->txns = {u.second, u.first};
    const std::string first = internal::TxnLabel(h_, u.first.value());
    const std::string second = internal::TxnLabel(h_, u.second.value());
    const Op& read = h_.ops(u.second)[u.second_read];
    const std::string base = u.base.valid() ? fmt::format("the version {} installed",
                                                          internal::TxnLabel(h_, u.base.value()))
                                            : std::string("the initial version");
    v->observed = h_.ValueToString(read.value());
    v->explanation = fmt::format(
        "{} (lost update): {} and {} both read {} ({}) and both overwrote it, with {} and {}. "
        "Whichever of their versions comes first, the other transaction missed it (an "
        "anti-dependency) and still overwrote it (a write dependency): a cycle with one "
        "anti-dependency in every version order. {}",
        Title(Anomaly::kGSingle), first, second, internal::DescribeRead(h_, read), base,
        internal::LastWritten(h_, u.first.value(), u.key),
        internal::LastWritten(h_, u.second.value(), u.key), Violates(*v));
  }

  // Thin-air, duplicate-elements and incompatible-order reads: no version order explains them.
  void ReportUnexplainedRead(const internal::ReadFinding& f, const Op& read) {
    Violation* v = Add(f.anomaly, read.key());
    if (v == nullptr) return;
    v->txns = {f.reader};
    if (f.writer.valid()) v->txns.push_back(f.writer);
    const bool list = read.kind() == history::OpKind::kListRead;
    v->observed = list ? h_.ListToString(h_.list_elements(read)) : h_.ValueToString(read.value());
    const std::string reader = internal::TxnLabel(h_, f.reader.value());
    const std::string read_text = internal::DescribeRead(h_, read);
    std::string why;
    switch (f.anomaly) {
      case Anomaly::kThinAir:
        why = fmt::format("{} read {}, {} no transaction wrote and the key did not hold before",
                          reader, read_text, list ? "which holds an element" : "a value");
        if (!list && read.value().is_int() && h_.initial().default_value.absent()) {
          why += fmt::format(" (if every key held {} before the history, give --initial-value {})",
                             h_.ValueToString(read.value()), h_.ValueToString(read.value()));
        }
        break;
      case Anomaly::kDuplicateElements:
        why = fmt::format(
            "{} read {}, which holds one element twice, though each append adds "
            "its element once",
            reader, read_text);
        break;
      default: {
        v->expected = f.expected;
        if (!f.writer.valid()) {
          why = fmt::format("{} read {}, which is no prefix of the key's initial list {}", reader,
                            read_text, f.expected);
          break;
        }
        const Op& other = h_.ops(f.writer)[f.write_op];
        const std::string who = internal::TxnLabel(h_, f.writer.value());
        why = other.is_read()
                  ? fmt::format(
                        "{} read {}, which is no prefix of {}'s read {}: the two reads "
                        "disagree on the order of the list",
                        reader, read_text, who, internal::DescribeRead(h_, other))
                  : fmt::format(
                        "{} read {}, which ends with {}'s append of {}, but the list "
                        "as of that append, in commit order, is {}",
                        reader, read_text, who, h_.ValueToString(other.value()), f.expected);
        break;
      }
    }
    v->explanation = fmt::format("{}: {}. {}", Title(f.anomaly), why, Violates(*v));
  }

  KeyId EdgeKey(const Edge& e) const {
    const uint32_t txn = e.kind == EdgeKind::kRw ? e.from : e.to;
    return h_.ops(TxnId(txn))[e.op].key();
  }

  // G-SIa: a ww or wr edge whose source had not committed when its target started. G-SIb: an rw
  // edge whose target had committed when its source started, a two-edge cycle with the start
  // dependency back. Once per pair of transactions.
  void CheckSnapshotEdges(const DependencyGraph& g) {
    absl::flat_hash_set<std::pair<uint32_t, uint32_t>> seen_a;
    absl::flat_hash_set<std::pair<uint32_t, uint32_t>> seen_b;
    for (const Edge& e : g.edges()) {
      const bool anti = e.kind == EdgeKind::kRw;
      // The transaction that must have committed, and the one whose start it is compared with.
      const TxnId committer_id(anti ? e.to : e.from);
      const TxnId starter_id(anti ? e.from : e.to);
      const Transaction& committer = h_.txn(committer_id);
      const Transaction& starter = h_.txn(starter_id);
      // "Committed in the starter's snapshot": by start timestamp, or by the starter's
      // PostgreSQL snapshot and the committer's xid (docs/checkers/adya.md).
      const history::Visibility seen = h_.Visible(committer_id, starter_id);
      if (seen == history::Visibility::kUnknown) {
        ++result_.stats.unjudged_si_edges;
        continue;
      }
      const bool in_snapshot = seen == history::Visibility::kVisible;
      if (!anti && !in_snapshot && seen_a.insert({e.from, e.to}).second) {
        ReportInterference(e, committer, starter);
      }
      if (anti && in_snapshot && seen_b.insert({e.from, e.to}).second) ReportMissedEffect(e);
    }
  }

  void ReportInterference(const Edge& e, const Transaction& committer, const Transaction& starter) {
    Violation* v = Add(Anomaly::kGSIa, EdgeKey(e));
    if (v == nullptr) return;
    v->txns = {TxnId(e.to), TxnId(e.from)};
    const std::string from = internal::TxnLabel(h_, e.from);
    const std::string to = internal::TxnLabel(h_, e.to);
    const std::string when =
        h_.has_snapshot(starter)
            ? fmt::format("{}'s snapshot {} does not see {} (xid {})", to,
                          history::FormatSnapshot(h_.snapshot(starter)), from, h_.xid(committer))
            : fmt::format("{} committed at {}, after {} started at {}", from,
                          committer.commit.ToString(), to, starter.start.ToString());
    v->explanation = fmt::format(
        "{}: {}, but {}: {} {} outside its snapshot. {}", Title(Anomaly::kGSIa),
        internal::DescribeEdge(h_, e), when, to,
        e.kind == EdgeKind::kWr ? "read a write from" : "overwrote a version from", Violates(*v));
  }

  void ReportMissedEffect(const Edge& rw) {
    Violation* v = Add(Anomaly::kGSIb, EdgeKey(rw));
    if (v == nullptr) return;
    v->txns = {TxnId(rw.from), TxnId(rw.to)};
    const Edge start{rw.to, rw.from, 0, EdgeKind::kStart};
    const Edge cycle[] = {rw, start};
    v->explanation =
        fmt::format("{}: {}. {}'s snapshot should have held {}'s write. {}", Title(Anomaly::kGSIb),
                    internal::DescribeCycle(h_, cycle), internal::TxnLabel(h_, rw.from),
                    internal::TxnLabel(h_, rw.to), Violates(*v));
  }

  void FindCycles(const DependencyGraph& g) {
    CycleSearch search(g, &poll_);
    if (poll_.expired()) return;
    const Components& comps = search.components();
    // The nodes of each component with two or more, in node order; components in the order of
    // their smallest node.
    std::vector<uint32_t> start(comps.count + 1, 0);
    std::vector<uint32_t> order;
    for (uint32_t u = 0; u < g.node_count(); ++u) {
      const uint32_t c = comps.id[u];
      if (comps.size[c] < 2) continue;
      if (start[c + 1] == 0) order.push_back(c);
      ++start[c + 1];
    }
    AdyaStats& s = result_.stats;
    s.sccs = order.size();
    s.largest_scc = g.node_count() == 0 ? 0 : 1;
    for (uint32_t c : order) s.largest_scc = std::max<size_t>(s.largest_scc, comps.size[c]);
    for (uint32_t c = 0; c < comps.count; ++c) start[c + 1] += start[c];
    std::vector<uint32_t> nodes(start.back());
    std::vector<uint32_t> next(start.begin(), start.end() - 1);
    for (uint32_t u = 0; u < g.node_count(); ++u) {
      const uint32_t c = comps.id[u];
      if (comps.size[c] >= 2) nodes[next[c]++] = u;
    }

    for (uint32_t c : order) {
      std::span<const uint32_t> members(nodes.data() + start[c], start[c + 1] - start[c]);
      bool single = false;
      for (CycleClass cls :
           {CycleClass::kG0, CycleClass::kG1c, CycleClass::kGSingle, CycleClass::kG2Item}) {
        // A G-single cycle is a G2-item cycle too, and names every level G2-item would.
        const bool report = (Proscribing(ToAnomaly(cls)) & judged_) != 0;
        // At SI without the timestamps that judge it, a G2-item cycle leaves SI undecided.
        const bool probe =
            cls == CycleClass::kG2Item && (judged_ & kSi) != 0 && s.unjudged_si_edges > 0;
        if (!report && !probe) continue;
        if (cls == CycleClass::kG2Item && single) continue;
        CycleFound found = search.Find(cls, c, members, options_.max_search_steps);
        if (poll_.expired()) return;
        if (found.truncated) ++s.truncated_searches;
        if (found.edges.empty()) {
          // Out of steps before it found a cycle of the class or ruled one out.
          if (found.truncated) {
            ++unresolved_searches_;
            unresolved_largest_ = std::max(unresolved_largest_, members.size());
          }
          continue;
        }
        if (cls == CycleClass::kGSingle) single = true;
        if (cls == CycleClass::kG2Item) ++g2_cycles_;
        if (report) ReportCycle(g, cls, found.edges);
      }
    }
  }

  void ReportCycle(const DependencyGraph& g, CycleClass cls, const std::vector<uint32_t>& ids) {
    std::vector<Edge> cycle;
    cycle.reserve(ids.size());
    for (uint32_t i : ids) cycle.push_back(g.edge(i));
    Violation* v = Add(ToAnomaly(cls), EdgeKey(cycle.front()));
    if (v == nullptr) return;
    for (const Edge& e : cycle) v->txns.push_back(TxnId(e.from));
    const std::string first = internal::TxnLabel(h_, cycle.front().from);
    const std::string second = internal::TxnLabel(h_, cycle.front().to);
    std::string why;
    switch (cls) {
      case CycleClass::kG0:
        why =
            "each transaction overwrote the one before it, round the cycle, so no order of them "
            "installs these versions";
        break;
      case CycleClass::kG1c:
        why =
            "each transaction depends on the one before it, round the cycle, so each saw the "
            "effects of one that must come after it";
        break;
      case CycleClass::kGSingle:
        why = fmt::format(
            "{} missed {}'s write (the one anti-dependency), yet depends on {} "
            "through the rest of the cycle",
            first, second, second);
        break;
      case CycleClass::kG2Item: {
        const size_t anti = std::count_if(cycle.begin(), cycle.end(), [](const Edge& e) {
          return (Mask(e.kind) & kAntiDependencyEdges) != 0;
        });
        why = fmt::format(
            "{} anti-dependencies: each of those readers missed a write of a transaction that, "
            "through the cycle, must come before it; no serial order exists",
            anti);
        break;
      }
    }
    v->explanation = fmt::format("{}: {}. Here {}. {}", Title(v->anomaly),
                                 internal::DescribeCycle(h_, cycle), why, Violates(*v));
  }

  const History& h_;
  const AdyaOptions& options_;
  LimitPoller poll_;
  LevelSet judged_ = 0;
  size_t g2_cycles_ = 0;  // components with a G2-item cycle (and no G-single one)
  // Searches that ran out of steps without a cycle, and the largest component of them.
  size_t unresolved_searches_ = 0;
  size_t unresolved_largest_ = 0;
  AdyaResult result_;
};

}  // namespace

AdyaResult CheckAdya(const History& h, const AdyaOptions& options) {
  return Checker(h, options).Run();
}

}  // namespace isowatch::checkers::adya
