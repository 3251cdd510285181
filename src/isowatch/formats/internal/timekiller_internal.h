// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the TimeKiller reader and its tests: the readers with a chosen chunk size, so that
// tests can put chunk boundaries anywhere, and a choice of transaction parsers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats::internal {

// How transactions are parsed: kUsualFirst (what the public readers do) tries a parser for the
// usual shape of a transaction first and gives the others to the general parser; kGeneralOnly
// gives all to the general parser. Both must give the same outcome.
enum class TxnParsers : uint8_t { kUsualFirst, kGeneralOnly };

// Whether the transactions are parsed on a second thread while this one builds the history:
// kAuto (what the public readers do) for a source of at least kPipelineMinBytes on a machine of
// two cores or more; kAlways whatever the size. A pipelined read that fails for any reason is
// read again without the pipeline, which gives the error. Both must give the same outcome.
// kNoRetry (for tests) is kAlways that returns Aborted instead of reading again.
enum class Pipelining : uint8_t { kAuto, kOff, kAlways, kNoRetry };
inline constexpr uint64_t kPipelineMinBytes = uint64_t{4} << 20;

// ReadTimeKillerString, reading the history document `chunk_size` bytes at a time.
absl::StatusOr<history::History> ReadTimeKillerStringChunked(
    std::string_view json, const ReadOptions& options, std::string_view source,
    std::string_view initial_txn_json, size_t chunk_size,
    TxnParsers parsers = TxnParsers::kUsualFirst, Pipelining pipelining = Pipelining::kAuto);

// ReadTimeKillerFile, reading the history file `chunk_size` bytes at a time, or mapped as
// `mapping` says (a chunk at a time then too).
absl::StatusOr<history::History> ReadTimeKillerFileChunked(
    const std::string& path, const ReadOptions& options, size_t chunk_size,
    TxnParsers parsers = TxnParsers::kUsualFirst, Pipelining pipelining = Pipelining::kAuto,
    FileMapping mapping = FileMapping::kAuto);

// Whether `s` is an integer as JSON writes one: an optional '-', then "0" or digits not starting
// with 0. Ids that pass are written back as JSON numbers.
inline bool IsJsonInteger(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i == s.size()) return false;
  if (s[i] == '0') return i + 1 == s.size();
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

}  // namespace isowatch::formats::internal
