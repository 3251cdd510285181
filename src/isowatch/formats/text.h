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

// The text format of PolySI, MTC, Plume and IsoVista: one micro-operation per line,
// `r(key,value,session,txn)` or `w(key,value,session,txn)`, all non-negative int64 except the
// transaction, which may be -1 (an aborted write, Plume/IsoVista). Value 0 is every key's initial
// value. docs/history-format.md ("Text r/w") says which convention decides what.
//
// Dialects (ReadOptions::dialect): "polysi" and "mtc" refuse -1; "plume" and "isovista" accept
// it; both pairs take the reference readers' "first session wins" for a transaction id met under
// two sessions, and "plume" drops writes of 0 (counted). Empty = the superset, with an error for a
// transaction under two sessions and for writes of 0; the history then reports the dialect the
// file needs ("isovista" with an initial transaction 0, else "plume" when it uses -1, else
// "polysi").
//
// The reader takes the file line by line; since one transaction's lines need not be contiguous,
// it holds the operations until the end of the file and then hands the transactions to the
// builder in order of first appearance. Errors (InvalidArgument) name source, line:column and
// what was expected.

// Reads the text history at `path`.
absl::StatusOr<history::History> ReadTextFile(const std::string& path, const ReadOptions& options);
// Reads a text history held in memory; `source` names it in errors.
absl::StatusOr<history::History> ReadTextString(std::string_view data, const ReadOptions& options,
                                                std::string_view source);

// OK if `head` (the first bytes of a file) reads as the text format: its first significant line
// is `r(` or `w(` followed by four integers. Otherwise an error saying why not.
absl::Status SniffText(std::string_view head);

// Writes `h` as text, one line per operation, grouped by transaction, in the history's
// transaction order. Transaction and session ids are written as they are when all of them are
// non-negative decimal integers, otherwise renumbered (transactions from 1, sessions from 1) in
// order of first appearance. The aborted transactions named `abort#<session>` (and any other
// aborted transaction) become `-1` lines of their session: their writes, since what an aborted
// transaction read judges nothing. Initial registers that differ from 0 are written as a
// transaction 0 first (read it back with init_txn "0": writes of other values than 0 are not the
// IsoVista shape). A history whose registers start absent (null) is written with 0 for absent:
// a read of no value becomes r(k,0,...). Timestamps and real time are not written. Errors
// (InvalidArgument, with the reason): a bytes key or value, a negative key or value, a list
// operation, a transaction of unknown outcome, a read of an unknown value, a write of 0 or of no
// value, a default initial value other than 0 or absent.
absl::Status WriteText(const history::History& h, std::ostream& out);

}  // namespace isowatch::formats
