// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "isowatch/checkers/plugin.h"
#include "isowatch/checkers/polygraph/internal/model.h"
#include "isowatch/checkers/polygraph/internal/search.h"

namespace isowatch::checkers::polygraph {

// Hot keys (docs/checkers/polygraph.md, "Hot keys"): the constraints between the chains of a
// Model::lazy key are added only where a candidate order needs them.
//
// Given the acyclic choice `first_chosen` (SearchResult::first_chosen) of `m`'s constraints,
// orders each lazy key's chains as a topological order of the known and chosen edges places
// their heads, and adds the edges that order implies between neighbouring chains. Where those
// close a cycle, the constraint of every pair of neighbours whose edges lie in a strongly
// connected component is added to `m`. Returns how many were added: 0 when the candidate order
// closes no cycle, so that the choice with it is a witness that the graph can be acyclic.
// Stops early (returning what it added) when `limits` expire.
size_t AddNeededPairs(const std::vector<uint8_t>& first_chosen, const SearchOptions& o,
                      const CheckLimits* limits, Model& m);

}  // namespace isowatch::checkers::polygraph
