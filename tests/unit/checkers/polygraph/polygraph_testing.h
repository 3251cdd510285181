// SPDX-License-Identifier: Apache-2.0
#pragma once

// Test helpers for the polygraph checker: which levels a result says are violated, and its
// findings in a line each for failure messages.

#include <string>

#include "isowatch/checkers/polygraph/polygraph.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::polygraph::testing {

// Whether some finding of `r` violates `level`.
bool Violates(const PolygraphResult& r, verdict::IsolationLevel level);

// The findings' explanations, a line each.
std::string Show(const PolygraphResult& r);

}  // namespace isowatch::checkers::polygraph::testing
