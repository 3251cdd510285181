// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/plugin.h"

#include <algorithm>

namespace isowatch::checkers {

void KeepInScope(const WindowScope* scope, CheckerResult* result) {
  if (scope == nullptr) return;
  const uint32_t first_proper = scope->first_proper;
  auto lead_in_only = [first_proper](const verdict::Violation& v) {
    return !v.txns.empty() && std::all_of(v.txns.begin(), v.txns.end(),
                                          [&](TxnId t) { return t.value() < first_proper; });
  };
  auto& violations = result->violations;
  auto kept = std::remove_if(violations.begin(), violations.end(), lead_in_only);
  result->findings_out_of_scope += static_cast<size_t>(violations.end() - kept);
  violations.erase(kept, violations.end());
}

}  // namespace isowatch::checkers
