// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/validate.h"

#include <cctype>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/txn_fingerprint.h"

#include "tests/unit/ingest/txn_builder.h"

namespace isowatch::ingest {
namespace {

using testing::WriteBatch;
using testing::WriteTxn;

constexpr char kStream[] = "s1";

// The reason CheckTransaction gives `t` in a batch of kStream, or REFUSAL_REASON_UNSPECIFIED if
// it accepts it.
v1::RefusalReason ReasonOf(const v1::Transaction& t, ValidationLimits limits = {}) {
  std::optional<Problem> p = CheckTransaction(t, kStream, limits);
  return p ? p->reason : v1::REFUSAL_REASON_UNSPECIFIED;
}

TEST(ValidateTest, WellFormedTransactionIsAccepted) {
  EXPECT_EQ(ReasonOf(WriteTxn(1, 1, 2)), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, MissingId) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.clear_id_int();
  EXPECT_EQ(ReasonOf(t), v1::MISSING_ID);
  t.set_id_str("");
  EXPECT_EQ(ReasonOf(t), v1::MISSING_ID);
  t.set_id_str("t-1");
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, OverlongIdIsMalformed) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.set_id_str(std::string(kMaxTxnIdBytes, 'x'));
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  t.set_id_str(std::string(kMaxTxnIdBytes + 1, 'x'));
  EXPECT_EQ(ReasonOf(t), v1::MALFORMED_TRANSACTION);
}

TEST(ValidateTest, CommittedTransactionNeedsCommitTimestamp) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.clear_commit();
  EXPECT_EQ(ReasonOf(t), v1::MISSING_COMMIT_TIMESTAMP);
  t.set_status(v1::Transaction::STATUS_UNSPECIFIED);  // read as COMMITTED
  EXPECT_EQ(ReasonOf(t), v1::MISSING_COMMIT_TIMESTAMP);
}

TEST(ValidateTest, AbortedOrUnknownTransactionNeedsNoCommitTimestamp) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.clear_commit();
  t.set_status(v1::Transaction::ABORTED);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  t.set_status(v1::Transaction::UNKNOWN);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  t.clear_start();
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, StartAfterCommit) {
  EXPECT_EQ(ReasonOf(WriteTxn(1, 5, 4)), v1::START_AFTER_COMMIT);
  EXPECT_EQ(ReasonOf(WriteTxn(1, 5, 5)), v1::REFUSAL_REASON_UNSPECIFIED);  // equal is valid
  v1::Transaction hybrid = WriteTxn(1, 5, 5);
  hybrid.mutable_start()->set_logical(2);
  hybrid.mutable_commit()->set_logical(1);
  EXPECT_EQ(ReasonOf(hybrid), v1::START_AFTER_COMMIT);
  hybrid.mutable_commit()->set_logical(2);
  EXPECT_EQ(ReasonOf(hybrid), v1::REFUSAL_REASON_UNSPECIFIED);
  v1::Transaction no_start = WriteTxn(1, 5, 4);
  no_start.clear_start();  // SER-only sources give no start timestamp
  EXPECT_EQ(ReasonOf(no_start), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, MalformedSnapshots) {
  v1::Transaction t = WriteTxn(1, 5, 9);
  t.clear_start();
  t.set_xid(101);
  t.mutable_snapshot()->set_xmin(100);
  t.mutable_snapshot()->set_xmax(104);
  t.mutable_snapshot()->add_xip(100);
  t.mutable_snapshot()->add_xip(103);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  v1::Transaction both = t;  // a snapshot replaces the start
  both.mutable_start()->set_physical(5);
  EXPECT_EQ(ReasonOf(both), v1::MALFORMED_SNAPSHOT);
  v1::Transaction inverted = t;
  inverted.mutable_snapshot()->set_xmin(105);
  EXPECT_EQ(ReasonOf(inverted), v1::MALFORMED_SNAPSHOT);
  v1::Transaction at_xmax = t;  // xip lies in [xmin, xmax)
  at_xmax.mutable_snapshot()->add_xip(104);
  EXPECT_EQ(ReasonOf(at_xmax), v1::MALFORMED_SNAPSHOT);
  v1::Transaction below = t;
  below.mutable_snapshot()->add_xip(99);
  EXPECT_EQ(ReasonOf(below), v1::MALFORMED_SNAPSHOT);
  std::optional<Problem> p = CheckTransaction(below, kStream, {});
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->detail.find("99"), std::string::npos) << p->detail;
  v1::Transaction empty = t;  // an empty snapshot at xmin = xmax is well formed
  empty.mutable_snapshot()->clear_xip();
  empty.mutable_snapshot()->set_xmin(104);
  EXPECT_EQ(ReasonOf(empty), v1::REFUSAL_REASON_UNSPECIFIED);
  EXPECT_EQ(RefusalReasonName(v1::MALFORMED_SNAPSHOT), "malformed_snapshot");
}

