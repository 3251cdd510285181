// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {

// TimeKiller JSON (docs/history-format.md and the public checker's format): one JSON array of
// transaction objects {"tid", "sid", "sts", "cts", "ops"}, key-value or list.
//
// The reader streams: the file is read in chunks and each transaction is parsed with simdjson's
// On-Demand API straight into a HistoryBuilder, so the file's contents are never held whole next
// to the history. Errors (InvalidArgument) name the source, the line:column and the transaction's
// array index, and say what was expected.

// Reads the TimeKiller file at `path` (and options.initial_txn_path if set).
absl::StatusOr<history::History> ReadTimeKillerFile(const std::string& path,
                                                    const ReadOptions& options);
// Reads a TimeKiller document held in memory; `source` names it in errors. The initial
// transaction, if any, is passed as a document too (empty = none).
absl::StatusOr<history::History> ReadTimeKillerString(std::string_view json,
                                                      const ReadOptions& options,
                                                      std::string_view source,
                                                      std::string_view initial_txn_json = {});

// Writes `h` as a TimeKiller array: ids as given (numbers stay numbers), hybrid timestamps as
// {"p": number, "l": number}, one transaction per line. Only committed transactions are written
// (the format cannot say aborted). Errors: a transaction without timestamps; a bytes key or value
// (the format holds integers only).
absl::Status WriteTimeKiller(const history::History& h, std::ostream& out);
// Writes the initial state of `h` as a TimeKiller initial-transaction file ({"ops": [...]}).
absl::Status WriteTimeKillerInitial(const history::History& h, std::ostream& out);

}  // namespace isowatch::formats
