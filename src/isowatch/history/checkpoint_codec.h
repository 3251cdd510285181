// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/history/operation.h"
#include "isowatch/history/value.h"
#include "isowatch/v1/history_checkpoint.pb.h"

// The encodings of values and operations that checkpoints share (history_checkpoint.proto,
// CheckpointValues and CheckpointOps): the live history's and the window cutter's. Loading checks
// every field against the pools it indexes, so that a malformed checkpoint is refused (DataLoss,
// the message starting with `what`) rather than read out of bounds.
namespace isowatch::history::checkpoint_codec {

// CheckpointTxns.flags: a transaction's status (TxnStatus) in the two low bits, and these.
inline constexpr uint8_t kTxnHasStart = 0x04;
inline constexpr uint8_t kTxnHasCommit = 0x08;
inline constexpr uint8_t kTxnIdNumeric = 0x10;
inline constexpr uint8_t kTxnFlags = 0x1f;  // every bit in use

// Whether [begin, begin + count) lies within [0, size).
inline bool InRange(uint64_t begin, uint64_t count, uint64_t size) {
  return begin <= size && count <= size - begin;
}

void SaveValues(std::span<const Value> values, v1::CheckpointValues& out);
// Values whose byte strings are below `byte_count`.
absl::StatusOr<std::vector<Value>> LoadValues(const v1::CheckpointValues& in, size_t byte_count,
                                              std::string_view what);

// A list read is saved with its offset as the payload: the offset in whatever pool its owner
// keeps the elements in.
void SaveOps(std::span<const Op> ops, v1::CheckpointOps& out);
// Appends the operations of `in` to `out`: keys below `key_count`, byte strings below
// `byte_count`, and list reads whose elements `list_in_range(offset, size)` accepts.
absl::Status LoadOps(const v1::CheckpointOps& in, size_t key_count, size_t byte_count,
                     absl::FunctionRef<bool(uint64_t offset, uint32_t size)> list_in_range,
                     std::string_view what, std::vector<Op>& out);

}  // namespace isowatch::history::checkpoint_codec
