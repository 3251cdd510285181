// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the TimeKiller reader: the parser of transactions of the usual shape, which most
// transactions have. It reads a transaction straight from the chunk buffer and finds where it
// ends; what it does not accept is left to the general parser (TimeKillerParser::ParseTxn).

#include <cstdint>

#include "isowatch/formats/internal/timekiller_txn.h"

namespace isowatch::formats::internal {

// What ParseUsualTxn does with a non-empty list of digits and commas only.
enum class DeferLists : uint8_t {
  kNo,       // parses it (ListForm::kElements)
  kCopy,     // copies its text into ParsedTxn::list_text (ListForm::kText)
  kInPlace,  // leaves its text where it is (ListForm::kTextInPlace): its bytes must stay
};

// The transaction object at `begin`, if it has the usual shape and ends before `limit`: the five
// members "tid", "sid", "sts", "cts" and "ops" once each, timestamps of integers or decimal
// strings, ids that are integers or strings, ops {"t", "k", "v"} with integer keys and values,
// no "-0" and no integer of more than 18 digits, no escapes nor non-ASCII bytes in strings, and
// members of other names only with numbers, strings, true, false or null as values (but not the
// isowatch extension's "xid" and "snapshot"). Fills `*txn` and returns the end of the object, or
// returns nullptr, leaving `*txn` in an unspecified state and the transaction to the general
// parser, which accepts everything this accepts, with the same meaning, and more. At least
// ChunkedJsonArray::kPadding bytes past `limit` must be readable. Unless `defer` is kNo, a
// non-empty list of digits and commas only (no spaces, no minus sign) is left as text, to be
// checked and parsed later (ListTexts); the transaction may then still be malformed.
const char* ParseUsualTxn(const char* begin, const char* limit, ParsedTxn* txn,
                          DeferLists defer = DeferLists::kNo);

}  // namespace isowatch::formats::internal
