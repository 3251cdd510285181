// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "isowatch/history/history.h"

namespace isowatch::testing {

// Everything a History says, as text, one line per fact: two histories are the same iff their
// texts are. Keys and values are shown as the source wrote them, not by their ids; transactions
// in input order with their session, position and predecessor, status, timestamps, real-time
// interval, xid, snapshot and operations (unknown reads marked "?"; bytes keys and values quoted,
// so that 5 and "5" differ), range reads among the operations at their positions, and the
// tombstones. The source's name and reader notes are
// left out, so that the same history read from two formats compares equal.
std::string CanonicalHistory(const history::History& h);

// How a History holds its list reads (docs/engine.md, "List storage"), as text: each list read in
// input order, its elements and whether it shares its key's list or is held apart, then each
// key's list. Two readers that build the same history hold it alike iff their texts are equal.
std::string CanonicalListStorage(const history::History& h);

}  // namespace isowatch::testing
