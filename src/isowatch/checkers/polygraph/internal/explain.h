// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "isowatch/checkers/polygraph/internal/model.h"
#include "isowatch/checkers/polygraph/internal/search.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::polygraph {

// A refutation as a finding a person can follow: the anomaly its shortest cycle is (by the
// kinds of its edges: G0, G1c, G-single or G-SIb, G2-item, and by name where one fits: lost
// update, read skew, write skew, long fork), the cycle's transactions in order, and an
// explanation that walks the cycle with its keys and values, names the unknown orders every
// choice of which closes one of the refutation's cycles, and those that pruning fixed. The
// checker name and level are left to the caller.
verdict::Violation Explain(const history::History& h, const Model& m, const Refutation& r,
                           Mode mode);

}  // namespace isowatch::checkers::polygraph
