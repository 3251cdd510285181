// SPDX-License-Identifier: Apache-2.0
#pragma once

// Test helper: transactions the joiner emitted, as short sorted strings to compare.

#include <algorithm>
#include <string>
#include <vector>

#include "isowatch/v1/history.pb.h"

#include "collectors/tidb/joiner.h"

namespace isowatch::tidb::testing {

// "id:STATUS@commit" of each transaction, sorted.
inline std::vector<std::string> Describe(const std::vector<v1::Transaction>& txns) {
  std::vector<std::string> out;
  for (const v1::Transaction& t : txns) {
    out.push_back(TxnIdText(t) + ":" + v1::Transaction::Status_Name(t.status()) +
                  (t.has_commit() ? "@" + std::to_string(t.commit().physical()) : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace isowatch::tidb::testing
