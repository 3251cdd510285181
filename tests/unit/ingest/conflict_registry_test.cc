// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/conflict_registry.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/formats/proto_decoder.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::ingest {
namespace {

using history::DataModel;

// --- transactions ------------------------------------------------------------------------------

v1::Transaction Txn(int64_t id) {
  v1::Transaction t;
  t.set_id_int(id);
  t.set_session_int(id);
  t.mutable_start()->set_physical(10 * id);
  t.mutable_commit()->set_physical(10 * id + 5);
  return t;
}

v1::Operation* AddOp(v1::Transaction& t, v1::Operation::Kind kind, int64_t key) {
  v1::Operation* op = t.add_ops();
  op->set_kind(kind);
  op->mutable_key()->set_int_(key);
  return op;
}

v1::Transaction& Write(v1::Transaction& t, int64_t key, int64_t value = 1) {
  AddOp(t, v1::Operation::WRITE, key)->mutable_value()->set_int_(value);
  return t;
}
v1::Transaction& Read(v1::Transaction& t, int64_t key, int64_t value) {
  AddOp(t, v1::Operation::READ, key)->mutable_value()->set_int_(value);
  return t;
}
v1::Transaction& ReadNothing(v1::Transaction& t, int64_t key) {
  AddOp(t, v1::Operation::READ, key);
  return t;
}
v1::Transaction& Append(v1::Transaction& t, int64_t key, int64_t value = 1) {
  AddOp(t, v1::Operation::APPEND, key)->mutable_value()->set_int_(value);
  return t;
}
v1::Transaction& ListRead(v1::Transaction& t, int64_t key) {
  AddOp(t, v1::Operation::LIST_READ, key);
  return t;
}

v1::Transaction Writer(int64_t id, int64_t key) {
  v1::Transaction t = Txn(id);
  return Write(t, key);
}
v1::Transaction Appender(int64_t id, int64_t key) {
  v1::Transaction t = Txn(id);
  return Append(t, key);
}

v1::IngestBatch Batch(uint64_t seq, std::vector<v1::Transaction> txns, std::string stream = "s") {
  v1::IngestBatch b;
  b.set_stream(std::move(stream));
  b.set_seq(seq);
  for (v1::Transaction& t : txns) *b.add_txns() = std::move(t);
  return b;
}

std::vector<uint32_t> All(const v1::IngestBatch& b) {
  std::vector<uint32_t> out;
  for (int i = 0; i < b.txns_size(); ++i) out.push_back(static_cast<uint32_t>(i));
  return out;
}

// (index, reason) of each refusal.
std::vector<std::pair<uint32_t, v1::RefusalReason>> Refused(const ConflictRegistry::Decision& d) {
  std::vector<std::pair<uint32_t, v1::RefusalReason>> out;
  for (const v1::Refusal& r : d.refusals) out.emplace_back(r.index(), r.reason());
  return out;
}

using Refusals = std::vector<std::pair<uint32_t, v1::RefusalReason>>;

ConflictRegistry::Decision DecideAll(ConflictRegistry& r, const v1::IngestBatch& b) {
  return r.Decide(b, All(b));
}

// --- keys --------------------------------------------------------------------------------------

TEST(ConflictRegistryTest, RegisterThenListInALaterBatchIsRefused) {
  ConflictRegistry r;
  ConflictRegistry::Decision d = DecideAll(r, Batch(1, {Writer(1, 7)}));
  EXPECT_TRUE(d.refusals.empty());
  EXPECT_EQ(d.kept, (std::vector<uint32_t>{0}));
  // Another stream: keys are shared.
  d = DecideAll(r, Batch(1, {Appender(2, 7), Appender(3, 8)}, "other"));
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT}}));
  EXPECT_EQ(d.kept, (std::vector<uint32_t>{1}));
  ASSERT_EQ(d.refusals.size(), 1u);
  EXPECT_EQ(d.refusals[0].seq(), 1u);
  EXPECT_EQ(d.refusals[0].txn_id(), "2");
  EXPECT_NE(d.refusals[0].detail().find("key 7 is a register"), std::string::npos)
      << d.refusals[0].detail();
  // Key 8 is a list now: a write to it is refused, a list read is not.
  v1::Transaction list_reader = Txn(5);
  d = DecideAll(r, Batch(2, {Writer(4, 8), ListRead(list_reader, 8)}, "other"));
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT}}));
  EXPECT_NE(d.refusals[0].detail().find("key 8 is a list"), std::string::npos)
      << d.refusals[0].detail();
  EXPECT_EQ(r.keys(), 2u);
}

