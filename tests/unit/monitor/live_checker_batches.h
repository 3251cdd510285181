// SPDX-License-Identifier: Apache-2.0
// What the live checker tests give LiveChecker::Apply along with each batch.
#pragma once

#include <cstdint>
#include <vector>

#include "isowatch/v1/ingest.pb.h"

namespace isowatch::monitor {

// The index of every transaction of `b`: LiveChecker::Apply is to take them all.
inline std::vector<uint32_t> All(const v1::IngestBatch& b) {
  std::vector<uint32_t> out(static_cast<size_t>(b.txns_size()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint32_t>(i);
  return out;
}

}  // namespace isowatch::monitor
