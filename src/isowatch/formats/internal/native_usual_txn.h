// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the native reader: decodes a binary record that holds a transaction of the usual
// shape straight from its bytes, without protobuf's generated parser.
//
// Almost every record of a native file is a Transaction with an id, a session, a status, two
// timestamps and a few operations on integer or byte-string keys. Parsing such a record with the
// generated code costs nearly half of the reading (a nested message per key and value, each
// allocated in the arena, and the arena's allocations go through a thread-local lookup in the
// shared library), more than the target of 200 MB/s leaves for the whole read (bench/README.md,
// "Reading history formats"). DecodeUsualTxn reads such a record in one pass into a
// UsualTxn, and declines everything it does not know in full, or that the reader would refuse:
// the generated parser then reads the record, so every error and every unusual record keeps its
// one treatment there, and the generated parser stays the reference (native_usual_txn_test and
// the native fuzz target check that both give the same history or the same error).

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"

namespace isowatch::formats::internal {

// A Datum: unset (or set to nothing), an integer, or bytes (a view into the record).
struct UsualDatum {
  enum class Kind : uint8_t { kNone, kInt, kBytes };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  std::string_view bytes;
};

// An Operation the reader accepts: kind is READ, WRITE, APPEND or LIST_READ (the values of
// isowatch.v1.Operation.Kind), and the key and value fit the kind (docs/history-format.md). A
// LIST_READ's elements are elements[elements_begin, elements_begin + elements_count) of its
// UsualTxn.
struct UsualOp {
  int kind = 0;
  bool unknown = false;
  UsualDatum key;
  UsualDatum value;
  uint32_t elements_begin = 0;
  uint32_t elements_count = 0;
};

// A Transaction the reader accepts, with the fields of the usual shape only. The views point
// into the record.
struct UsualTxn {
  bool id_numeric = false;
  int64_t id_int = 0;
  std::string_view id_str;  // not empty when !id_numeric
  enum class Session : uint8_t { kNone, kInt, kStr };
  Session session = Session::kNone;
  int64_t session_int = 0;
  std::string_view session_str;
  bool has_seq = false;
  int64_t seq = 0;  // >= 0
  int status = 0;   // an isowatch.v1.Transaction.Status value: 0 to 3
  bool has_start = false;
  int64_t start_physical = 0;
  int64_t start_logical = 0;
  bool has_commit = false;
  int64_t commit_physical = 0;
  int64_t commit_logical = 0;
  uint64_t xid = 0;
  std::vector<UsualOp> ops;
  std::vector<UsualDatum> elements;
};

// If `record`, the bytes of one isowatch.v1.HistoryRecord, is a transaction of the usual shape
// that the reader accepts, fills `txn` (whose vectors are reused) as the generated parser would
// and returns true; otherwise returns false, and `txn` holds garbage.
//
// Known: a record holding its txn field once and nothing else; a Transaction with id_int or an
// ASCII, non-empty id_str, session_int or an ASCII session_str (or no session), a non-negative
// seq, a status from 0 to 3, start and commit, xid, and operations; an Operation with a kind from
// READ to LIST_READ, a key, a value, a list and the unknown flag as the kind allows them; each
// singular field at most once, in any order, each Datum with at most one of int and bytes.
// Everything else (unknown fields, stream, snapshot, real_time, range_reads, a field given twice,
// a wrong wire type, a malformed or truncated encoding, what ProtoDecoder would refuse) is
// declined.
bool DecodeUsualTxn(std::string_view record, UsualTxn* txn);

// ReadNativeString, with the binary records of the usual shape read by DecodeUsualTxn (as
// ReadNativeString and ReadNativeFile always do) or, when `usual_txns` is false, every record by
// the generated parser: for the tests that compare the two.
absl::StatusOr<history::History> ReadNativeStringWith(std::string_view data,
                                                      const ReadOptions& options,
                                                      std::string_view source, bool usual_txns);

}  // namespace isowatch::formats::internal