TEST(ValidateTest, SnapshotAndXidAreInTheFingerprint) {
  v1::Transaction t = WriteTxn(1, 5, 9);
  const uint64_t plain = TxnFingerprint(t);
  t.set_xid(7);
  const uint64_t with_xid = TxnFingerprint(t);
  EXPECT_NE(with_xid, plain);
  t.mutable_snapshot()->set_xmax(3);
  EXPECT_NE(TxnFingerprint(t), with_xid);
}

TEST(ValidateTest, EmptyReadOnlyTransactionIsValid) {
  v1::Transaction t = WriteTxn(1, 1, 1);
  t.clear_ops();
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, UnknownStatus) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.set_status(static_cast<v1::Transaction::Status>(7));
  EXPECT_EQ(ReasonOf(t), v1::UNKNOWN_STATUS);
}

TEST(ValidateTest, SessionPositionOutOfRangeIsMalformed) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.set_seq(0);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  t.set_seq(-1);
  EXPECT_EQ(ReasonOf(t), v1::MALFORMED_TRANSACTION);
  // The live history numbers a session in 32 bits.
  t.set_seq(4294967294);
  EXPECT_EQ(kMaxSessionSeq, 4294967294);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  t.set_seq(4294967295);
  EXPECT_EQ(ReasonOf(t), v1::MALFORMED_TRANSACTION);
  t.set_seq(INT64_MAX);
  EXPECT_EQ(ReasonOf(t), v1::MALFORMED_TRANSACTION);
}

TEST(ValidateTest, UnknownOperationKind) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.mutable_ops(0)->set_kind(v1::Operation::KIND_UNSPECIFIED);
  EXPECT_EQ(ReasonOf(t), v1::UNKNOWN_OPERATION_KIND);
  t.mutable_ops(0)->set_kind(static_cast<v1::Operation::Kind>(99));
  EXPECT_EQ(ReasonOf(t), v1::UNKNOWN_OPERATION_KIND);
}

TEST(ValidateTest, MissingKey) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.mutable_ops(0)->clear_key();
  EXPECT_EQ(ReasonOf(t), v1::MISSING_KEY);
  t.mutable_ops(0)->mutable_key()->set_bytes("");  // an empty byte string is a key
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, MissingValueOfWriteOrAppend) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.mutable_ops(0)->clear_value();
  EXPECT_EQ(ReasonOf(t), v1::MISSING_VALUE);
  t.mutable_ops(0)->set_kind(v1::Operation::APPEND);
  EXPECT_EQ(ReasonOf(t), v1::MISSING_VALUE);
  t.mutable_ops(0)->mutable_value()->set_int_(3);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, ReadsWithoutValueAreValid) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  v1::Operation* op = t.mutable_ops(0);
  op->set_kind(v1::Operation::READ);
  op->clear_value();  // read of an absent value
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  op->set_unknown(true);  // a read whose result was never seen
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  op->set_kind(v1::Operation::LIST_READ);  // unknown, and the empty list
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  op->set_unknown(false);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
}

