// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest::testing {

// A committed transaction `id` of session 1 that starts at `start`, commits at `commit` and
// writes `value` to integer key `key`.
inline v1::Transaction WriteTxn(int64_t id, int64_t start, int64_t commit, int64_t key = 1,
                                int64_t value = 1) {
  v1::Transaction t;
  t.set_id_int(id);
  t.set_session_int(1);
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_start()->set_physical(start);
  t.mutable_commit()->set_physical(commit);
  v1::Operation* op = t.add_ops();
  op->set_kind(v1::Operation::WRITE);
  op->mutable_key()->set_int_(key);
  op->mutable_value()->set_int_(value);
  return t;
}

// A batch of `stream` with seq `seq` holding `count` write transactions with ids first_id,
// first_id + 1, ... (commit timestamp = id, start = id - 1).
inline v1::IngestBatch WriteBatch(const std::string& stream, uint64_t seq, int64_t first_id,
                                  int count) {
  v1::IngestBatch b;
  b.set_stream(stream);
  b.set_seq(seq);
  for (int i = 0; i < count; ++i) {
    const int64_t id = first_id + i;
    *b.add_txns() = WriteTxn(id, id - 1, id, id % 7, id);
  }
  return b;
}

}  // namespace isowatch::ingest::testing
