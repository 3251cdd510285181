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

// An operation parsed but not yet given to the builder.
struct PendingOp {
  OpType type = OpType::kRead;
  ValueForm form = ValueForm::kMissing;
  // The key's id in the history, when the parsing thread of a pipelined read numbered it
  // (TimeKillerParser::ReadHistoryPipelined); else unset.
  uint32_t key_id = 0;
  int64_t key = 0;
  int64_t value = 0;
  uint32_t list_begin = 0;  // kList: the elements, in ParsedTxn::elements
  uint32_t list_size = 0;
  const char* where = nullptr;  // the op's '{'
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
};

}  // namespace isowatch::formats::internal
