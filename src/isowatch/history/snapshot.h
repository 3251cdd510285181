// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace isowatch::history {

// A PostgreSQL snapshot as pg_current_snapshot() prints it, `xmin:xmax:xip,...`, with 64-bit
// (epoch-extended) xids. It sees exactly the committed transactions with xid < xmin, or
// xmin <= xid < xmax and xid not in xip (docs/engine.md, "Snapshots").
struct SnapshotView {
  uint64_t xmin = 0;
  uint64_t xmax = 0;
  std::span<const uint64_t> xip;  // in [xmin, xmax); sorted and distinct once in a History

  // Whether a committed transaction with id `xid` is visible. REQUIRES: xid != 0, xip sorted.
  bool Sees(uint64_t xid) const;
};

// Why a snapshot is malformed (xmin > xmax, an xip outside [xmin, xmax)), or nullopt if it is
// well formed. The one check shared by ingest validation and the history builder.
std::optional<std::string> SnapshotDefect(uint64_t xmin, uint64_t xmax,
                                          std::span<const uint64_t> xip);

// Parses the text form `xmin:xmax:xip,xip,...` (the xip list may be empty). Errors
// (InvalidArgument): anything else, an xid that is not a decimal uint64, a malformed snapshot.
absl::Status ParseSnapshot(std::string_view text, uint64_t* xmin, uint64_t* xmax,
                           std::vector<uint64_t>* xip);

// The text form of a snapshot, as pg_current_snapshot() prints it.
std::string FormatSnapshot(const SnapshotView& s);

}  // namespace isowatch::history
