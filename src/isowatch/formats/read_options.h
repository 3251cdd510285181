// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace isowatch::formats {

// Options shared by the history readers. Where a format leaves something open, the default is
// what the format's own tool does (docs/history-format.md, per format).
struct ReadOptions {
  // The value every register holds before the first write, unless the file (or the initial
  // transaction file) says otherwise: nullopt = the format's own convention (absent/null for
  // most; 0 for the text and dbcop formats). TimeKiller's --initial_value.
  std::optional<int64_t> initial_value;
  // TimeKiller only: path of the initial-transaction file (one JSON object with "ops"); empty =
  // none.
  std::string initial_txn_path;
  // The variant of the format where one format has several (text: "polysi", "plume",
  // "isovista", "mtc"; edn: "list-append", "rw-register"); empty = decided from the file.
  std::string dialect;
  // The transaction with this id (as the file writes it) holds the initial state: its writes
  // are the keys' values before the history, and it is not checked as a transaction. Unset =
  // the format's convention (text: an IsoVista-style transaction 0 when there is one).
  std::optional<std::string> init_txn;
  // A malformed transaction is dropped, with a note in the history's HistoryInfo, instead of
  // failing the whole read. Errors in the file's framing still fail it.
  bool lenient = false;
};

}  // namespace isowatch::formats
