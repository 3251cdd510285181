// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the TimeKiller reader: a transaction as its parsers leave it, before it is given to
// the HistoryBuilder.

#include <cstdint>
#include <string_view>
#include <vector>

#include "isowatch/history/timestamp.h"

namespace isowatch::formats::internal {

enum class OpType : uint8_t { kWrite, kRead, kAppend };
// What an op's "v" held.
enum class ValueForm : uint8_t { kMissing, kNull, kInt, kList };
// How a list's elements (ValueForm::kList) are given.
enum class ListForm : uint8_t {
  // The elements: list_size of them at list_begin in ParsedTxn::elements.
  kElements,
  // As kElements, but the first `value` of them are the key's list, which the builder does not
  // hold yet and is given (HistoryBuilder::SetKeyList) before the read, which is the rest.
  kElementsAfterList,
  // The list's text between its brackets, not yet checked nor parsed: list_size bytes at
  // list_begin in ParsedTxn::list_text, all digits and commas, and at least one byte
  // (ParseUsualTxn with `defer_lists`; ListTexts turns it into one of the other forms).
  kText,
  // As kText, but the text is list_size bytes at list_begin past the op's `where`, in the
  // source's bytes (a mapped file's), which stay readable until the read ends.
  kTextInPlace,
  // A read of the first list_size elements of the key's list (HistoryBuilder::ListReadPrefix):
  // ListTexts compared the read with its copy of the list.
  kPrefix,
  // As kElements, but ListTexts found the read to be neither a prefix of the key's list nor an
  // extension of it (HistoryBuilder::ListReadApart).
  kApart,
};

// An operation parsed but not yet given to the builder.
struct PendingOp {
  OpType type = OpType::kRead;
  ValueForm form = ValueForm::kMissing;
  ListForm list_form = ListForm::kElements;
  // The key's id in the history, when the parsing thread of a pipelined read numbered it
  // (TimeKillerParser::ReadHistoryPipelined); else unset.
  uint32_t key_id = 0;
  int64_t key = 0;
  int64_t value = 0;
  uint32_t list_begin = 0;  // kList: where the list is, as list_form says
  uint32_t list_size = 0;
  const char* where = nullptr;  // the op's '{' (ListForm::kTextInPlace: in the source's bytes)
};

// The transaction being parsed. Either parser (ParseUsualTxn, TimeKillerParser's general one)
// fills it in whole; its vectors are reused from one transaction to the next. The ids point into
// the transaction's bytes or into the simdjson parser's string buffer, and are valid until the
// next transaction is parsed.
struct ParsedTxn {
  std::string_view tid;
  std::string_view sid;
  bool tid_numeric = false;
  bool sid_numeric = false;
  history::Timestamp sts;
  history::Timestamp cts;
  bool has_sts = true;  // false: the isowatch "snapshot" replaces "sts"
  uint64_t xid = 0;     // 0: none
  bool has_snapshot = false;
  uint64_t xmin = 0;
  uint64_t xmax = 0;
  std::vector<uint64_t> xip;
  std::vector<PendingOp> ops;
  std::vector<int64_t> elements;
  std::vector<char> list_text;  // ListForm::kText
};

}  // namespace isowatch::formats::internal