TEST(ConflictRegistryTest, ConflictWithinABatchRefusesTheLaterTransaction) {
  ConflictRegistry r;
  v1::Transaction reader = Txn(3);
  const ConflictRegistry::Decision d =
      DecideAll(r, Batch(1, {Appender(1, 7), Writer(2, 7), Read(reader, 7, 1), Appender(4, 7)}));
  EXPECT_EQ(Refused(d), (Refusals{{1, v1::KEY_KIND_CONFLICT}, {2, v1::KEY_KIND_CONFLICT}}));
  EXPECT_EQ(d.kept, (std::vector<uint32_t>{0, 3}));
}

TEST(ConflictRegistryTest, TransactionUsingAKeyBothWaysIsRefusedAndMarksNothing) {
  ConflictRegistry r;
  v1::Transaction both = Txn(1);
  Write(both, 5);  // key 5 first, so that a partial mark would show
  Write(both, 7);
  Append(both, 7);
  const ConflictRegistry::Decision d = DecideAll(r, Batch(1, {both, Appender(2, 5)}));
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT}}));
  EXPECT_NE(d.refusals[0].detail().find("ops[2]"), std::string::npos) << d.refusals[0].detail();
  // The refused transaction left key 5 unmarked: the append to it is kept, and so is an append
  // to key 7.
  EXPECT_EQ(d.kept, (std::vector<uint32_t>{1}));
  EXPECT_TRUE(DecideAll(r, Batch(2, {Appender(3, 7)})).refusals.empty());
}

TEST(ConflictRegistryTest, ReadsOfNothingFollowTheKeysKind) {
  ConflictRegistry r;
  // A read of nothing marks nothing: the key can still become either.
  v1::Transaction t1 = Txn(1);
  v1::Transaction t3 = Txn(3);
  v1::Transaction t5 = Txn(5);
  v1::Transaction t6 = Txn(6);
  ConflictRegistry::Decision d =
      DecideAll(r, Batch(1, {ReadNothing(t1, 7), Appender(2, 7), ReadNothing(t3, 7), Writer(4, 8),
                             ReadNothing(t5, 8), Read(t6, 7, 1)}));
  // A read of a value from a list is a read of a register.
  EXPECT_EQ(Refused(d), (Refusals{{5, v1::KEY_KIND_CONFLICT}}));
  // Unknown reads too.
  v1::Transaction unknown = Txn(7);
  AddOp(unknown, v1::Operation::READ, 7)->set_unknown(true);
  AddOp(unknown, v1::Operation::LIST_READ, 8)->set_unknown(true);
  EXPECT_TRUE(DecideAll(r, Batch(2, {unknown})).refusals.empty());
}

TEST(ConflictRegistryTest, IntAndBytesKeysAreDifferentKeys) {
  ConflictRegistry r;
  v1::Transaction bytes_writer = Txn(1);
  v1::Operation* op = bytes_writer.add_ops();
  op->set_kind(v1::Operation::WRITE);
  op->mutable_key()->set_bytes("7");
  op->mutable_value()->set_int_(1);
  v1::Transaction bytes_appender = Txn(3);
  op = bytes_appender.add_ops();
  op->set_kind(v1::Operation::APPEND);
  op->mutable_key()->set_bytes(std::string("\x07\xff", 2));
  op->mutable_value()->set_int_(1);
  EXPECT_TRUE(
      DecideAll(r, Batch(1, {bytes_writer, Appender(2, 7), bytes_appender})).refusals.empty());
  v1::Transaction again = Txn(4);
  op = again.add_ops();
  op->set_kind(v1::Operation::APPEND);
  op->mutable_key()->set_bytes("7");
  op->mutable_value()->set_int_(1);
  const ConflictRegistry::Decision d = DecideAll(r, Batch(2, {again}));
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT}}));
  EXPECT_NE(d.refusals[0].detail().find("key \"7\""), std::string::npos) << d.refusals[0].detail();
  EXPECT_EQ(r.keys(), 3u);
}

