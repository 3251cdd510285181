// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the ingest decoder and validator, as the daemon meets them on the wire.
// Whatever parses must validate without a crash, and the outcome must be consistent: every
// transaction is accepted, refused or a duplicate (or the whole batch is refused); every refusal
// serializes; and once the accepted ids are recorded, the same batch accepts nothing more. The
// accepted transactions then go through the conflict registry, as in the daemon: each is kept or
// refused, and the kept ones, decided again, are all kept.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "isowatch/ingest/conflict_registry.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/txn_fingerprint.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/v1/ingest.pb.h"

namespace {

using isowatch::ingest::BatchValidation;
using isowatch::ingest::ConflictRegistry;
using isowatch::ingest::MemoryIdRegistry;
using isowatch::ingest::ValidateBatch;
using isowatch::ingest::ValidationLimits;

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  isowatch::v1::IngestBatch batch;
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;
  ValidationLimits limits;
  limits.max_batch_txns = 256;
  limits.max_batch_bytes = 1 << 16;
  limits.max_ops_per_txn = 64;
  MemoryIdRegistry registry;
  const BatchValidation v = ValidateBatch(batch, limits, registry);
  Check(v.accepted.size() == v.fingerprints.size());
  if (v.whole_batch_refused) {
    Check(v.accepted.empty() && v.refusals.size() == 1 && v.refusals[0].whole_batch());
  } else {
    Check(v.accepted.size() + v.refusals.size() + v.duplicates ==
          static_cast<size_t>(batch.txns_size()));
  }
  ConflictRegistry conflicts;
  const ConflictRegistry::Decision d = conflicts.Decide(batch, v.accepted);
  Check(d.kept.size() + d.refusals.size() == v.accepted.size());
  Check(conflicts.Decide(batch, d.kept).kept == d.kept);
  std::string wire;
  for (const auto& r : d.refusals) {
    Check(r.reason() == isowatch::v1::KEY_KIND_CONFLICT ||
          r.reason() == isowatch::v1::SESSION_SEQ_CONFLICT);
    Check(r.detail().size() <= isowatch::ingest::kMaxRefusalDetailBytes);
    Check(r.SerializeToString(&wire));
  }
  for (const auto& r : v.refusals) {
    Check(r.reason() != isowatch::v1::REFUSAL_REASON_UNSPECIFIED);
    Check(r.detail().size() <= isowatch::ingest::kMaxRefusalDetailBytes);
    Check(r.SerializeToString(&wire));
    isowatch::v1::Refusal back;
    Check(back.ParseFromString(wire));
  }
  for (size_t i = 0; i < v.accepted.size(); ++i) {
    const auto& txn = batch.txns(static_cast<int>(v.accepted[i]));
    Check(isowatch::ingest::TxnFingerprint(txn) == v.fingerprints[i]);
    registry.Record(batch.stream(), isowatch::ingest::TxnIdString(txn), v.fingerprints[i]);
  }
  const BatchValidation again = ValidateBatch(batch, limits, registry);
  Check(again.accepted.empty());
  Check(again.whole_batch_refused == v.whole_batch_refused);
  return 0;
}
