// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace isowatch::collectors {

// What a collector remembers between runs (docs/collectors/state-file.md).
//
// A collector streams batches to isowatchd. With each batch goes a *position*: how far the
// collector's input is handled once that batch is durable in the daemon (isowatch-pg: the LSN
// handled; isowatch-tidb: the release point and the watermark). A position is a fixed list of
// numbers, one per field the collector names, each of which only moves forward.
//
// Invariants:
//  1. `durable` is covered by the daemon: every batch whose position it takes in has been
//     acknowledged as durable.
//  2. Every batch sent and not known to be durable has its entry in `in_flight`, saved before
//     the batch is sent: a restart learns from the daemon's durable seq which of them arrived.
//  3. `input` is a place to resume reading the collector's input from that loses nothing of what
//     `durable` does not cover (it may be behind: re-read input is dropped by position).
//
// A plain value.
struct CollectorState {
  std::string stream;
  uint32_t run = 0;
  std::vector<uint64_t> durable;  // one number per position field
  struct InFlight {
    uint64_t seq = 0;
    std::vector<uint64_t> position;  // `durable` takes it in once seq is durable
  };
  std::vector<InFlight> in_flight;  // by increasing seq
  // Where the input resumes, in the collector's own words (one line; empty: from the start, or
  // wherever the input itself remembers).
  std::string input;

  // Takes into `durable` (field by field, the larger number) the position of every batch in
  // flight whose seq is at most `durable_seq`, and forgets those batches. Returns how many.
  size_t ConfirmUpTo(uint64_t durable_seq);
};

// The state file `<dir>/state` of a collector whose positions have the fields `position_fields`
// (isowatch-pg: "handled"; isowatch-tidb: "released", "watermark"). Text, a line a field:
//
//   stream NAME
//   run N
//   FIELD N                       (one line per position field: the durable position)
//   input TEXT                    (only when not empty)
//   sent SEQ:N[:N...]             (one line per batch in flight, its position after the seq)
//
// Thread-compatible.
class StateFile {
 public:
  StateFile(std::string dir, std::vector<std::string> position_fields);

  // The state saved last, or nullopt when there is none. A field missing from the file reads as
  // 0. Errors: DATA_LOSS for a file that does not parse (naming the file, the line and the field)
  // or names no stream.
  absl::StatusOr<std::optional<CollectorState>> Load() const;

  // Replaces the file durably: readers see the old state or the new one, and the new one survives
  // a crash of the machine once this returns. REQUIRES: `state` has a number per position field,
  // in `durable` and in each batch in flight, and a one-line `input`.
  absl::Status Save(const CollectorState& state) const;

  const std::string& path() const { return path_; }
  size_t position_size() const { return fields_.size(); }

 private:
  std::string path_;
  std::vector<std::string> fields_;
};

}  // namespace isowatch::collectors
