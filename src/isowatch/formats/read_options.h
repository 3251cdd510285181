// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace isowatch::formats {

// Options shared by the history readers.
struct ReadOptions {
  // The value every register holds before the first write, unless the file (or the initial
  // transaction file) says otherwise: nullopt = absent (null). TimeKiller's --initial_value.
  std::optional<int64_t> initial_value;
  // TimeKiller only: path of the initial-transaction file (one JSON object with "ops"); empty =
  // none.
  std::string initial_txn_path;
};

}  // namespace isowatch::formats
