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

// Jepsen/Elle histories (docs/history-format.md, "Jepsen / Elle EDN" and "elle-cli JSON"): one
// operation map per invocation and completion, {:type :invoke|:ok|:fail|:info, :process P,
// :f :txn, :value [[:r k v] [:w k v] [:append k v] ...], :index I, :time T}, paired per process
// into transactions. Sessions are the integer processes, transaction ids the completions'
// :index; non-client operations are skipped and counted in the history's notes.
//
// The readers stream: EDN is lexed from a buffer read in large chunks, one operation map at a
// time; elle-cli JSON is split into elements (or lines) and each is parsed on its own. Errors are
// InvalidArgument and name the source, the line (and column) and what was expected.
//
// Options: ReadOptions::dialect ("list-append" or "rw-register") decides files that only read;
// initial_value sets the registers' initial value (Elle's is nil); init_txn names the :index of
// a transaction whose writes are the initial state; lenient drops malformed operations and
// pairing errors with a note instead of failing.

// Reads the EDN history at `path`.
absl::StatusOr<history::History> ReadEdnFile(const std::string& path, const ReadOptions& options);
// Reads an EDN history held in memory; `source` names it in messages.
absl::StatusOr<history::History> ReadEdnString(std::string_view data, const ReadOptions& options,
                                               std::string_view source);
// OK if `head` (the first bytes of a file, up to 4096) looks like a Jepsen EDN history: its first
// form is an operation map (or a vector or list of them) whose keys are keywords. Otherwise an
// error saying why not.
absl::Status SniffEdn(std::string_view head);

// Reads the elle-cli JSON history at `path`: one JSON array of operation objects, or one object
// per line.
absl::StatusOr<history::History> ReadElleJsonFile(const std::string& path,
                                                  const ReadOptions& options);
absl::StatusOr<history::History> ReadElleJsonString(std::string_view data,
                                                    const ReadOptions& options,
                                                    std::string_view source);
// OK if `head` looks like elle-cli JSON: a top-level array (or a first line) whose first element
// is an object with a "type" member and none of TimeKiller's "sts"/"cts"/"ops"/"tid".
absl::Status SniffElleJson(std::string_view head);

// Writes `h` as EDN, one operation map per line: per transaction an :invoke and its completion
// (:ok committed, :fail aborted, :info unknown; an unknown transaction never completed gets its
// :invoke only). Invocations go in real-time order when the history has real time, else right
// before their completion; completions go in the history's order. :index is dense from 0, :time
// the real-time interval, :process the session (a numeric session as is, others numbered after
// the largest numeric one in order of first appearance), :ts the start and commit timestamps.
// Errors (InvalidArgument, naming the transaction): what EDN cannot say: an initial state other
// than nil registers and empty lists, xids and snapshots, a timestamp with a logical part, only
// one of start and commit, timestamps on a transaction not committed, an unknown read in a
// committed transaction, an absent register read in one not committed, a session whose order is
// not the history's order, a transaction never completed that is not unknown or not the last of
// its session.
absl::Status WriteEdn(const history::History& h, std::ostream& out);

// Writes `h` in elle-cli's JSON (format "elle-json"): what WriteEdn writes, as one JSON array of
// objects, one a line, whose members are the EDN keys without the colon ("type" first), keywords
// as strings ("ok", "append"), nil as null. A bytes key is written as a string as it is (":x"
// stays ":x", which reads back as the same key). Errors: WriteEdn's, and a key or value that is
// not UTF-8, which JSON text cannot hold.
absl::Status WriteElleJson(const history::History& h, std::ostream& out);

}  // namespace isowatch::formats