TEST(ValidateTest, MalformedLists) {
  v1::Transaction read = WriteTxn(1, 1, 2);
  read.mutable_ops(0)->set_kind(v1::Operation::READ);
  read.mutable_ops(0)->mutable_list()->add_elements()->set_int_(1);
  EXPECT_EQ(ReasonOf(read), v1::MALFORMED_LIST);

  v1::Transaction write = WriteTxn(1, 1, 2);
  write.mutable_ops(0)->mutable_list()->add_elements()->set_int_(1);
  EXPECT_EQ(ReasonOf(write), v1::MALFORMED_LIST);

  v1::Transaction list_read = WriteTxn(1, 1, 2);
  v1::Operation* op = list_read.mutable_ops(0);
  op->set_kind(v1::Operation::LIST_READ);
  EXPECT_EQ(ReasonOf(list_read), v1::MALFORMED_LIST);  // a scalar value on a LIST_READ
  op->clear_value();
  op->mutable_list()->add_elements()->set_int_(1);
  op->mutable_list()->add_elements()->set_bytes("b");
  EXPECT_EQ(ReasonOf(list_read), v1::REFUSAL_REASON_UNSPECIFIED);
  op->mutable_list()->add_elements();  // an element without a value
  EXPECT_EQ(ReasonOf(list_read), v1::MALFORMED_LIST);
  op->mutable_list()->mutable_elements()->RemoveLast();
  op->set_unknown(true);  // unknown, yet with elements
  EXPECT_EQ(ReasonOf(list_read), v1::MALFORMED_LIST);
}

TEST(ValidateTest, UnknownWritesAndValuedUnknownReadsAreMalformed) {
  v1::Transaction write = WriteTxn(1, 1, 2);
  write.mutable_ops(0)->set_unknown(true);
  EXPECT_EQ(ReasonOf(write), v1::MALFORMED_TRANSACTION);
  v1::Transaction read = WriteTxn(1, 1, 2);
  read.mutable_ops(0)->set_kind(v1::Operation::READ);
  read.mutable_ops(0)->set_unknown(true);
  EXPECT_EQ(ReasonOf(read), v1::MALFORMED_TRANSACTION);
}

TEST(ValidateTest, TooManyOperations) {
  ValidationLimits limits;
  limits.max_ops_per_txn = 3;
  v1::Transaction t = WriteTxn(1, 1, 2);
  *t.add_ops() = t.ops(0);
  *t.add_ops() = t.ops(0);
  EXPECT_EQ(ReasonOf(t, limits), v1::REFUSAL_REASON_UNSPECIFIED);
  *t.add_ops() = t.ops(0);
  EXPECT_EQ(ReasonOf(t, limits), v1::TOO_MANY_OPERATIONS);
}

TEST(ValidateTest, StreamMismatch) {
  v1::Transaction t = WriteTxn(1, 1, 2);
  t.set_stream(kStream);
  EXPECT_EQ(ReasonOf(t), v1::REFUSAL_REASON_UNSPECIFIED);
  t.set_stream("other");
  EXPECT_EQ(ReasonOf(t), v1::STREAM_MISMATCH);
}

TEST(ValidateTest, Headers) {
  v1::Header h;
  EXPECT_FALSE(CheckHeader(h).has_value());
  h.set_version(1);
  auto* r = h.mutable_initial()->add_registers();
  r->mutable_key()->set_int_(1);
  r->mutable_value()->set_int_(0);
  auto* l = h.mutable_initial()->add_lists();
  l->mutable_key()->set_int_(1);  // a register and a list may share a key
  l->add_elements()->set_int_(5);
  EXPECT_FALSE(CheckHeader(h).has_value());

  v1::Header version = h;
  version.set_version(2);
  EXPECT_EQ(CheckHeader(version)->reason, v1::INVALID_HEADER);
  v1::Header no_key = h;
  no_key.mutable_initial()->add_registers()->mutable_value()->set_int_(1);
  EXPECT_EQ(CheckHeader(no_key)->reason, v1::INVALID_HEADER);
  v1::Header twice = h;
  twice.mutable_initial()->add_registers()->mutable_key()->set_int_(1);
  EXPECT_EQ(CheckHeader(twice)->reason, v1::INVALID_HEADER);
  v1::Header bytes_key = h;  // bytes "1" is another key than int 1
  bytes_key.mutable_initial()->add_registers()->mutable_key()->set_bytes("1");
  EXPECT_FALSE(CheckHeader(bytes_key).has_value());
  v1::Header element = h;
  element.mutable_initial()->mutable_lists(0)->add_elements();
  EXPECT_EQ(CheckHeader(element)->reason, v1::INVALID_HEADER);
}

