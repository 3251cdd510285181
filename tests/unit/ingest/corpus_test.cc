// SPDX-License-Identifier: Apache-2.0
//
// The seed corpus of tests/fuzz/ingest_batch_fuzz.cc is made here: each seed is built in code and
// must equal its checked-in file, so the corpus cannot drift from the protocol unnoticed. To write
// the files again after a change of the seeds:
//   ISOWATCH_UPDATE_CORPUS=1 build/dev/bin/ingest_validate_test --gtest_filter='IngestCorpus*'
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/ingest/conflict_registry.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/validate.h"

#include "tests/testing/source_dir.h"
#include "tests/unit/ingest/txn_builder.h"

namespace isowatch::ingest {
namespace {

using testing::WriteBatch;
using testing::WriteTxn;

std::vector<std::pair<std::string, v1::IngestBatch>> Seeds() {
  std::vector<std::pair<std::string, v1::IngestBatch>> seeds;

  v1::IngestBatch valid = WriteBatch("pg-main", 1, 1, 3);
  v1::Header* header = valid.mutable_header();
  header->set_version(1);
  header->mutable_initial()->mutable_default_value()->set_int_(0);
  auto* reg = header->mutable_initial()->add_registers();
  reg->mutable_key()->set_int_(2);
  reg->mutable_value()->set_int_(7);
  auto* list = header->mutable_initial()->add_lists();
  list->mutable_key()->set_bytes("l");
  list->add_elements()->set_int_(1);
  (*header->mutable_metadata())["producer"] = "isowatch";
  valid.mutable_watermark()->set_physical(3);
  seeds.emplace_back("valid_with_header.bin", valid);

  v1::IngestBatch end;
  end.set_stream("pg-main");
  end.set_seq(2);
  end.set_end_of_stream(true);
  end.mutable_watermark()->set_physical(1000);
  seeds.emplace_back("end_of_stream.bin", end);

  v1::IngestBatch mixed;
  mixed.set_stream("yb/tablet-3");
  mixed.set_seq(7);
  v1::Transaction t;
  t.set_id_str("a");
  t.set_session_str("s");
  t.set_status(v1::Transaction::COMMITTED);
  t.mutable_start()->set_physical(5);
  t.mutable_start()->set_logical(1);
  t.mutable_commit()->set_physical(5);
  t.mutable_commit()->set_logical(2);
  v1::Operation* op = t.add_ops();
  op->set_kind(v1::Operation::APPEND);
  op->mutable_key()->set_bytes("k");
  op->mutable_value()->set_bytes("v");
  op = t.add_ops();
  op->set_kind(v1::Operation::LIST_READ);
  op->mutable_key()->set_bytes("k");
  op->mutable_list()->add_elements()->set_bytes("v");
  op = t.add_ops();
  op->set_kind(v1::Operation::READ);
  op->mutable_key()->set_int_(1);
  op->set_unknown(true);
  *mixed.add_txns() = t;
  v1::Transaction aborted = t;
  aborted.set_id_str("b");
  aborted.set_status(v1::Transaction::ABORTED);
  aborted.clear_commit();
  *mixed.add_txns() = aborted;
  *mixed.add_txns() = t;  // the same again: a duplicate
  seeds.emplace_back("hybrid_lists_strings.bin", mixed);

  v1::IngestBatch bad = WriteBatch("s", 3, 1, 14);
  bad.mutable_txns(0)->clear_id_int();
  bad.mutable_txns(1)->clear_commit();
  bad.mutable_txns(2)->mutable_start()->set_physical(100);
  bad.mutable_txns(3)->mutable_ops(0)->set_kind(v1::Operation::KIND_UNSPECIFIED);
  bad.mutable_txns(4)->mutable_ops(0)->clear_key();
  bad.mutable_txns(5)->mutable_ops(0)->clear_value();
  bad.mutable_txns(6)->mutable_ops(0)->mutable_list()->add_elements();
  bad.mutable_txns(7)->set_status(static_cast<v1::Transaction::Status>(9));
  bad.mutable_txns(8)->mutable_ops(0)->set_unknown(true);
  bad.mutable_txns(9)->set_stream("elsewhere");
  for (int i = 0; i < 70; ++i) *bad.mutable_txns(10)->add_ops() = bad.txns(10).ops(0);
  bad.mutable_txns(11)->set_seq(-3);
  *bad.mutable_txns(12) = WriteTxn(12, 11, 12, 0, 999);
  *bad.mutable_txns(13) = bad.txns(12);  // the same id with other content
  bad.mutable_txns(13)->mutable_ops(0)->mutable_value()->set_int_(1000);
  seeds.emplace_back("every_refusal.bin", bad);

  v1::IngestBatch bad_header = WriteBatch("s", 1, 1, 1);
  bad_header.mutable_header()->set_version(3);
  bad_header.mutable_header()->mutable_initial()->add_registers();
  seeds.emplace_back("bad_header.bin", bad_header);

  seeds.emplace_back("too_many_txns.bin", WriteBatch("s", 1, 1, 257));

  // PostgreSQL: xids, snapshots in place of starts, commit LSNs; the last snapshot is malformed.
  v1::IngestBatch pg = WriteBatch("pg-snapshots", 1, 1, 3);
  for (int i = 0; i < 3; ++i) {
    v1::Transaction* txn = pg.mutable_txns(i);
    txn->clear_start();
    txn->set_xid(1000 + static_cast<uint64_t>(i));
    v1::Snapshot* snap = txn->mutable_snapshot();
    snap->set_xmin(999);
    snap->set_xmax(1000 + static_cast<uint64_t>(i));
    if (i > 0) snap->add_xip(999);
  }
  pg.mutable_txns(2)->mutable_snapshot()->add_xip(5000);
  pg.mutable_watermark()->set_physical(3);
  seeds.emplace_back("postgres_snapshots.bin", pg);

  // What the live history could not take (ConflictRegistry): key 1 written, then appended to;
  // key 3 written and appended to by one transaction; session 1 without seqs, then with one.
  v1::IngestBatch conflicts = WriteBatch("s", 1, 1, 4);
  conflicts.mutable_txns(1)->mutable_ops(0)->set_kind(v1::Operation::APPEND);
  conflicts.mutable_txns(1)->mutable_ops(0)->mutable_key()->set_int_(1);
  *conflicts.mutable_txns(2)->add_ops() = conflicts.txns(1).ops(0);
  conflicts.mutable_txns(2)->mutable_ops(1)->mutable_key()->set_int_(3);
  conflicts.mutable_txns(3)->set_seq(0);
  seeds.emplace_back("history_conflicts.bin", conflicts);
  return seeds;
}

std::filesystem::path CorpusDir() {
  return std::filesystem::path(isowatch::testing::SourceDir()) /
         "tests/fuzz/corpus/ingest_batch_fuzz";
}

TEST(IngestCorpus, SeedsMatchTheCheckedInFiles) {
  const bool update = std::getenv("ISOWATCH_UPDATE_CORPUS") != nullptr;
  for (const auto& [name, batch] : Seeds()) {
    std::string wire;
    ASSERT_TRUE(batch.SerializeToString(&wire)) << name;
    const std::filesystem::path path = CorpusDir() / name;
    if (update) {
      std::filesystem::create_directories(CorpusDir());
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << wire;
      ASSERT_TRUE(out.good()) << path;
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in.good()) << path << " is missing (see the top of " << __FILE__ << ")";
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(file, wire) << path << " differs from its seed (see the top of " << __FILE__ << ")";
  }
}

// The seeds reach what they are meant to: the fuzzer starts from every outcome of the validation
// and of the conflict registry after it.
TEST(IngestCorpus, SeedsCoverEveryTransactionRefusal) {
  ValidationLimits limits;  // as in ingest_batch_fuzz.cc
  limits.max_batch_txns = 256;
  limits.max_batch_bytes = 1 << 16;
  limits.max_ops_per_txn = 64;
  std::vector<bool> seen(kRefusalReasonCount);
  for (const auto& [name, batch] : Seeds()) {
    MemoryIdRegistry registry;
    BatchValidation v = ValidateBatch(batch, limits, registry);
    for (const v1::Refusal& r : v.refusals) seen[r.reason()] = true;
    ConflictRegistry conflicts;
    for (const v1::Refusal& r : conflicts.Decide(batch, v.accepted).refusals) {
      seen[r.reason()] = true;
    }
    if (name == "valid_with_header.bin") {
      EXPECT_EQ(v.accepted.size(), 3u);
    }
    if (name == "hybrid_lists_strings.bin") {
      EXPECT_EQ(v.duplicates, 1u);
    }
  }
  for (int r = 1; r < kRefusalReasonCount; ++r) {
    const auto reason = static_cast<v1::RefusalReason>(r);
    // Refusals of the service, not of the validator (ID_ON_OTHER_STREAM needs two streams).
    if (reason == v1::SEQUENCE_GAP || reason == v1::STREAM_CLOSED ||
        reason == v1::ID_ON_OTHER_STREAM) {
      continue;
    }
    EXPECT_TRUE(seen[r]) << RefusalReasonName(reason);
  }
}

}  // namespace
}  // namespace isowatch::ingest