// --- data model and initial state ----------------------------------------------------------------

TEST(ConflictRegistryTest, FirstBatchFixesTheDataModel) {
  {
    ConflictRegistry r;  // mixed by default
    v1::IngestBatch first = Batch(1, {Appender(1, 7)});
    (*first.mutable_header()->mutable_metadata())["data_model"] = "kv";
    const ConflictRegistry::Decision d = DecideAll(r, first);
    EXPECT_EQ(r.model(), DataModel::kKeyValue);
    EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT}}));
    EXPECT_NE(d.refusals[0].detail().find("\"kv\""), std::string::npos);
    // A later header does not change it.
    v1::IngestBatch later = Batch(2, {Appender(2, 8)});
    (*later.mutable_header()->mutable_metadata())["data_model"] = "list";
    EXPECT_EQ(DecideAll(r, later).refusals.size(), 1u);
    EXPECT_EQ(r.model(), DataModel::kKeyValue);
  }
  {
    // "list": a read of nothing is a read of the empty list, so a key written to cannot be read
    // empty.
    ConflictRegistry r(DataModel::kList);
    v1::Transaction t2 = Txn(2);
    const ConflictRegistry::Decision d = DecideAll(r, Batch(1, {Writer(1, 7), ReadNothing(t2, 7)}));
    EXPECT_EQ(Refused(d), (Refusals{{1, v1::KEY_KIND_CONFLICT}}));
  }
  {
    // The first batch has no header: the default stays, whatever later headers say.
    ConflictRegistry r(DataModel::kMixed);
    DecideAll(r, Batch(1, {}));
    v1::IngestBatch later = Batch(2, {Appender(1, 7)});
    (*later.mutable_header()->mutable_metadata())["data_model"] = "kv";
    EXPECT_TRUE(DecideAll(r, later).refusals.empty());
    EXPECT_EQ(r.model(), DataModel::kMixed);
  }
}

// Under "kv" a register mark decides nothing, so the registry keeps no entry for register keys
// (a stream of new keys does not grow it), and decides as before: a list operation is refused,
// and so is a read of nothing of an initial list.
TEST(ConflictRegistryTest, KeyValueModelKeepsNoEntryForRegisters) {
  ConflictRegistry r(DataModel::kKeyValue);
  v1::IngestBatch first = Batch(1, {});
  first.mutable_header()->mutable_initial()->add_lists()->mutable_key()->set_int_(9);
  first.mutable_header()->mutable_initial()->add_registers()->mutable_key()->set_int_(8);
  EXPECT_TRUE(DecideAll(r, first).refusals.empty());
  EXPECT_EQ(r.keys(), 1u);  // the initial list
  std::vector<v1::Transaction> txns;
  for (int64_t k = 0; k < 100; ++k) {
    v1::Transaction t = Writer(10 + k, 1000 + k);
    Read(t, 2000 + k, 1);
    txns.push_back(std::move(t));
  }
  EXPECT_TRUE(DecideAll(r, Batch(2, std::move(txns))).refusals.empty());
  EXPECT_EQ(r.keys(), 1u);
  v1::Transaction read_list = Txn(200);
  ReadNothing(read_list, 9);
  v1::Transaction read_register = Txn(201);
  ReadNothing(read_register, 1000);
  const ConflictRegistry::Decision d =
      DecideAll(r, Batch(3, {Appender(202, 1000), std::move(read_list), std::move(read_register),
                             Appender(203, 8)}));
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT},
                                  {1, v1::KEY_KIND_CONFLICT},
                                  {3, v1::KEY_KIND_CONFLICT}}));
  // Under "mixed" every key kept has an entry.
  ConflictRegistry mixed(DataModel::kMixed);
  EXPECT_TRUE(DecideAll(mixed, Batch(1, {Writer(1, 1), Writer(2, 2)})).refusals.empty());
  EXPECT_EQ(mixed.keys(), 2u);
}

