// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace isowatch::ingest {

// Remembers, per stream, the transaction ids already accepted and the fingerprint of each
// (TxnFingerprint), so that an id sent again is recognised: with the same content it is a
// duplicate (skipped silently and counted), with different content a conflict (refused with
// ID_REUSED).
//
// Check only looks; Record remembers. The ingest service calls Record for the accepted
// transactions of a batch only after the batch is durable, so the ids of a batch that never
// became durable are not remembered and the batch can be sent again. An implementation backed by
// storage may instead store the ids in the same write as the batch (the batch given to the sink
// carries them) and make Record a no-op.
//
// Implementations are thread-safe. The service calls Check and Record for one stream from one
// thread at a time.
class IdRegistry {
 public:
  enum class Outcome {
    kNew,        // never seen on this stream
    kDuplicate,  // seen with the same fingerprint
    kConflict,   // seen with a different fingerprint
  };

  virtual ~IdRegistry() = default;

  virtual Outcome Check(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) = 0;

  // Remembers `txn_id` with `fingerprint`. Never fails: an implementation whose storage fails
  // logs and counts it (a missed record only weakens the detection of reused ids).
  virtual void Record(std::string_view stream, std::string_view txn_id, uint64_t fingerprint) = 0;

  // The name of another stream than `stream` that holds `txn_id`, if one does. One daemon checks
  // one database, whose streams share keys and sessions, so a transaction id is unique across
  // them: an id already accepted on another stream is refused (ID_ON_OTHER_STREAM). Only the ids
  // Check still remembers are found. The default finds none.
  virtual std::optional<std::string> OwnerOf(std::string_view stream, std::string_view txn_id) {
    (void)stream;
    (void)txn_id;
    return std::nullopt;
  }
};

}  // namespace isowatch::ingest
