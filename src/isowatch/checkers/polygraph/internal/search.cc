// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/polygraph/internal/search.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"

#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/adya/scc.h"
#include "isowatch/checkers/polygraph/internal/hot_keys.h"
#include "isowatch/checkers/polygraph/internal/node_graph.h"
#include "isowatch/checkers/polygraph/internal/sat_solver.h"
#include "isowatch/common/check.h"

namespace isowatch::checkers::polygraph {
namespace {

using adya::Components;
using adya::DependencyGraph;
using adya::FindComponents;

constexpr uint32_t kNone = kNoNodeLabel;
// Refutations kept per search: enough to show independent anomalies, few enough to read.
constexpr size_t kMaxRefutations = 8;
// Cycles looked for in one strongly connected component of one model, each a clause: at least
// this many, or a quarter of its nodes.
constexpr size_t kCyclesPerComponent = 32;
// Node visits spent, at most, pruning the constraints of each hot-key pair as they are added
// (beyond a floor): enough for the short paths that usually block a neighbouring pair.
constexpr int64_t kPruneVisitsPerPair = 512;
// Constraint states.
constexpr uint8_t kOpen = 0;
constexpr uint8_t kFirst = 1;  // the first set of edges holds
constexpr uint8_t kSecond = 2;

// Constraints solved together by one SAT solver, with the cycle clauses it was given.
struct Group {
  std::vector<uint32_t> cs;    // its open constraints; constraint cs[i] is variable i + 1
  std::vector<NodeEdge> base;  // the known edges among its nodes
  std::unique_ptr<SatSolver> solver;
  std::vector<std::vector<int>> clauses;
  std::vector<Cycle> cycles;  // clauses[i] is that of cycles[i]
};

class Searcher {
 public:
  Searcher(Model& m, const SearchOptions& o) : m_(m), o_(o), poll_(o.limits, 256) {
    Extend();
    nodes_ = NodeCount(m, o.mode);
    priority_ = NodePriorities(m, o.mode);
  }

  SearchResult Run() {
    result_.stats.nodes = nodes_;
    result_.stats.constraints = m_.constraints.size();
    AddProgramEdges(m_, o_.mode, known_);
    for (uint32_t i = 0; i < m_.known.size(); ++i) known_.push_back(Map(i));
    result_.stats.known_edges = known_.size();
    if (!KnownAcyclic()) return Finish();
    if (o_.prune && !Prune()) return Finish();
    if (m_.lazy.empty()) {
      SolveComponents();
    } else {
      SolveWithHotKeys();
    }
    result_.stats.constraints = m_.constraints.size();
    return Finish();
  }

 private:
  // Sizes the per-constraint state for constraints added to the model since the last call (all
  // of them at first): open, and owners of their edges.
  void Extend() {
    const size_t had = state_.size();
    owner_.resize(m_.constraint_edges.size(), kNone);
    for (auto c = static_cast<uint32_t>(had); c < m_.constraints.size(); ++c) {
      for (uint32_t j = m_.constraints[c].begin; j < m_.constraints[c].end; ++j) owner_[j] = c;
    }
    state_.resize(m_.constraints.size(), kOpen);
    solved_first_.resize(m_.constraints.size(), 0);
    var_.resize(m_.constraints.size(), 0);
  }

  std::unique_ptr<SatSolver> NewSolver() const {
    return o_.solver == SatBackend::kCryptoMiniSat ? NewCryptoMiniSatSolver() : NewCadicalSolver();
  }
  bool IsConstraintEdge(uint32_t label) const {
    return label != kProgram && label >= m_.known.size();
  }
  uint32_t ConstraintOf(uint32_t label) const { return owner_[label - m_.known.size()]; }
  // Whether constraint-edge `label` lies in its constraint's first set.
  bool InFirst(uint32_t label) const {
    return label - m_.known.size() < m_.constraints[ConstraintOf(label)].mid;
  }