TEST(ConflictRegistryTest, InitialStateCountsUntilTheFirstTransactionIsKept) {
  ConflictRegistry r;
  v1::IngestBatch first = Batch(1, {Appender(1, 7), Writer(2, 8)});
  v1::InitialState* initial = first.mutable_header()->mutable_initial();
  v1::InitialState::Register* reg = initial->add_registers();
  reg->mutable_key()->set_int_(7);
  reg->mutable_value()->set_int_(0);
  initial->add_lists()->mutable_key()->set_int_(8);
  ConflictRegistry::Decision d = DecideAll(r, first);
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT}, {1, v1::KEY_KIND_CONFLICT}}));
  // No transaction kept yet: this header counts too.
  v1::IngestBatch second = Batch(2, {Writer(3, 9)});
  second.mutable_header()->mutable_initial()->add_lists()->mutable_key()->set_int_(9);
  d = DecideAll(r, second);
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::KEY_KIND_CONFLICT}}));
  EXPECT_TRUE(DecideAll(r, Batch(3, {Writer(4, 7)})).refusals.empty());
  // Now one was kept: later headers are ignored.
  v1::IngestBatch late = Batch(4, {Writer(5, 10)});
  late.mutable_header()->mutable_initial()->add_lists()->mutable_key()->set_int_(10);
  EXPECT_TRUE(DecideAll(r, late).refusals.empty());
}

// --- sessions ----------------------------------------------------------------------------------

TEST(ConflictRegistryTest, SessionMixingNumberedAndUnnumberedTransactionsIsRefused) {
  ConflictRegistry r;
  v1::Transaction numbered = Writer(1, 1);
  numbered.set_session_str("7");
  numbered.set_seq(0);
  v1::Transaction unnumbered = Writer(2, 2);
  unnumbered.set_session_int(7);  // the same session as "7"
  v1::Transaction next = Writer(3, 3);
  next.set_session_str("7");
  next.set_seq(1);
  ConflictRegistry::Decision d = DecideAll(r, Batch(1, {numbered, unnumbered, next}));
  EXPECT_EQ(Refused(d), (Refusals{{1, v1::SESSION_SEQ_CONFLICT}}));
  EXPECT_NE(d.refusals[0].detail().find("session \"7\""), std::string::npos)
      << d.refusals[0].detail();
  // The refused transaction's key stayed unmarked.
  EXPECT_TRUE(DecideAll(r, Batch(2, {Appender(4, 2)})).refusals.empty());

  // The other way round, on another stream, and with sessions without a name.
  v1::Transaction a = Writer(5, 5);
  a.clear_session();
  v1::Transaction b = Writer(6, 6);
  b.set_session_str("");
  b.set_seq(3);
  d = DecideAll(r, Batch(1, {a, b}, "other"));
  EXPECT_EQ(Refused(d), (Refusals{{1, v1::SESSION_SEQ_CONFLICT}}));
  EXPECT_EQ(r.sessions(), 3u);  // "7", "" and transaction 4's
}

TEST(ConflictRegistryTest, SessionPositionOutOfRangeIsRefused) {
  ConflictRegistry r;
  v1::Transaction t = Writer(1, 1);
  t.set_seq(kMaxSessionSeq + 1);
  const ConflictRegistry::Decision d = DecideAll(r, Batch(1, {t}));
  EXPECT_EQ(Refused(d), (Refusals{{0, v1::MALFORMED_TRANSACTION}}));
  EXPECT_EQ(r.sessions(), 0u);
}

// --- batches -----------------------------------------------------------------------------------

TEST(ConflictRegistryTest, OnlyTheAcceptedTransactionsAreDecided) {
  ConflictRegistry r;
  const v1::IngestBatch b = Batch(1, {Writer(1, 7), Appender(2, 7), Appender(3, 8)});
  const std::vector<uint32_t> accepted = {1, 2, 9};  // 9 is out of range
  const ConflictRegistry::Decision d = r.Decide(b, accepted);
  EXPECT_TRUE(d.refusals.empty());
  EXPECT_EQ(d.kept, (std::vector<uint32_t>{1, 2}));
}

