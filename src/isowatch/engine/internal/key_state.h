// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"

#include "isowatch/history/timestamp.h"
#include "isowatch/history/value.h"

namespace isowatch::engine::internal {

// A position in the replay order Chronos uses (docs/checkers/chronos.md): timestamp, then phase
// (0 = commit, 1 = a transaction whose start equals its commit, 2 = start), then transaction
// index. Under SER every position is a commit (phase 0). Version v is visible to a read at point
// p iff v.key < p.
struct OrderKey {
  history::Timestamp ts;
  uint32_t phase = 0;
  uint32_t txn = 0;

  auto operator<=>(const OrderKey&) const = default;
};

// One committed version of a key, stored under its OrderKey (commit, 0 or 1, writer).
struct VersionInfo {
  history::Timestamp start;  // the writer's start (SI)
  history::Value value;      // registers: the writer's final value; lists: unused
};

// An external read whose verdict is not final yet, stored under its read point (point.txn is the
// reader).
struct ReadInfo {
  uint32_t op_index = 0;  // the read's index among the reader's operations
  bool wrong = false;     // the current, provisional verdict
};

// An ordered map for the per-key chains: absl's B-tree with nodes of about 1 KiB. absl::btree_map
// fixes nodes at 256 bytes, four or five of these 48-56 byte entries, which makes the trees of hot
// keys deep; the wider node halves the depth and keeps a search in a few cache lines. The
// container interface is absl::btree_map's.
template <typename K, typename V>
using ChainMap = absl::container_internal::btree_map_container<
    absl::container_internal::btree<absl::container_internal::map_params<
        K, V, std::less<K>, std::allocator<std::pair<const K, V>>, /*TargetNodeSize=*/1024,
        /*IsMulti=*/false>>>;

// Everything the engine keeps about one key.
//
// Invariants:
//  1. readers holds one entry per pending external read (one per transaction and key).
//  2. If trimmed: every collected version had commit timestamp <= trim_point; for a register the
//     newest of them is still versions.begin(); for a list their appends, in order, are
//     base_list.
//  3. max_duration >= commit.physical - start.physical of every version ever inserted (SI).
struct KeyState {
  ChainMap<OrderKey, VersionInfo> versions;
  ChainMap<OrderKey, ReadInfo> readers;
  std::vector<history::Value> base_list;
  int64_t max_duration = 0;
  bool trimmed = false;
  bool in_gc = false;  // the key has an entry in the engine's collection heap
  history::Timestamp trim_point = history::Timestamp::Min();
};

}  // namespace isowatch::engine::internal