  // The searched graph's edge for model edge `label`.
  NodeEdge Map(uint32_t label) const { return MapEdge(EdgeAt(m_, label), label, o_); }

  void AddSide(const Constraint& c, bool first, std::vector<NodeEdge>& out) const {
    const uint32_t base = static_cast<uint32_t>(m_.known.size());
    const uint32_t lo = first ? c.begin : c.mid;
    const uint32_t hi = first ? c.mid : c.end;
    for (uint32_t j = lo; j < hi; ++j) out.push_back(Map(base + j));
  }

  SearchResult Finish() {
    if (!result_.refutations.empty()) {
      result_.verdict = SearchResult::Verdict::kCyclic;
    } else if (poll_.expired()) {
      result_.verdict = SearchResult::Verdict::kStopped;
    } else if (too_large_) {
      result_.verdict = SearchResult::Verdict::kTooLarge;
    } else {
      result_.first_chosen = FirstChosen();
    }
    return std::move(result_);
  }

  // Per constraint, 1 when its first set holds in the last acyclic choice.
  std::vector<uint8_t> FirstChosen() const {
    std::vector<uint8_t> out(m_.constraints.size());
    for (size_t c = 0; c < m_.constraints.size(); ++c) {
      out[c] = state_[c] == kOpen ? solved_first_[c] : state_[c] == kFirst;
    }
    return out;
  }

  // The labels of a shortest path from `from` to `to` in `g` through nodes of `comp` (the
  // component of both), or nullopt.
  std::optional<std::vector<uint32_t>> ShortestPath(const DependencyGraph& g,
                                                    const Components& comp, uint32_t from,
                                                    uint32_t to) {
    if (from == to) return std::vector<uint32_t>{};
    parent_.resize(g.node_count(), kNone);
    std::vector<uint32_t> queue = {from};
    std::vector<uint32_t> touched = {from};
    parent_[from] = kProgram;
    bool found = false;
    for (size_t i = 0; i < queue.size() && !found; ++i) {
      const uint32_t u = queue[i];
      bfs_work_ += g.end(u) - g.begin(u) + 1;
      for (uint32_t j = g.begin(u); j < g.end(u); ++j) {
        const uint32_t v = g.edge(j).to;
        if (parent_[v] != kNone || comp.id[v] != comp.id[from]) continue;
        parent_[v] = j;
        touched.push_back(v);
        if (v == to) {
          found = true;
          break;
        }
        queue.push_back(v);
      }
    }
    std::optional<std::vector<uint32_t>> path;
    if (found) path.emplace();
    EndSearch(g, from, to, touched, found ? &*path : nullptr);
    return path;
  }

  // Ends a search from `from` that marked `touched` in parent_: stores the labels of the path
  // it found to `to` in *path (if not null), and clears the marks.
  void EndSearch(const DependencyGraph& g, uint32_t from, uint32_t to,
                 const std::vector<uint32_t>& touched, std::vector<uint32_t>* path) {
    if (path != nullptr) {
      path->clear();
      for (uint32_t v = to; v != from; v = g.edge(parent_[v]).from) {
        path->push_back(g.edge(parent_[v]).op);
      }
      std::reverse(path->begin(), path->end());
    }
    for (uint32_t v : touched) parent_[v] = kNone;
  }

  // The cycle of edge `e` and a shortest path back from its head, without begin -> commit edges.
  std::optional<Cycle> CycleThrough(const DependencyGraph& g, const Components& comp,
                                    const adya::Edge& e) {
    std::optional<std::vector<uint32_t>> back = ShortestPath(g, comp, e.to, e.from);
    if (!back.has_value()) return std::nullopt;
    Cycle c;
    if (e.op != kProgram) c.labels.push_back(e.op);
    for (uint32_t label : *back) {
      if (label != kProgram) c.labels.push_back(label);
    }
    return c;
  }

