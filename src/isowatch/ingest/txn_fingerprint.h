// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest {

// A stable 64-bit fingerprint of a transaction's content: the XXH3-64 hash (seed 0) of a
// canonical encoding written here (not protobuf's serialization, which makes no promise of
// stability across versions). The same content gives the same fingerprint in every process, on
// every run and build, so fingerprints can be stored and compared after a restart.
// docs/ingest-protocol.md describes the encoding.
//
// What counts as content: the id, the session, the session position, the status (unset reads as
// COMMITTED), the start and commit timestamps and the operations with their keys, values, lists
// and unknown marks, and the xid and snapshot when there are any. Not content: Transaction.stream
// (the batch names the stream) and unknown fields. Deterministic, pure and thread-safe.
uint64_t TxnFingerprint(const v1::Transaction& txn);

// A stable 64-bit fingerprint of a batch's content, to tell a batch sent again (the same content
// under its (stream, seq): a duplicate) from another batch under a (stream, seq) already durable
// (refused). Content: the transactions in order (each by TxnFingerprint), the watermark, the end
// of stream mark and the header (version, time unit, metadata in key order, the initial state
// in its order). Not content: the stream and seq, and Transaction.stream. Encoded as
// docs/ingest-protocol.md says and hashed like TxnFingerprint, with the same guarantees.
uint64_t BatchFingerprint(const v1::IngestBatch& batch);

// The transaction's id as text: id_int in decimal, id_str as is, "" when neither is set.
std::string TxnIdString(const v1::Transaction& txn);

}  // namespace isowatch::ingest
