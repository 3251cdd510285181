// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {

// ViperBench JSON lines (docs/history-format.md, "ViperBench JSON lines"): a directory of
// `J<digits>.log` files, one per client session, each line one committed transaction
// {"value": [mop, ...], ...} whose mops are reads, writes, inserts, deletes and range reads.
//
// The reader streams line by line; every line is parsed on its own. Errors (InvalidArgument)
// name the source, the file and line, the mop's index where there is one, and what was expected.
// Options: initial_value (the default register value), init_txn (the id, "J<n>:<line>", of a
// transaction to take as the initial state, like "isInitial"), lenient (a malformed line is
// dropped with a note), dialect (empty or "viper" only).

// A directory's files as (file name, contents).
using ViperFiles = std::vector<std::pair<std::string, std::string>>;

// Reads the ViperBench directory `dir`.
absl::StatusOr<history::History> ReadViperDir(const std::string& dir, const ReadOptions& options);
// Reads a directory held in memory: `files` are (name, contents); `source` names it in errors.
absl::StatusOr<history::History> ReadViperFiles(const ViperFiles& files, const ReadOptions& options,
                                                std::string_view source);

// OK if `dir` is a directory that holds a `J<digits>.log` file and every such non-blank file's
// first line is a JSON object with "value": [...]; otherwise an error (InvalidArgument, NotFound)
// saying why not. Fits FormatDescription::sniff, which gives a directory format the directory's
// path.
absl::Status SniffViperDir(std::string_view dir);

// The files WriteViperDir writes, in memory: one `<session>.log` per session (the session's name
// when every session is named J<digits>, else J1, J2, ... in session order) with its
// transactions in session order, and the initial state, if any, in a file of its own (J0, or
// J00, ... when taken); an empty history is one empty J1.log. Transaction ids are not kept: the
// reader derives them from file and line. Errors (InvalidArgument, naming the transaction and
// what): what ViperBench cannot express — a transaction not committed, start or commit timestamps,
// xids or snapshots, list operations, an unknown read, a bytes value, the value 0 (ViperBench's
// null) read or written, a write of an absent value, integer and bytes keys in one history, a
// real-time interval in a unit other than ms or never completed, a non-null default initial value,
// an initial list or installed version, a range bound that is the string "nil", a tombstone no mop
// can mark as one.
absl::StatusOr<ViperFiles> EncodeViper(const history::History& h);
// Writes EncodeViper's files into `dir` (created if missing). Errors: those of EncodeViper;
// FailedPrecondition if `dir` already holds a J<digits>.log file; Unavailable if a write fails.
absl::Status WriteViperDir(const history::History& h, const std::string& dir);

}  // namespace isowatch::formats