TEST(ValidateTest, StreamNames) {
  EXPECT_TRUE(CheckStreamName("pg-main/0").ok());
  EXPECT_TRUE(CheckStreamName(std::string(kMaxStreamNameBytes, 'a')).ok());
  EXPECT_FALSE(CheckStreamName("").ok());
  EXPECT_FALSE(CheckStreamName(std::string(kMaxStreamNameBytes + 1, 'a')).ok());
  EXPECT_FALSE(CheckStreamName("a\nb").ok());
}

TEST(ValidateTest, BatchKeepsTheGoodTransactions) {
  MemoryIdRegistry registry;
  v1::IngestBatch batch = WriteBatch(kStream, 4, 10, 4);
  batch.mutable_txns(1)->clear_commit();
  batch.mutable_txns(3)->mutable_ops(0)->clear_key();
  BatchValidation v = ValidateBatch(batch, {}, registry);
  EXPECT_FALSE(v.whole_batch_refused);
  EXPECT_EQ(v.accepted, (std::vector<uint32_t>{0, 2}));
  ASSERT_EQ(v.fingerprints.size(), 2u);
  EXPECT_EQ(v.fingerprints[0], TxnFingerprint(batch.txns(0)));
  ASSERT_EQ(v.refusals.size(), 2u);
  EXPECT_EQ(v.refusals[0].seq(), 4u);
  EXPECT_EQ(v.refusals[0].index(), 1u);
  EXPECT_EQ(v.refusals[0].txn_id(), "11");
  EXPECT_EQ(v.refusals[0].reason(), v1::MISSING_COMMIT_TIMESTAMP);
  EXPECT_FALSE(v.refusals[0].whole_batch());
  EXPECT_FALSE(v.refusals[0].detail().empty());
  EXPECT_EQ(v.refusals[1].index(), 3u);
  EXPECT_EQ(v.refusals[1].reason(), v1::MISSING_KEY);
  EXPECT_EQ(registry.size(), 0u);  // validation only looks
}

TEST(ValidateTest, IdReusedWithSameContentIsADuplicate) {
  MemoryIdRegistry registry;
  v1::IngestBatch first = WriteBatch(kStream, 1, 1, 2);
  registry.Record(kStream, "1", TxnFingerprint(first.txns(0)));
  BatchValidation v = ValidateBatch(first, {}, registry);
  EXPECT_EQ(v.accepted, (std::vector<uint32_t>{1}));
  EXPECT_EQ(v.duplicates, 1u);
  EXPECT_TRUE(v.refusals.empty());
}

TEST(ValidateTest, IdReusedWithOtherContentIsRefused) {
  MemoryIdRegistry registry;
  v1::IngestBatch batch = WriteBatch(kStream, 1, 1, 2);
  registry.Record(kStream, "1", TxnFingerprint(WriteTxn(1, 0, 1, 5, 99)));
  BatchValidation v = ValidateBatch(batch, {}, registry);
  EXPECT_EQ(v.accepted, (std::vector<uint32_t>{1}));
  ASSERT_EQ(v.refusals.size(), 1u);
  EXPECT_EQ(v.refusals[0].reason(), v1::ID_REUSED);
  EXPECT_EQ(v.refusals[0].txn_id(), "1");
  // Another stream has its own ids.
  batch.set_stream("s2");
  EXPECT_TRUE(ValidateBatch(batch, {}, registry).refusals.empty());
}

