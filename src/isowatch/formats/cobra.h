// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {

// Cobra client logs (CobraBench, ViperBench, PolySI's converter): a directory in which every
// regular file `T*.log` is one session, a headerless stream of big-endian records S/C/W/R
// (docs/history-format.md, "Cobra logs", says what each becomes).
//
// A version is identified by its write id: a write is Write(key, Int(write_id)) and a read of it
// Read(key, Int(write_id)), so that version identity is exact; the hashed values stay out of the
// model (CobraExtras keeps them for a byte-identical re-encoding). INIT reads read the key's
// initial register, set to Int(kCobraInit); NULL reads read no value; GC fence reads are dropped
// and counted; a delete writes Int(-n) (the directory's n-th delete, n from 1: write ids are
// positive) and a read of a deleted value is an unknown read, counted.
//
// ReadOptions::dialect: "plain" (9-byte S/C records), "time-order" (17-byte S/C with a ms
// timestamp, which becomes the transaction's real-time interval) or empty (decided from the
// files; both fitting, or neither, is an error). ReadOptions::lenient drops a transaction open at
// the end of its file (with a note) instead of failing.

inline constexpr int64_t kCobraInit = 0xbebeebee;
inline constexpr int64_t kCobraNull = 0xdeadbeef;
inline constexpr int64_t kCobraDelete = 0xabcdefab;

// What a Cobra log says that the history does not hold, filled by the reader and used by the
// encoder to give back the same bytes.
struct CobraExtras {
  bool time_order = false;
  absl::flat_hash_map<int64_t, int64_t> value_hash;      // write id -> hashed value
  absl::flat_hash_map<int64_t, int64_t> init_hash;       // key -> hashed value of its INIT reads
  absl::flat_hash_map<int64_t, int64_t> claimed_writer;  // write id -> writer named by R records
  absl::flat_hash_map<int64_t, int64_t> delete_hash;     // -n -> hashed value of the n-th delete
};

using NamedFiles = std::vector<std::pair<std::string, std::string>>;

// Reads the log directory `path`. Other files than `T*.log` are ignored; sessions are the files
// in name order, named by the file's stem. `extras`, if given, receives what the model leaves out.
absl::StatusOr<history::History> ReadCobraDir(const std::string& path, const ReadOptions& options,
                                              CobraExtras* extras = nullptr);
// The same for (file name, contents) pairs; `source` names the directory in errors.
absl::StatusOr<history::History> ReadCobraFiles(const NamedFiles& files, const ReadOptions& options,
                                                std::string_view source,
                                                CobraExtras* extras = nullptr);

// OK if `head` (a file's first bytes) is a run of well-formed Cobra records starting with S.
absl::Status SniffCobra(std::string_view head);

// Encodes `h` as Cobra logs, one (file name, bytes) per session: `<session>.log` when the
// session's name starts with T, else `T<session>.log`. Hashed values, INIT values and writers
// named by reads come from `extras` when given, else the write id stands for the value (0 for
// INIT reads and deletes) and a read names the transaction writing its write id. A read of the
// key's initial value that no transaction writes (0 in a text history) is an INIT read whose
// hashed value is that value. Time-order records when extras say so or a transaction has a
// real-time interval. Errors (InvalidArgument): a transaction not committed, an id that is not an
// integer, a bytes key or value, a list operation, an unknown read, a read of a write id no
// transaction writes and `extras` does not know, a time-order history with a transaction without
// real time.
absl::StatusOr<NamedFiles> EncodeCobra(const history::History& h,
                                       const CobraExtras* extras = nullptr);
// EncodeCobra, written into the existing directory `dir`.
absl::Status WriteCobraDir(const history::History& h, const std::string& dir,
                           const CobraExtras* extras = nullptr);

}  // namespace isowatch::formats
