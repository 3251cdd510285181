// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <limits>

#include "isowatch/common/strong_id.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::history {

enum class TxnStatus : uint8_t {
  kCommitted = 0,
  kAborted = 1,  // definitely had no effect
  kUnknown = 2,  // may or may not have taken effect
};

const char* TxnStatusName(TxnStatus status);

// One transaction of a History. Plain data owned by the History; operations live in the History's
// op pool at [ops_begin, ops_begin + ops_count).
//
// Invariants (established by HistoryBuilder::Finish):
//  1. has_start && has_commit implies start <= commit.
//  2. seq is dense 0..n-1 within the session and gives the session order.
//  3. session_prev is the transaction at seq - 1 in the same session, or invalid for seq 0.
//  4. A transaction with a snapshot has no start timestamp (History::has_snapshot).
//  5. has_real_time implies invoke_time <= complete_time.
struct Transaction {
  uint32_t ext_id = 0;  // index into History's external-id table
  SessionId session;
  uint32_t seq = 0;
  TxnId session_prev;
  TxnStatus status = TxnStatus::kCommitted;
  bool has_start = false;
  bool has_commit = false;
  bool ext_id_numeric = false;  // the source wrote the id as a number
  uint16_t origin = 0;          // live histories: which source (stream) delivered it
  // The client saw the transaction between invoke_time and complete_time, in the source's unit
  // of time (HistoryInfo::time_unit). A transaction never seen to complete has complete_time
  // kNeverCompleted. Real time orders transactions for the strict levels: A precedes B if
  // A.complete_time < B.invoke_time. Live histories have none.
  bool has_real_time = false;
  Timestamp start;
  Timestamp commit;
  uint64_t ops_begin = 0;
  uint32_t ops_count = 0;
  // Index + 1 of the transaction's database xid and snapshot in the History's table
  // (History::xid, History::snapshot); 0: it has neither. Fits in what was padding.
  uint32_t xid_slot = 0;
  // Where the transaction came from: byte offset in the source file (or record number for
  // record-oriented sources), for counterexamples.
  uint64_t source_offset = 0;
  int64_t invoke_time = 0;
  int64_t complete_time = 0;

  static constexpr int64_t kNeverCompleted = std::numeric_limits<int64_t>::max();

  bool committed() const { return status == TxnStatus::kCommitted; }
};

static_assert(sizeof(Transaction) == 104);

}  // namespace isowatch::history