  // The constraints fixed before solving that `cycles` go through.
  std::vector<uint32_t> Fixed(const std::vector<Cycle>& cycles) const {
    std::vector<uint32_t> out;
    for (const Cycle& c : cycles) {
      for (uint32_t label : c.labels) {
        if (IsConstraintEdge(label) && state_[ConstraintOf(label)] != kOpen) {
          out.push_back(ConstraintOf(label));
        }
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // Whether the known edges (with those fixed so far) are acyclic; if not, a refutation per
  // strongly connected component (a shortest cycle through one of its edges each).
  bool KnownAcyclic() {
    const DependencyGraph g = Graph(nodes_, known_);
    const Components comp = FindComponents(g, adya::kAllEdges, &poll_);
    if (poll_.expired()) return false;
    std::vector<uint8_t> reported(comp.count, 0);
    for (const adya::Edge& e : g.edges()) {
      const uint32_t c = comp.id[e.from];
      if (c != comp.id[e.to] || reported[c] != 0) continue;
      if (result_.refutations.size() >= kMaxRefutations) break;
      reported[c] = 1;
      std::optional<Cycle> best;
      // Of a small component, the shortest of the cycles through each edge.
      size_t tried = 0;
      for (const adya::Edge& f : g.edges()) {
        if (comp.id[f.from] != c || comp.id[f.to] != c || ++tried > 64) continue;
        std::optional<Cycle> cycle = CycleThrough(g, comp, f);
        if (cycle.has_value() && (!best || cycle->labels.size() < best->labels.size())) {
          best = std::move(cycle);
        }
      }
      if (!ISOWATCH_BUG(best.has_value(), "a strongly connected component has no cycle")) {
        continue;
      }
      Refutation r;
      r.cycles.push_back(*std::move(best));
      r.forced = Fixed(r.cycles);
      result_.refutations.push_back(std::move(r));
    }
    return result_.refutations.empty();
  }

  // Whether `to` is reachable from `from` in the acyclic `g` whose topological ranks are `rank`;
  // sets *path to the labels of a path when it is. Spends at most *budget node visits.
  bool Reaches(const DependencyGraph& g, const std::vector<uint32_t>& rank, uint32_t from,
               uint32_t to, std::vector<uint32_t>* path, int64_t* budget) {
    if (from == to) {
      path->clear();
      return true;
    }
    if (rank[from] > rank[to]) return false;
    parent_.resize(g.node_count(), kNone);
    std::vector<uint32_t> stack = {from};
    std::vector<uint32_t> touched = {from};
    parent_[from] = kProgram;
    bool found = false;
    while (!stack.empty() && !found && *budget > 0) {
      const uint32_t u = stack.back();
      stack.pop_back();
      --*budget;
      for (uint32_t j = g.begin(u); j < g.end(u); ++j) {
        const uint32_t v = g.edge(j).to;
        if (parent_[v] != kNone || rank[v] > rank[to]) continue;
        parent_[v] = j;
        touched.push_back(v);
        if (v == to) {
          found = true;
          break;
        }
        stack.push_back(v);
      }
    }
    EndSearch(g, from, to, touched, found ? path : nullptr);
    return found;
  }

  // Whether some edge of constraint `c`'s chosen set closes a cycle with `g`; if so, that cycle.
  std::optional<Cycle> Blocked(const DependencyGraph& g, const std::vector<uint32_t>& rank,
                               const Constraint& c, bool first, int64_t* budget) {
    std::vector<NodeEdge> side;
    AddSide(c, first, side);
    std::vector<uint32_t> path;
    for (const NodeEdge& e : side) {
      if (!Reaches(g, rank, e.to, e.from, &path, budget)) continue;
      Cycle cycle;
      cycle.labels.push_back(e.label);
      for (uint32_t label : path) {
        if (label != kProgram) cycle.labels.push_back(label);
      }
      return cycle;
    }
    return std::nullopt;
  }

  // Fixes, round by round, every constraint one of whose sets closes a cycle with the known
  // edges (a set blocked in a graph stays blocked as edges are added, so a round decides
  // against the graph it starts with). False when a refutation was found or time ran out.
  bool Prune() {
    bool changed = true;
    while (changed) {
      changed = false;
      const DependencyGraph g = Graph(nodes_, known_);
      const std::vector<uint32_t> rank = TopologicalRanks(g, priority_);
      int64_t budget = 8 * static_cast<int64_t>(nodes_ + known_.size()) + (int64_t{1} << 20);
      std::vector<std::pair<uint32_t, uint8_t>> fixes;
      for (uint32_t c = 0; c < m_.constraints.size() && budget > 0; ++c) {
        if (state_[c] != kOpen) continue;
        if (poll_.Expired()) return false;
        const Constraint& con = m_.constraints[c];
        std::optional<Cycle> first = Blocked(g, rank, con, true, &budget);
        std::optional<Cycle> second = Blocked(g, rank, con, false, &budget);
        if (first.has_value() && second.has_value()) {
          Refute(c, *std::move(first), *std::move(second));
          if (result_.refutations.size() >= kMaxRefutations) return false;
          continue;
        }
        if (first.has_value()) fixes.emplace_back(c, kSecond);
        if (second.has_value()) fixes.emplace_back(c, kFirst);
      }
      if (!result_.refutations.empty()) return false;
      for (const auto& [c, side] : fixes) {
        state_[c] = side;
        AddSide(m_.constraints[c], side == kFirst, known_);
        ++result_.stats.forced;
        changed = true;
      }
      if (changed && !KnownAcyclic()) return false;
    }
    return true;
  }

  // Fixes the constraints one of whose sets lies on no cycle of the graph of every edge that
  // could exist, then solves each group of constraints that share a strongly connected
  // component of that graph on its own.
  void SolveComponents() {
    Components comp;
    for (int round = 0; round < 4; ++round) {
      std::vector<NodeEdge> all = known_;
      for (uint32_t c = 0; c < m_.constraints.size(); ++c) {
        if (state_[c] != kOpen) continue;
        AddSide(m_.constraints[c], true, all);
        AddSide(m_.constraints[c], false, all);
      }
      comp = FindComponents(Graph(nodes_, all), adya::kAllEdges, &poll_);
      if (poll_.expired()) return;
      bool changed = false;
      for (uint32_t c = 0; c < m_.constraints.size(); ++c) {
        if (state_[c] != kOpen) continue;
        for (bool first : {true, false}) {
          std::vector<NodeEdge> side;
          AddSide(m_.constraints[c], first, side);
          if (std::any_of(side.begin(), side.end(),
                          [&](const NodeEdge& e) { return comp.id[e.from] == comp.id[e.to]; })) {
            continue;
          }
          state_[c] = first ? kFirst : kSecond;
          known_.insert(known_.end(), side.begin(), side.end());
          ++result_.stats.free;
          changed = true;
          break;
        }
      }
      if (!changed) break;
    }
    // Groups: union-find over components, joined by the constraints inside them.
    std::vector<uint32_t> parent(comp.count);
    std::iota(parent.begin(), parent.end(), 0);
    std::function<uint32_t(uint32_t)> root = [&](uint32_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    // The component of a constraint: that of its first edge inside one; the others it touches
    // join it.
    std::vector<std::pair<uint32_t, uint32_t>> open;  // (constraint, component)
    for (uint32_t c = 0; c < m_.constraints.size(); ++c) {
      if (state_[c] != kOpen) continue;
      std::vector<NodeEdge> side;
      AddSide(m_.constraints[c], true, side);
      AddSide(m_.constraints[c], false, side);
      uint32_t first_comp = kNone;
      for (const NodeEdge& e : side) {
        if (comp.id[e.from] != comp.id[e.to]) continue;
        if (first_comp == kNone) first_comp = comp.id[e.from];
        parent[root(comp.id[e.from])] = root(first_comp);
      }
      open.emplace_back(c, first_comp);
    }
    result_.stats.solved = open.size();
    if (open.empty()) return;
    std::vector<std::vector<uint32_t>> groups(comp.count);
    for (const auto& [c, first_comp] : open) groups[root(first_comp)].push_back(c);
    const DependencyGraph known = Graph(nodes_, known_);
    rank_ = TopologicalRanks(known, priority_);
    for (uint32_t g = 0; g < comp.count; ++g) {
      if (groups[g].empty()) continue;
      ++result_.stats.components;
      Group group;
      group.solver = NewSolver();
      for (uint32_t c : groups[g]) Join(group, c);
      for (const NodeEdge& e : known_) {
        if (comp.id[e.from] == comp.id[e.to] && root(comp.id[e.from]) == g) {
          group.base.push_back(e);
        }
      }
      if (!Solve(group) || result_.refutations.size() >= kMaxRefutations) return;
    }
  }

  // With hot keys: one group of every open constraint, solved, then tested against the hot keys'
  // write orders, which may add constraints to it, until a solution needs no more.
  void SolveWithHotKeys() {
    const DependencyGraph known = Graph(nodes_, known_);
    rank_ = TopologicalRanks(known, priority_);
    Group group;
    group.solver = NewSolver();
    group.base = known_;
    for (uint32_t c = 0; c < m_.constraints.size(); ++c) {
      if (state_[c] == kOpen) Join(group, c);
    }
    result_.stats.components = 1;
    while (true) {
      result_.stats.solved = group.cs.size();
      if (!Solve(group) || !result_.refutations.empty()) return;
      const size_t had = m_.constraints.size();
      const size_t added = AddNeededPairs(FirstChosen(), o_, o_.limits, m_);
      if (poll_.ExpiredNow() || added == 0) return;
      ++result_.stats.hot_key_rounds;
      result_.stats.hot_key_pairs += added;
      if (m_.constraint_edges.size() > o_.max_constraint_edges) {
        too_large_ = true;
        return;
      }
      Extend();
      // The new constraints pruned against the known graph of before: a set blocked there is
      // blocked (the graph has only grown since), so what this fixes is forced.
      int64_t budget = kPruneVisitsPerPair * static_cast<int64_t>(added) + (int64_t{1} << 20);
      for (auto c = static_cast<uint32_t>(had); c < m_.constraints.size(); ++c) {
        const Constraint& con = m_.constraints[c];
        std::optional<Cycle> first;
        std::optional<Cycle> second;
        if (o_.prune && budget > 0) {
          first = Blocked(known, rank_, con, true, &budget);
          second = Blocked(known, rank_, con, false, &budget);
        }
        if (first.has_value() && second.has_value()) {
          Refute(c, *std::move(first), *std::move(second));
          return;
        }
        if (!first.has_value() && !second.has_value()) {
          Join(group, c);
          continue;
        }
        state_[c] = first.has_value() ? kSecond : kFirst;
        const size_t at = known_.size();
        AddSide(con, state_[c] == kFirst, known_);
        group.base.insert(group.base.end(), known_.begin() + static_cast<std::ptrdiff_t>(at),
                          known_.end());
        ++result_.stats.forced;
      }
    }
  }

  // Adds open constraint `c` to `group`'s solver as a new variable, preferring the order the
  // known edges suggest: the set more of whose edges go forward in a topological order of the
  // known graph.
  void Join(Group& group, uint32_t c) {
    group.cs.push_back(c);
    var_[c] = static_cast<int>(group.cs.size());
    group.solver->Reserve(var_[c]);
    int score = 0;
    std::vector<NodeEdge> side;
    AddSide(m_.constraints[c], true, side);
    for (const NodeEdge& e : side) score += rank_[e.from] < rank_[e.to] ? 1 : -1;
    side.clear();
    AddSide(m_.constraints[c], false, side);
    for (const NodeEdge& e : side) score -= rank_[e.from] < rank_[e.to] ? 1 : -1;
    group.solver->Prefer(score >= 0 ? var_[c] : -var_[c]);
  }

  // A refutation: both sets of constraint `c` close a cycle, `first` and `second`.
  void Refute(uint32_t c, Cycle first, Cycle second) {
    Refutation r;
    r.cycles = {std::move(first), std::move(second)};
    if (r.cycles[1].labels.size() < r.cycles[0].labels.size()) {
      std::swap(r.cycles[0], r.cycles[1]);
    }
    r.constraints = {c};
    r.forced = Fixed(r.cycles);
    result_.refutations.push_back(std::move(r));
  }

  // Solves `group` (more clauses, more variables since the last call) until its graph is
  // acyclic or no choice is; false when time ran out.
  bool Solve(Group& group);

  Model& m_;
  const SearchOptions& o_;
  LimitPoller poll_;
  uint32_t nodes_ = 0;
  std::vector<uint32_t> owner_;        // constraint edge -> constraint
  std::vector<uint8_t> state_;         // per constraint
  std::vector<uint8_t> solved_first_;  // per open constraint: its first set holds in the model
  std::vector<int> var_;               // per open constraint: its variable in its group's solver
  bool too_large_ = false;             // the hot keys needed too many constraint edges
  std::vector<NodeEdge> known_;        // known, forced and free edges
  std::vector<uint32_t> rank_;         // topological ranks of the known graph, for solver phases
  std::vector<uint32_t> priority_;     // per node, its place in its session (TopologicalRanks)
  std::vector<uint32_t> parent_;       // search scratch, all kNone between searches
  size_t bfs_work_ = 0;                // edges examined by ShortestPath since last reset
  SearchResult result_;
};

bool Searcher::Solve(Group& group) {
  // Local node numbers, so that a small group costs little in a large history.
  std::vector<uint32_t> global;
  std::vector<uint32_t> local(nodes_, kNone);
  auto local_of = [&](uint32_t u) {
    if (local[u] == kNone) {
      local[u] = static_cast<uint32_t>(global.size());
      global.push_back(u);
    }
    return local[u];
  };
  const std::vector<uint32_t>& cs = group.cs;
  const std::vector<int>& var = var_;
  SatSolver* solver = group.solver.get();
  std::vector<std::vector<int>>& clauses = group.clauses;
  std::vector<Cycle>& cycles = group.cycles;
  std::vector<NodeEdge> edges;
  const std::function<bool()> stop = [this] { return poll_.Expired(); };
  while (true) {
    ++result_.stats.solver_calls;
    const SatSolver::Outcome outcome = solver->Solve({}, stop);
    if (outcome == SatSolver::Outcome::kStopped) return false;
    if (outcome == SatSolver::Outcome::kUnsat) break;
    edges.clear();
    for (const NodeEdge& e : group.base) {
      edges.push_back({local_of(e.from), local_of(e.to), e.label});
    }
    for (uint32_t c : cs) {
      std::vector<NodeEdge> side;
      AddSide(m_.constraints[c], solver->True(var[c]), side);
      for (const NodeEdge& e : side) edges.push_back({local_of(e.from), local_of(e.to), e.label});
    }
    const DependencyGraph g = Graph(static_cast<uint32_t>(global.size()), edges);
    const Components comp = FindComponents(g, adya::kAllEdges, &poll_);
    if (poll_.expired()) return false;
    // Cycles per strongly connected component: at least one, more in a larger one, within a
    // budget of search work per model.
    std::vector<uint32_t> found(comp.count, 0);
    size_t added = 0;
    bfs_work_ = 0;
    const size_t budget = 64 * edges.size() + (size_t{1} << 20);
    for (const adya::Edge& e : g.edges()) {
      const uint32_t c = comp.id[e.from];
      if (c != comp.id[e.to] || !IsConstraintEdge(e.op)) continue;
      if (found[c] >= std::max<size_t>(kCyclesPerComponent, comp.size[c] / 4) ||
          (found[c] > 0 && bfs_work_ > budget)) {
        continue;
      }
      ++found[c];
      std::optional<Cycle> cycle = CycleThrough(g, comp, e);
      if (!cycle.has_value()) continue;
      std::vector<int> clause;
      for (uint32_t label : cycle->labels) {
        if (!IsConstraintEdge(label) || state_[ConstraintOf(label)] != kOpen) continue;
        const int v = var[ConstraintOf(label)];
        clause.push_back(InFirst(label) ? -v : v);
      }
      std::sort(clause.begin(), clause.end());
      clause.erase(std::unique(clause.begin(), clause.end()), clause.end());
      if (clause.empty()) {
        // A cycle of fixed edges alone: possible only where hot-key pairs were forced after the
        // known graph was found acyclic (SolveWithHotKeys). No choice avoids it.
        Refutation r;
        r.cycles.push_back(*std::move(cycle));
        r.forced = Fixed(r.cycles);
        result_.refutations.push_back(std::move(r));
        return true;
      }
      solver->AddClause(clause);
      clauses.push_back(std::move(clause));
      cycles.push_back(*std::move(cycle));
      ++added;
    }
    result_.stats.cycle_clauses += added;
    for (uint32_t u : global) local[u] = kNone;
    global.clear();
    if (added == 0) {  // acyclic: this group is satisfied
      for (uint32_t c : cs) solved_first_[c] = solver->True(var[c]) ? 1 : 0;
      return true;
    }
  }
  // Unsatisfiable: a small set of the cycles found that no choice avoids, by a second solve of
  // the cycle clauses alone, each behind an assumption.
  std::unique_ptr<SatSolver> core = NewSolver();
  const int selectors = static_cast<int>(cs.size());
  std::vector<int> assumptions;
  for (size_t i = 0; i < clauses.size(); ++i) {
    const int s = selectors + static_cast<int>(i) + 1;
    std::vector<int> guarded = clauses[i];
    guarded.push_back(-s);
    core->AddClause(guarded);
    assumptions.push_back(s);
  }
  if (core->Solve(assumptions, stop) != SatSolver::Outcome::kUnsat) return false;
  std::vector<int> kept;
  for (int s : assumptions) {
    if (core->Failed(s)) kept.push_back(s);
  }
  // Drops what the refutation does not need, one cycle at a time, while it stays small enough
  // to read.
  for (size_t i = 0; i < kept.size() && kept.size() <= 64;) {
    std::vector<int> without = kept;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    const SatSolver::Outcome o = core->Solve(without, stop);
    if (o == SatSolver::Outcome::kStopped) return false;
    if (o == SatSolver::Outcome::kUnsat) {
      kept.clear();
      for (int s : without) {
        if (core->Failed(s)) kept.push_back(s);
      }
      continue;
    }
    ++i;
  }
  Refutation r;
  for (int s : kept) r.cycles.push_back(cycles[static_cast<size_t>(s - selectors - 1)]);
  std::sort(r.cycles.begin(), r.cycles.end(),
            [](const Cycle& a, const Cycle& b) { return a.labels.size() < b.labels.size(); });
  for (const Cycle& c : r.cycles) {
    for (uint32_t label : c.labels) {
      if (IsConstraintEdge(label) && state_[ConstraintOf(label)] == kOpen) {
        r.constraints.push_back(ConstraintOf(label));
      }
    }
  }
  std::sort(r.constraints.begin(), r.constraints.end());
  r.constraints.erase(std::unique(r.constraints.begin(), r.constraints.end()), r.constraints.end());
  r.forced = Fixed(r.cycles);
  result_.refutations.push_back(std::move(r));
  return true;
}

}  // namespace

const TxnEdge& EdgeAt(const Model& m, uint32_t label) {
  return label < m.known.size() ? m.known[label] : m.constraint_edges[label - m.known.size()];
}

SearchResult Search(Model& m, const SearchOptions& options) { return Searcher(m, options).Run(); }

}  // namespace isowatch::checkers::polygraph