TEST(ValidateTest, IdReusedWithinOneBatch) {
  MemoryIdRegistry registry;
  v1::IngestBatch batch = WriteBatch(kStream, 1, 1, 1);
  *batch.add_txns() = batch.txns(0);                     // same content: a duplicate
  *batch.add_txns() = WriteTxn(1, 0, 1, /*key=*/3, 42);  // other content: refused
  BatchValidation v = ValidateBatch(batch, {}, registry);
  EXPECT_EQ(v.accepted, (std::vector<uint32_t>{0}));
  EXPECT_EQ(v.duplicates, 1u);
  ASSERT_EQ(v.refusals.size(), 1u);
  EXPECT_EQ(v.refusals[0].index(), 2u);
  EXPECT_EQ(v.refusals[0].reason(), v1::ID_REUSED);
}

TEST(ValidateTest, IntAndStringIdsWithTheSameTextAreOneId) {
  MemoryIdRegistry registry;
  v1::IngestBatch batch = WriteBatch(kStream, 1, 7, 1);
  v1::Transaction as_string = batch.txns(0);
  as_string.set_id_str("7");
  *batch.add_txns() = as_string;
  BatchValidation v = ValidateBatch(batch, {}, registry);
  ASSERT_EQ(v.refusals.size(), 1u);
  EXPECT_EQ(v.refusals[0].reason(), v1::ID_REUSED);
}

TEST(ValidateTest, OversizedBatchIsRefusedWhole) {
  MemoryIdRegistry registry;
  ValidationLimits limits;
  limits.max_batch_txns = 3;
  BatchValidation ok = ValidateBatch(WriteBatch(kStream, 1, 1, 3), limits, registry);
  EXPECT_FALSE(ok.whole_batch_refused);
  EXPECT_EQ(ok.accepted.size(), 3u);

  BatchValidation too_many = ValidateBatch(WriteBatch(kStream, 2, 1, 4), limits, registry);
  EXPECT_TRUE(too_many.whole_batch_refused);
  EXPECT_TRUE(too_many.accepted.empty());
  ASSERT_EQ(too_many.refusals.size(), 1u);
  EXPECT_EQ(too_many.refusals[0].reason(), v1::BATCH_TOO_LARGE);
  EXPECT_TRUE(too_many.refusals[0].whole_batch());
  EXPECT_EQ(too_many.refusals[0].seq(), 2u);

  v1::IngestBatch big = WriteBatch(kStream, 3, 1, 2);
  ValidationLimits bytes;
  bytes.max_batch_bytes = big.ByteSizeLong();
  EXPECT_FALSE(ValidateBatch(big, bytes, registry).whole_batch_refused);
  bytes.max_batch_bytes = big.ByteSizeLong() - 1;
  BatchValidation too_big = ValidateBatch(big, bytes, registry);
  EXPECT_TRUE(too_big.whole_batch_refused);
  EXPECT_EQ(too_big.refusals.at(0).reason(), v1::BATCH_TOO_LARGE);
}

TEST(ValidateTest, InvalidHeaderRefusesTheWholeBatch) {
  MemoryIdRegistry registry;
  v1::IngestBatch batch = WriteBatch(kStream, 1, 1, 2);
  batch.mutable_header()->set_version(9);
  BatchValidation v = ValidateBatch(batch, {}, registry);
  EXPECT_TRUE(v.whole_batch_refused);
  EXPECT_TRUE(v.accepted.empty());
  EXPECT_EQ(v.refusals.at(0).reason(), v1::INVALID_HEADER);
}

TEST(ValidateTest, ReasonNamesAreDistinctLabels) {
  std::set<std::string> names;
  for (int r = 0; r < kRefusalReasonCount; ++r) {
    ASSERT_TRUE(v1::RefusalReason_IsValid(r)) << r;
    const std::string name(RefusalReasonName(static_cast<v1::RefusalReason>(r)));
    EXPECT_NE(name, "unknown") << r;
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << name;
    // The label is the enum name in lower case.
    std::string enum_name = v1::RefusalReason_Name(static_cast<v1::RefusalReason>(r));
    for (char& c : enum_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (r != v1::REFUSAL_REASON_UNSPECIFIED) {
      EXPECT_EQ(name, enum_name);
    }
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kRefusalReasonCount));
  EXPECT_EQ(RefusalReasonName(v1::MISSING_COMMIT_TIMESTAMP), "missing_commit_timestamp");
  EXPECT_EQ(RefusalReasonName(static_cast<v1::RefusalReason>(1000)), "unknown");
}