TEST(ConflictRegistryTest, UndoTakesBackTheLastBatch) {
  ConflictRegistry r;
  EXPECT_TRUE(DecideAll(r, Batch(1, {Writer(1, 7)})).refusals.empty());
  v1::IngestBatch second = Batch(2, {Appender(2, 8), Writer(3, 9)});
  v1::InitialState* initial = second.mutable_header()->mutable_initial();
  initial->add_lists()->mutable_key()->set_int_(7);  // ignored: a transaction was kept
  EXPECT_TRUE(DecideAll(r, second).refusals.empty());
  EXPECT_EQ(r.keys(), 3u);
  EXPECT_EQ(r.sessions(), 3u);
  r.Undo();
  EXPECT_EQ(r.keys(), 1u);
  EXPECT_EQ(r.sessions(), 1u);
  r.Undo();  // only once
  EXPECT_EQ(r.keys(), 1u);
  // The other way round now: keys 8 and 9 are free.
  const ConflictRegistry::Decision d = DecideAll(r, Batch(2, {Writer(2, 8), Appender(3, 9)}));
  EXPECT_TRUE(d.refusals.empty());

  // Undoing the first batch forgets the data model too.
  ConflictRegistry fresh;
  v1::IngestBatch kv = Batch(1, {Writer(1, 1)});
  (*kv.mutable_header()->mutable_metadata())["data_model"] = "kv";
  DecideAll(fresh, kv);
  fresh.Undo();
  EXPECT_EQ(fresh.model(), DataModel::kMixed);
  EXPECT_TRUE(DecideAll(fresh, Batch(1, {Appender(1, 1)})).refusals.empty());
}

// The registry and the live history agree: every transaction the registry keeps, the history
// takes, and the registry refuses what the history refuses.
TEST(ConflictRegistryTest, AgreesWithTheLiveHistory) {
  std::vector<v1::Transaction> txns;
  int64_t id = 0;
  // Every pair of operation kinds on one key, in one transaction and in two.
  auto op_kinds = std::vector<v1::Transaction& (*)(v1::Transaction&, int64_t)>{
      [](v1::Transaction& t, int64_t k) -> v1::Transaction& { return Write(t, k); },
      [](v1::Transaction& t, int64_t k) -> v1::Transaction& { return Read(t, k, 1); },
      [](v1::Transaction& t, int64_t k) -> v1::Transaction& { return ReadNothing(t, k); },
      [](v1::Transaction& t, int64_t k) -> v1::Transaction& { return Append(t, k); },
      [](v1::Transaction& t, int64_t k) -> v1::Transaction& { return ListRead(t, k); },
  };
  int64_t key = 100;
  for (auto first : op_kinds) {
    for (auto second : op_kinds) {
      ++key;
      v1::Transaction one = Txn(++id);
      first(one, key);
      second(one, key);
      txns.push_back(one);
      ++key;
      v1::Transaction a = Txn(++id);
      v1::Transaction b = Txn(++id);
      txns.push_back(first(a, key));
      txns.push_back(second(b, key));
    }
  }
  for (const DataModel model : {DataModel::kMixed, DataModel::kList, DataModel::kKeyValue}) {
    SCOPED_TRACE(history::DataModelName(model));
    ConflictRegistry registry(model);
    const v1::IngestBatch batch = Batch(1, txns);
    const ConflictRegistry::Decision d = DecideAll(registry, batch);
    history::HistoryBuilder builder;
    builder.StartLive(model);
    formats::ProtoDecoder decoder(builder);
    std::vector<uint32_t> taken;
    for (int i = 0; i < batch.txns_size(); ++i) {
      if (decoder.ApplyTxn(batch.txns(i), 0).ok()) taken.push_back(static_cast<uint32_t>(i));
    }
    EXPECT_EQ(d.kept, taken);
    EXPECT_FALSE(d.refusals.empty());
  }
}

}  // namespace
}  // namespace isowatch::ingest
