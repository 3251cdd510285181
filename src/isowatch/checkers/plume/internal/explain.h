// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "isowatch/checkers/plume/internal/model.h"
#include "isowatch/common/strong_id.h"
#include "isowatch/history/history.h"
#include "isowatch/history/operation.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::checkers::plume {

// How findings read (docs/checkers/plume.md, "Reports"). Stateless functions of the history.

// "T5" for a numeric source id 5, the id itself otherwise; "the initial state" for kInit.
std::string Name(const history::History& h, const Model& m, uint32_t node);
std::string Name(const history::History& h, TxnId id);

// "TAP-h (non-monotonic read)".
std::string Title(verdict::Anomaly tap);

// What a read returned: "key x = 1", or for a list "key x = [1, 2]" (long lists shortened).
std::string ReadText(const history::History& h, const history::Op& read);

// The value node u last wrote to `key` ("?" if none), for "T2 also wrote x = 2".
std::string LastWrite(const history::History& h, const Model& m, uint32_t u, KeyId key);

// "; read committed, read atomic and causal consistency forbid it" for the levels in `bits`.
std::string LevelClause(uint8_t bits);

}  // namespace isowatch::checkers::plume
