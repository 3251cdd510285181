// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "isowatch/history/history.h"

namespace isowatch::testing {

// `h` as a black-box history would hold it: the same transactions (ids, sessions and their order,
// statuses, operations) and initial state, without start or commit timestamps, xids or
// snapshots. Real-time intervals stay.
history::History StripTimestamps(const history::History& h);

}  // namespace isowatch::testing
