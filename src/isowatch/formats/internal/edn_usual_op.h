// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the EDN reader: reads an operation map of the usual shape straight from its bytes,
// without the general parser's nodes.
//
// Almost every line of a Jepsen history is a map such as
//
//   {:type :ok, :f :txn, :value [[:r 1 nil] [:append 2 3]], :process 0, :time 12, :index 7}
//
// and reading it through EdnParser (a node per value, then a walk over the nodes) costs most of
// the reader's time (bench/README.md, "Reading history formats"). ReadUsualEdnOp reads such a map
// directly into an ElleOp, and declines anything it does not know in full: then the general
// parser reads the form, so every error and every unusual form keeps its one treatment there.

#include <cstddef>
#include <string_view>

#include "isowatch/formats/internal/elle_history.h"

namespace isowatch::formats::internal {

// If `text` starts with an operation map that this reader knows whole, fills `op` as
// EdnOpReader's ReadHeader and ReadValue would (its header fields and its micro-ops) and returns
// the map's length in bytes; otherwise returns 0, and `op` holds garbage.
//
// Known: keys :type (:invoke, :ok, :fail, :info), :f (:txn or nil), :process, :index and :time
// (integers or nil), :ts (nil or {:rts R :cts C}), :value (a vector of micro-ops [:r k v],
// [:w k v], [:append k v] with integer or simple keyword keys, integer values, nil, or for :r a
// vector of integers), and other keys whose value is an integer, nil, a simple keyword or a string
// without escapes; separated by spaces, commas, tabs and newlines; each key once. Everything else
// (comments, discards, tags, strings in micro-ops, big or non-decimal numbers, a record literal,
// a map cut by the end of `text`) is declined.
size_t ReadUsualEdnOp(std::string_view text, ElleOp* op);

}  // namespace isowatch::formats::internal
