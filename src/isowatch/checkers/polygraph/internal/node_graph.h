// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "isowatch/checkers/adya/dependency_graph.h"
#include "isowatch/checkers/polygraph/internal/model.h"
#include "isowatch/checkers/polygraph/internal/search.h"

namespace isowatch::checkers::polygraph {

// The graph the search works on: a node per transaction for serializability, a begin and a
// commit node (2t, 2t + 1) for snapshot isolation (docs/checkers/polygraph.md, "The polygraph").

inline constexpr uint32_t kNoNodeLabel = std::numeric_limits<uint32_t>::max();
// The label of a begin -> commit edge of one transaction (it names no model edge).
inline constexpr uint32_t kProgram = kNoNodeLabel - 1;

// An edge of the searched graph, labelled with the model edge it stands for (Cycle).
struct NodeEdge {
  uint32_t from = 0;
  uint32_t to = 0;
  uint32_t label = 0;
};

// The searched graph's edge for model edge `e`, labelled `label`: under snapshot isolation wr,
// ww and session edges run commit to begin, rw edges begin to commit, real-time edges commit to
// begin (`real_time_to_begin`) or commit to commit.
NodeEdge MapEdge(const TxnEdge& e, uint32_t label, const SearchOptions& o);

// The number of nodes of `m`'s searched graph.
uint32_t NodeCount(const Model& m, Mode mode);

// Per node, where its session places it (Model::position), for TopologicalRanks.
std::vector<uint32_t> NodePriorities(const Model& m, Mode mode);

// The begin -> commit edges of every transaction under snapshot isolation; none otherwise.
void AddProgramEdges(const Model& m, Mode mode, std::vector<NodeEdge>& out);

adya::DependencyGraph Graph(uint32_t nodes, const std::vector<NodeEdge>& edges);

// A position for every node in a topological order of `g` (Kahn's algorithm), taking among the
// nodes ready at each step the one of least `priority`, so that nodes the edges leave free are
// placed as their sessions place them. REQUIRES: `g` is acyclic.
std::vector<uint32_t> TopologicalRanks(const adya::DependencyGraph& g,
                                       const std::vector<uint32_t>& priority);

}  // namespace isowatch::checkers::polygraph
