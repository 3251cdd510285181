// SPDX-License-Identifier: Apache-2.0
// The strongly connected components and the typed cycle search on hand-built graphs.
#include <algorithm>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/cycle_search.h"
#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/adya/scc.h"

namespace isowatch::checkers::adya {
namespace {

using ::testing::ElementsAre;

constexpr EdgeKind kWw = EdgeKind::kWw;
constexpr EdgeKind kWr = EdgeKind::kWr;
constexpr EdgeKind kRw = EdgeKind::kRw;

struct E {
  uint32_t from;
  uint32_t to;
  EdgeKind kind;
};

DependencyGraph Graph(uint32_t n, const std::vector<E>& edges) {
  DependencyGraph g(n);
  for (const E& e : edges) g.Add(e.from, e.to, e.kind, 0);
  g.Finish();
  return g;
}

// The node sets of the components with two or more nodes.
std::set<std::set<uint32_t>> Cyclic(const Components& c) {
  std::vector<std::set<uint32_t>> by_id(c.count);
  for (uint32_t u = 0; u < c.id.size(); ++u) by_id[c.id[u]].insert(u);
  std::set<std::set<uint32_t>> out;
  for (const auto& s : by_id) {
    if (s.size() >= 2) out.insert(s);
  }
  return out;
}

// "0-rw->1 1-wr->0": a found cycle, for assertions.
std::string Render(const DependencyGraph& g, const CycleFound& f) {
  std::string out;
  for (uint32_t i : f.edges) {
    const Edge& e = g.edge(i);
    if (!out.empty()) out += " ";
    out += std::to_string(e.from) + "-" + EdgeKindName(e.kind) + "->" + std::to_string(e.to);
  }
  return out;
}

// Searches component of node `member` of the whole graph for a cycle of class `c`.
CycleFound Search(const DependencyGraph& g, CycleClass c, uint32_t member,
                  uint64_t steps = 1'000'000) {
  CycleSearch search(g);
  const Components& comps = search.components();
  std::vector<uint32_t> nodes;
  for (uint32_t u = 0; u < g.node_count(); ++u) {
    if (comps.id[u] == comps.id[member]) nodes.push_back(u);
  }
  return search.Find(c, comps.id[member], nodes, steps);
}

TEST(DependencyGraphTest, DropsSelfLoopsAndSortsRowsKeepingInsertionOrder) {
  DependencyGraph g = Graph(3, {{2, 0, kWr}, {0, 1, kWw}, {1, 1, kRw}, {0, 2, kRw}});
  ASSERT_EQ(g.edge_count(), 3u);
  EXPECT_EQ(g.begin(0), 0u);
  EXPECT_EQ(g.end(0), 2u);
  EXPECT_EQ(g.edge(0).to, 1u);
  EXPECT_EQ(g.edge(1).to, 2u);
  EXPECT_EQ(g.begin(1), g.end(1));
  EXPECT_EQ(g.edge(2).from, 2u);
  EXPECT_EQ(g.count(kWw), 1u);
  EXPECT_EQ(g.count(kRw), 1u);
  EXPECT_EQ(g.count(kWr), 1u);
}

TEST(SccTest, FindsComponentsAndOrdersThemReverseTopologically) {
  // 0 <-> 1 -> 2 -> 3 -> 4 -> 2, 5 alone, 6 -> 0.
  DependencyGraph g = Graph(
      7,
      {{0, 1, kWw}, {1, 0, kWr}, {1, 2, kWw}, {2, 3, kWw}, {3, 4, kWr}, {4, 2, kRw}, {6, 0, kWw}});
  Components c = FindComponents(g, kAllEdges);
  EXPECT_EQ(c.count, 4u);
  EXPECT_EQ(Cyclic(c), (std::set<std::set<uint32_t>>{{0, 1}, {2, 3, 4}}));
  EXPECT_EQ(c.size[c.id[2]], 3u);
  // Every edge between components goes from a higher id to a lower one.
  for (const Edge& e : g.edges()) {
    if (c.id[e.from] != c.id[e.to]) {
      EXPECT_GT(c.id[e.from], c.id[e.to]);
    }
  }
}

TEST(SccTest, RespectsTheEdgeMask) {
  DependencyGraph g = Graph(3, {{0, 1, kWw}, {1, 0, kRw}, {1, 2, kWr}, {2, 1, kWr}});
  EXPECT_EQ(Cyclic(FindComponents(g, kAllEdges)), (std::set<std::set<uint32_t>>{{0, 1, 2}}));
  EXPECT_EQ(Cyclic(FindComponents(g, kDependencyEdges)), (std::set<std::set<uint32_t>>{{1, 2}}));
  EXPECT_TRUE(Cyclic(FindComponents(g, Mask(kWw))).empty());
}

TEST(SccTest, LongPathAndLongCycleNeedNoRecursion) {
  // A million-node path closed into one cycle: a recursive Tarjan would overflow the stack.
  constexpr uint32_t kN = 1'000'000;
  DependencyGraph g(kN);
  for (uint32_t u = 0; u + 1 < kN; ++u) g.Add(u, u + 1, kWw, 0);
  g.Finish();
  Components path = FindComponents(g, kAllEdges);
  EXPECT_EQ(path.count, kN);

  DependencyGraph ring(kN);
  for (uint32_t u = 0; u < kN; ++u) ring.Add(u, (u + 1) % kN, kWw, 0);
  ring.Finish();
  Components one = FindComponents(ring, kAllEdges);
  EXPECT_EQ(one.count, 1u);
  EXPECT_EQ(one.size[0], kN);
}

TEST(CycleSearchTest, G0IsAWriteOnlyCycle) {
  DependencyGraph g = Graph(3, {{0, 1, kWw}, {1, 2, kWw}, {2, 0, kWw}, {1, 0, kWr}});
  EXPECT_EQ(Render(g, Search(g, CycleClass::kG0, 0)), "0-ww->1 1-ww->2 2-ww->0");
  // The read dependency closes a shorter cycle, which is G1c, not G0.
  EXPECT_EQ(Render(g, Search(g, CycleClass::kG1c, 0)), "1-wr->0 0-ww->1");
}

TEST(CycleSearchTest, NoG0WithoutAWriteOnlyCycle) {
  DependencyGraph g = Graph(2, {{0, 1, kWw}, {1, 0, kWr}});
  EXPECT_TRUE(Search(g, CycleClass::kG0, 0).edges.empty());
  EXPECT_TRUE(Search(g, CycleClass::kGSingle, 0).edges.empty());
  EXPECT_TRUE(Search(g, CycleClass::kG2Item, 0).edges.empty());
  EXPECT_EQ(Render(g, Search(g, CycleClass::kG1c, 0)), "1-wr->0 0-ww->1");
}

TEST(CycleSearchTest, GSingleHasExactlyOneAntiDependency) {
  // 0 -rw-> 1 -wr-> 0 is G-single; 2 -rw-> 3 -rw-> 2 (write skew) is not.
  DependencyGraph g = Graph(4, {{0, 1, kRw}, {1, 0, kWr}, {2, 3, kRw}, {3, 2, kRw}});
  EXPECT_EQ(Render(g, Search(g, CycleClass::kGSingle, 0)), "0-rw->1 1-wr->0");
  EXPECT_TRUE(Search(g, CycleClass::kGSingle, 2).edges.empty());
  EXPECT_EQ(Render(g, Search(g, CycleClass::kG2Item, 2)), "2-rw->3 3-rw->2");
  EXPECT_TRUE(Search(g, CycleClass::kG1c, 2).edges.empty());
}

TEST(CycleSearchTest, GSingleAcrossDependencyComponents) {
  // The dependency path 1 -> 2 -> 3 -> 0 crosses four dependency components; 4 hangs off the
  // cycle through a second anti-dependency and must not be needed.
  DependencyGraph g =
      Graph(5, {{0, 1, kRw}, {1, 2, kWw}, {2, 3, kWr}, {3, 0, kWw}, {3, 4, kRw}, {4, 3, kRw}});
  EXPECT_EQ(Render(g, Search(g, CycleClass::kGSingle, 0)), "0-rw->1 1-ww->2 2-wr->3 3-ww->0");
}

TEST(CycleSearchTest, ReportsTheShortestCycleOfTheComponent) {
  // Two G-single cycles in one component: through 0 (length 4) and through 4 (length 2).
  DependencyGraph g = Graph(6, {{0, 1, kRw},
                                {1, 2, kWr},
                                {2, 3, kWr},
                                {3, 0, kWr},
                                {3, 4, kWw},
                                {4, 5, kRw},
                                {5, 4, kWr},
                                {5, 3, kWw}});
  CycleFound f = Search(g, CycleClass::kGSingle, 0);
  EXPECT_EQ(Render(g, f), "4-rw->5 5-wr->4");
  EXPECT_FALSE(f.truncated);
}

TEST(CycleSearchTest, G2ItemCountsEveryCycleThroughAnAntiDependency) {
  // 0 -rw-> 1 -rw-> 2 -wr-> 0: two anti-dependencies, a G2-item cycle and no G-single.
  DependencyGraph g = Graph(3, {{0, 1, kRw}, {1, 2, kRw}, {2, 0, kWr}});
  EXPECT_TRUE(Search(g, CycleClass::kGSingle, 0).edges.empty());
  EXPECT_EQ(Render(g, Search(g, CycleClass::kG2Item, 0)), "0-rw->1 1-rw->2 2-wr->0");
}

TEST(CycleSearchTest, StopsAtTheStepBudget) {
  // A long G-single cycle: with a budget of three edges the search gives up and says so.
  constexpr uint32_t kN = 50;
  std::vector<E> edges = {{0, 1, kRw}};
  for (uint32_t u = 1; u < kN; ++u) edges.push_back({u, (u + 1) % kN, kWr});
  DependencyGraph g = Graph(kN, edges);
  CycleFound cut = Search(g, CycleClass::kGSingle, 0, 3);
  EXPECT_TRUE(cut.truncated);
  EXPECT_TRUE(cut.edges.empty());
  CycleFound full = Search(g, CycleClass::kGSingle, 0);
  EXPECT_FALSE(full.truncated);
  EXPECT_EQ(full.edges.size(), kN);
}

}  // namespace
}  // namespace isowatch::checkers::adya
