// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/internal/explain.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace isowatch::checkers::polygraph {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Value;
using verdict::Anomaly;

// The transaction's last write of `key`.
std::optional<Value> LastWrite(const History& h, TxnId id, KeyId key) {
  std::optional<Value> out;
  for (const Op& op : h.ops(id)) {
    if (op.kind() == OpKind::kWrite && op.key() == key) out = op.value();
  }
  return out;
}

// The value the transaction read of `key` before writing it, if it did.
std::optional<Value> FirstRead(const History& h, TxnId id, KeyId key) {
  for (const Op& op : h.ops(id)) {
    if (op.key() != key) continue;
    if (op.kind() == OpKind::kWrite) return std::nullopt;
    if (op.kind() == OpKind::kRead && !op.unknown()) return op.value();
  }
  return std::nullopt;
}

std::string Shown(const History& h, std::optional<Value> v) {
  return v.has_value() ? h.ValueToString(*v) : std::string("?");
}

// "-wr(x=1)->", "-rw(x: read 0, overwritten by 2)->", "-ww(x: 1 then 2)->", "-so->", "-rt->".
std::string Arrow(const History& h, const Model& m, const TxnEdge& e) {
  const TxnId from = m.txns[e.from];
  const TxnId to = m.txns[e.to];
  switch (e.kind) {
    case EdgeKind::kWr:
      return fmt::format("-wr({}={})->", h.KeyToString(e.key), Shown(h, LastWrite(h, from, e.key)));
    case EdgeKind::kWw:
      return fmt::format("-ww({}: {} then {})->", h.KeyToString(e.key),
                         Shown(h, LastWrite(h, from, e.key)), Shown(h, LastWrite(h, to, e.key)));
    case EdgeKind::kRw:
      return fmt::format("-rw({}: read {}, overwritten by {})->", h.KeyToString(e.key),
                         Shown(h, FirstRead(h, from, e.key)), Shown(h, LastWrite(h, to, e.key)));
    case EdgeKind::kSession:
      return "-so->";
    case EdgeKind::kRealTime:
      return "-rt->";
  }
  return "->";
}

std::string Walk(const History& h, const Model& m, const Cycle& c) {
  std::string out = h.TxnLabel(m.txns[EdgeAt(m, c.labels.front()).from]);
  for (uint32_t label : c.labels) {
    const TxnEdge& e = EdgeAt(m, label);
    out += fmt::format(" {} {}", Arrow(h, m, e), h.TxnLabel(m.txns[e.to]));
  }
  return out;
}

struct Kind {
  Anomaly anomaly;
  verdict::CycleKind cycle;
  const char* name;
};

Kind Classify(const Model& m, const Cycle& c, Mode mode) {
  using verdict::CycleKind;
  size_t rw = 0;
  size_t wr = 0;
  size_t ww = 0;
  for (uint32_t label : c.labels) {
    const EdgeKind k = EdgeAt(m, label).kind;
    rw += k == EdgeKind::kRw ? 1 : 0;
    wr += k == EdgeKind::kWr ? 1 : 0;
    ww += k == EdgeKind::kWw ? 1 : 0;
  }
  const bool pair = c.labels.size() == 2;
  if (rw == 0) {
    if (wr == 0 && ww > 0) return {Anomaly::kG0, CycleKind::kWriteCycle, "G0 (write cycle)"};
    if (wr + ww == 0) {
      return {Anomaly::kSession, CycleKind::kOrderCycle, "a session or real-time order cycle"};
    }
    return {Anomaly::kG1c, CycleKind::kCircularFlow, "G1c (circular information flow)"};
  }
  if (rw == 1) {
    const Anomaly a = mode == Mode::kSerializable ? Anomaly::kGSingle : Anomaly::kGSIb;
    if (pair && ww == 1) return {a, CycleKind::kLostUpdate, "lost update"};
    if (pair && wr == 1) return {a, CycleKind::kReadSkew, "read skew"};
    if (mode == Mode::kSerializable) return {a, CycleKind::kReadSkew, "G-single (read skew)"};
    return {a, CycleKind::kMissedEffect, "G-SIb (a missed effect)"};
  }
  if (mode == Mode::kSerializable) {
    if (pair && rw == 2) return {Anomaly::kG2Item, CycleKind::kWriteSkew, "write skew"};
    return {Anomaly::kG2Item, CycleKind::kAntiDependencyCycle, "G2-item (anti-dependency cycle)"};
  }
  return {Anomaly::kG2Item, CycleKind::kLongFork, "long fork"};
}

// "the order of x's writers T1 and T2".
std::string Choice(const History& h, const Model& m, uint32_t c) {
  const Constraint& con = m.constraints[c];
  return fmt::format("{} and {} on {}", h.TxnLabel(m.txns[con.first_head]),
                     h.TxnLabel(m.txns[con.second_head]), h.KeyToString(con.key));
}

}  // namespace

verdict::Violation Explain(const History& h, const Model& m, const Refutation& r, Mode mode) {
  const Cycle& shortest = r.cycles.front();
  const Kind kind = Classify(m, shortest, mode);
  verdict::Violation v;
  v.anomaly = kind.anomaly;
  v.cycle_kind = kind.cycle;
  for (uint32_t label : shortest.labels) v.txns.push_back(m.txns[EdgeAt(m, label).from]);
  for (uint32_t label : shortest.labels) {
    if (EdgeAt(m, label).key.valid()) {
      v.key = EdgeAt(m, label).key;
      break;
    }
  }
  bool session = false;
  bool real_time = false;
  for (uint32_t label : shortest.labels) {
    session = session || EdgeAt(m, label).kind == EdgeKind::kSession;
    real_time = real_time || EdgeAt(m, label).kind == EdgeKind::kRealTime;
  }
  std::string name = kind.name;
  if (session || real_time) {
    name += fmt::format(" against {}", session && real_time ? "session order and real time"
                                       : session            ? "session order"
                                                            : "real time");
  }
  std::string text;
  if (r.constraints.empty()) {
    text = fmt::format("{}: the dependencies form a cycle: {}", name, Walk(h, m, shortest));
  } else {
    std::vector<std::string> choices;
    for (uint32_t c : r.constraints) choices.push_back(Choice(h, m, c));
    text = fmt::format(
        "{}: whichever way the writes of {} are ordered, a cycle closes ({} cycles cover every "
        "choice); the shortest: {}",
        name, fmt::join(choices, "; "), r.cycles.size(), Walk(h, m, shortest));
    for (size_t i = 1; i < r.cycles.size() && i < 4; ++i) {
      text += fmt::format("; {}", Walk(h, m, r.cycles[i]));
    }
    if (r.cycles.size() > 4) text += fmt::format("; and {} more", r.cycles.size() - 4);
  }
  if (!r.forced.empty()) {
    std::vector<std::string> forced;
    for (uint32_t c : r.forced) forced.push_back(Choice(h, m, c));
    text += fmt::format(" (the order of {} is forced: the other order closes a cycle)",
                        fmt::join(forced, "; "));
  }
  if (mode == Mode::kSnapshot) {
    text +=
        " (snapshot isolation: wr, ww and so mean the first committed before the second "
        "began; rw that the first began before the second committed)";
  }
  v.explanation = std::move(text);
  return v;
}

}  // namespace isowatch::checkers::polygraph