TEST(ValidateTest, RefusalTextIsCutAtACharacterBoundary) {
  std::string long_id;
  for (int i = 0; i < 2000; ++i) long_id += "\xc3\xa9";  // é
  v1::Refusal r = MakeRefusal(1, 0, long_id, v1::MISSING_ID, long_id);
  EXPECT_LE(r.detail().size(), kMaxRefusalDetailBytes);
  EXPECT_EQ(r.detail().size() % 2, 0u);
  EXPECT_LE(r.txn_id().size(), kMaxTxnIdBytes);
  EXPECT_EQ(r.txn_id().size() % 2, 0u);
  std::string wire;
  EXPECT_TRUE(r.SerializeToString(&wire));
  v1::Refusal back;
  EXPECT_TRUE(back.ParseFromString(wire));  // valid UTF-8, or proto3 parsing fails
}

TEST(TxnFingerprintTest, StableAndContentSensitive) {
  const v1::Transaction t = WriteTxn(1, 1, 2);
  // Pinned: a change of the encoding would make stored fingerprints disagree after an upgrade.
  EXPECT_EQ(TxnFingerprint(t), 0x89ec28daacf5bb2eULL);
  v1::Transaction same = t;
  same.set_status(v1::Transaction::STATUS_UNSPECIFIED);  // read as COMMITTED
  same.set_stream(kStream);                              // not content
  EXPECT_EQ(TxnFingerprint(same), TxnFingerprint(t));
  std::set<uint64_t> seen{TxnFingerprint(t)};
  v1::Transaction c = t;
  c.mutable_commit()->set_logical(1);
  EXPECT_TRUE(seen.insert(TxnFingerprint(c)).second);
  c = t;
  c.mutable_ops(0)->mutable_value()->set_bytes("1");
  EXPECT_TRUE(seen.insert(TxnFingerprint(c)).second);
  c = t;
  c.set_id_str("1");
  EXPECT_TRUE(seen.insert(TxnFingerprint(c)).second);
  c = t;
  c.clear_session();
  EXPECT_TRUE(seen.insert(TxnFingerprint(c)).second);
  c = t;
  c.mutable_ops(0)->set_unknown(true);
  EXPECT_TRUE(seen.insert(TxnFingerprint(c)).second);
  c = t;
  *c.add_ops() = t.ops(0);
  EXPECT_TRUE(seen.insert(TxnFingerprint(c)).second);
}

TEST(MergeRefusalsTest, InterleavesTwoStagesInBatchOrder) {
  const std::vector<v1::Refusal> validation = {
      MakeRefusal(3, 0, "a", v1::MALFORMED_TRANSACTION, "x"),
      MakeRefusal(3, 4, "e", v1::ID_REUSED, "x")};
  const std::vector<v1::Refusal> sink = {MakeRefusal(3, 2, "c", v1::KEY_KIND_CONFLICT, "x"),
                                         MakeRefusal(3, 5, "f", v1::SESSION_SEQ_CONFLICT, "x")};
  std::vector<uint32_t> order;
  for (const v1::Refusal& r : MergeRefusals(validation, sink)) order.push_back(r.index());
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 2, 4, 5}));
  // A whole-batch refusal (index 0) stays before a transaction's refusal of index 0.
  const std::vector<v1::Refusal> whole = {MakeBatchRefusal(3, v1::BATCH_TOO_LARGE, "x")};
  const std::vector<v1::Refusal> merged = MergeRefusals(whole, validation);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_TRUE(merged[0].whole_batch());
  EXPECT_FALSE(merged[1].whole_batch());
  EXPECT_TRUE(MergeRefusals({}, {}).empty());
}

}  // namespace
}  // namespace isowatch::ingest
