// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/statusor.h"

#include "isowatch/history/history.h"

namespace isowatch::history {

// `h` as a black-box history would hold it: the same transactions (ids, sessions and their order,
// statuses, real-time intervals, operations, range reads), initial state, tombstones and source
// (format, dialect, time unit), without start or commit timestamps, xids or snapshots. The
// reader's notes are not carried over. For `isowatch convert --drop-timestamps` and for tests
// that judge a history with and without its timestamps. Errors: those of HistoryBuilder::Finish
// (none for a history that Finish built).
absl::StatusOr<History> WithoutTimestamps(const History& h);

}  // namespace isowatch::history
