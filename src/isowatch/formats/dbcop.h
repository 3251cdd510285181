// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats {

// dbcop histories: the old bincode file (`history.bincode`, branch oopsla-2019), the old JSON
// (serde_json of the same structs) and the new JSON of dbcop's main branch (wrapper object or bare
// sessions; tagged {"Write"/"Read": {...}} or tuple ["w"/"r", variable, version] events).
// docs/history-format.md ("dbcop") says what each becomes. In short: sessions are positional and
// named "1".."n"; transaction ids are "<session>:<index>" (index from 0 within the session,
// counting every transaction of the file); a transaction that did not succeed (success 0,
// committed false) is aborted (noted: the format cannot tell aborted from unknown); value 0 (and
// a new-JSON null) reads the initial state, 0 by default; a file with transactions but no
// successful one is a workload template and is refused.

// The header of an old dbcop history: the generator's parameters (hints, never trusted) and three
// strings, which the history model has no place for. The readers fill it when asked; the writer
// takes it to give the same bytes back.
struct DbcopHeader {
  uint64_t id = 0;
  uint64_t n_node = 0;
  uint64_t n_variable = 0;
  uint64_t n_transaction = 0;
  uint64_t n_event = 0;
  std::string info;
  std::string start;
  std::string end;
  // Sessions the file lists, empty ones included (the history holds only those with
  // transactions); the writer writes at least this many.
  uint64_t sessions = 0;
};

// Reads an old dbcop bincode file (just the file; the directory layouts are the caller's).
absl::StatusOr<history::History> ReadDbcopBincodeFile(const std::string& path,
                                                      const ReadOptions& options,
                                                      DbcopHeader* header = nullptr);
absl::StatusOr<history::History> ReadDbcopBincodeString(std::string_view data,
                                                        const ReadOptions& options,
                                                        std::string_view source,
                                                        DbcopHeader* header = nullptr);
// OK if `head` starts like a bincode history: a 40-byte header and plausible header strings.
absl::Status SniffDbcopBincode(std::string_view head);

// Reads a dbcop JSON history (old or new, wrapper or bare sessions), streaming (SAX).
absl::StatusOr<history::History> ReadDbcopJsonFile(const std::string& path,
                                                   const ReadOptions& options,
                                                   DbcopHeader* header = nullptr);
absl::StatusOr<history::History> ReadDbcopJsonString(std::string_view data,
                                                     const ReadOptions& options,
                                                     std::string_view source,
                                                     DbcopHeader* header = nullptr);
// OK if `head` is a JSON object with a "data" member or an array of arrays.
absl::Status SniffDbcopJson(std::string_view head);

// Writes `h` as an old bincode history. Sessions go by their numbers when every session name is
// a positive decimal integer (missing numbers become empty sessions), else in order of first
// appearance; transactions in session order. `header` gives the parameters and strings; without
// one they are computed (id 0, sessions, keys, most transactions in a session, most events in a
// transaction) and the strings are "isowatch" and the Unix epoch. Errors (InvalidArgument): a
// transaction of unknown outcome, a bytes or negative key or value, a list operation, an unknown
// read, a read of no value.
absl::Status WriteDbcopBincode(const history::History& h, std::ostream& out,
                               const DbcopHeader* header = nullptr);

}  // namespace isowatch::formats
