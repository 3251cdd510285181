// SPDX-License-Identifier: Apache-2.0
// LogicalStream against a real PostgreSQL 15 server (tests/testing/pg_cluster.h).
#include "collectors/postgres/replication.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/pg_cluster.h"

namespace isowatch::pg {
namespace {

using ::isowatch::testing::PgCluster;
using ::isowatch::testing::PgClusterOptions;
using ::isowatch::testing::PgSession;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Values = std::vector<std::optional<std::string>>;

// Long enough for a loaded machine; a test waits this long only when it is failing.
constexpr absl::Duration kWait = absl::Seconds(60);

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override { StartCluster({}); }

  void StartCluster(PgClusterOptions options) {
    absl::StatusOr<std::unique_ptr<PgCluster>> cluster = PgCluster::Start(std::move(options));
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    Reconnect();
  }

  void Reconnect() {
    absl::StatusOr<std::unique_ptr<PgSession>> session = PgSession::Connect(cluster_->dsn());
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
  }

  void Exec(const std::string& sql) {
    absl::Status status = session_->Exec(sql);
    ASSERT_TRUE(status.ok()) << status;
  }

  void CreateTables() {
    Exec("CREATE TABLE acct (id int PRIMARY KEY, bal bigint)");
    Exec("CREATE TABLE note (id int PRIMARY KEY, body text, n int)");
    Exec("ALTER TABLE note ALTER body SET STORAGE EXTERNAL");  // TOASTed, uncompressed
    Exec("CREATE TABLE unpublished (id int)");
  }

  ReplicationOptions Options() const {
    ReplicationOptions options;
    options.dsn = cluster_->dsn();
    options.slot = "isowatch_slot";
    options.publication = "isowatch_pub";
    options.tables = {"acct", "public.note"};
    return options;
  }

  std::unique_ptr<LogicalStream> Open() {
    absl::StatusOr<std::unique_ptr<LogicalStream>> stream = LogicalStream::Open(Options());
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? *std::move(stream) : nullptr;
  }

  // Commits `statements` in one transaction; returns its 32-bit xid.
  uint32_t Commit(const std::vector<std::string>& statements) {
    Exec("BEGIN");
    for (const std::string& s : statements) Exec(s);
    absl::StatusOr<std::string> xid = session_->QueryValue("SELECT pg_current_xact_id()");
    EXPECT_TRUE(xid.ok()) << xid.status();
    Exec("COMMIT");
    return xid.ok() ? static_cast<uint32_t>(std::stoull(*xid) & 0xffffffff) : 0;
  }

  static DecodedTxn NextTxn(LogicalStream& stream) {
    absl::StatusOr<std::optional<DecodedTxn>> txn = stream.Next(kWait);
    EXPECT_TRUE(txn.ok()) << txn.status();
    if (!txn.ok() || !txn->has_value()) {
      ADD_FAILURE() << "no transaction within " << kWait;
      return {};
    }
    return **txn;
  }

  std::unique_ptr<PgCluster> cluster_;
  std::unique_ptr<PgSession> session_;
};

TEST_F(ReplicationTest, DeliversCommittedTransactionsInCommitOrder) {
  CreateTables();
  std::unique_ptr<LogicalStream> stream = Open();
  ASSERT_NE(stream, nullptr);
  EXPECT_TRUE(stream->created_slot());
  EXPECT_GT(stream->confirmed_flush(), 0u);

  const uint32_t insert = Commit({"INSERT INTO acct VALUES (1, 100), (2, 200)"});
  const uint32_t update = Commit({"UPDATE acct SET bal = 150 WHERE id = 1"});
  const uint32_t del = Commit({"DELETE FROM acct WHERE id = 2"});
  const uint32_t message = Commit({"SELECT pg_logical_emit_message(true, 'isowatch', 'x')"});
  Exec("BEGIN");
  Exec("INSERT INTO acct VALUES (3, 300)");
  Exec("SELECT pg_logical_emit_message(true, 'isowatch', 'aborted')");
  Exec("ROLLBACK");
  const uint32_t mixed = Commit(
      {"INSERT INTO unpublished VALUES (1)", "INSERT INTO note VALUES (1, repeat('t', 10000), 0)"});
  const uint32_t toast = Commit({"UPDATE note SET n = 1 WHERE id = 1"});
  const uint32_t big = Commit({"INSERT INTO acct SELECT g, g FROM generate_series(10, 5009) g"});

  std::vector<DecodedTxn> txns;
  txns.reserve(7);
  for (int i = 0; i < 7; ++i) txns.push_back(NextTxn(*stream));
  ASSERT_EQ(txns.size(), 7u);
  std::vector<uint32_t> xids;
  xids.reserve(txns.size());
  for (size_t i = 0; i < txns.size(); ++i) {
    xids.push_back(txns[i].xid);
    EXPECT_GT(txns[i].end_lsn, txns[i].commit_lsn);
    EXPECT_GT(txns[i].commit_time_us, int64_t{1'600'000'000} * 1'000'000);
    if (i > 0) {
      EXPECT_GE(txns[i].commit_lsn, txns[i - 1].end_lsn);
    }
  }
  EXPECT_THAT(xids, ElementsAre(insert, update, del, message, mixed, toast, big));

  ASSERT_EQ(txns[0].changes.size(), 2u);
  EXPECT_EQ(txns[0].changes[0].kind, DecodedChange::Kind::kInsert);
  EXPECT_EQ(txns[0].changes[0].schema, "public");
  EXPECT_EQ(txns[0].changes[0].table, "acct");
  EXPECT_THAT(txns[0].changes[0].column_names, ElementsAre("id", "bal"));
  EXPECT_EQ(txns[0].changes[0].values, (Values{"1", "100"}));
  EXPECT_EQ(txns[0].changes[1].values, (Values{"2", "200"}));
  EXPECT_TRUE(txns[0].messages.empty());

  ASSERT_EQ(txns[1].changes.size(), 1u);
  EXPECT_EQ(txns[1].changes[0].kind, DecodedChange::Kind::kUpdate);
  EXPECT_EQ(txns[1].changes[0].values, (Values{"1", "150"}));

  ASSERT_EQ(txns[2].changes.size(), 1u);
  EXPECT_EQ(txns[2].changes[0].kind, DecodedChange::Kind::kDelete);
  EXPECT_EQ(txns[2].changes[0].values, (Values{"2", std::nullopt}));  // the key only

  EXPECT_TRUE(txns[3].changes.empty());
  ASSERT_EQ(txns[3].messages.size(), 1u);
  EXPECT_EQ(txns[3].messages[0].prefix, "isowatch");
  EXPECT_EQ(txns[3].messages[0].content, "x");

  ASSERT_EQ(txns[4].changes.size(), 1u);  // not the unpublished table's
  EXPECT_EQ(txns[4].changes[0].table, "note");
  EXPECT_EQ(txns[4].changes[0].values, (Values{"1", std::string(10000, 't'), "0"}));

  ASSERT_EQ(txns[5].changes.size(), 1u);
  EXPECT_EQ(txns[5].changes[0].values, (Values{"1", std::nullopt, "1"}));  // unchanged TOAST

  ASSERT_EQ(txns[6].changes.size(), 5000u);
  EXPECT_EQ(txns[6].changes[4999].values, (Values{"5009", "5009"}));
}

TEST_F(ReplicationTest, ReconnectResumesAfterTheConfirmedPosition) {
  CreateTables();
  std::unique_ptr<LogicalStream> stream = Open();
  ASSERT_NE(stream, nullptr);
  const uint32_t t1 = Commit({"INSERT INTO acct VALUES (1, 1)"});
  const uint32_t t2 = Commit({"INSERT INTO acct VALUES (2, 2)"});
  const uint32_t t3 = Commit({"INSERT INTO acct VALUES (3, 3)"});
  EXPECT_EQ(NextTxn(*stream).xid, t1);
  const DecodedTxn second = NextTxn(*stream);
  EXPECT_EQ(second.xid, t2);
  EXPECT_EQ(NextTxn(*stream).xid, t3);
  stream->Confirm(second.end_lsn);
  ASSERT_TRUE(stream->Close().ok());
  EXPECT_EQ(stream->reported_flush(), second.end_lsn);

  stream = Open();
  ASSERT_NE(stream, nullptr);
  EXPECT_FALSE(stream->created_slot());
  EXPECT_EQ(stream->confirmed_flush(), second.end_lsn);
  const uint32_t t4 = Commit({"DELETE FROM acct WHERE id = 1"});
  EXPECT_EQ(NextTxn(*stream).xid, t3);  // sent again: never confirmed
  EXPECT_EQ(NextTxn(*stream).xid, t4);
}

TEST_F(ReplicationTest, ServerRestartIsUnavailableAndANewStreamLosesNothing) {
  CreateTables();
  std::unique_ptr<LogicalStream> stream = Open();
  ASSERT_NE(stream, nullptr);
  std::vector<uint32_t> committed;
  committed.reserve(5);
  for (int i = 0; i < 3; ++i) {
    committed.push_back(Commit({fmt::format("INSERT INTO acct VALUES ({}, 0)", i)}));
  }
  // The caller's side of the contract: what it handled, up to which end_lsn.
  std::vector<uint32_t> handled;
  Lsn handled_end = 0;
  const auto handle = [&](const DecodedTxn& txn) {
    if (txn.end_lsn <= handled_end) return;  // sent again after a reconnect
    handled.push_back(txn.xid);
    handled_end = txn.end_lsn;
  };
  handle(NextTxn(*stream));
  stream->Confirm(handled_end);
  ASSERT_TRUE(stream->SendStatus().ok());

  ASSERT_TRUE(cluster_->Restart().ok());
  absl::Status error;
  for (int i = 0; i < 10 && error.ok(); ++i) {  // what was already buffered, then the error
    absl::StatusOr<std::optional<DecodedTxn>> txn = stream->Next(kWait);
    if (!txn.ok()) {
      error = txn.status();
    } else if (txn->has_value()) {
      handle(**txn);
    }
  }
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable) << error;
  EXPECT_EQ(stream->Next(absl::ZeroDuration()).status(), error);  // the stream stays broken

  Reconnect();
  for (int i = 3; i < 5; ++i) {
    committed.push_back(Commit({fmt::format("INSERT INTO acct VALUES ({}, 0)", i)}));
  }
  stream = Open();
  ASSERT_NE(stream, nullptr);
  EXPECT_LE(stream->confirmed_flush(), handled_end);
  while (handled.size() < committed.size() && !::testing::Test::HasFailure()) {
    handle(NextTxn(*stream));
  }
  EXPECT_EQ(handled, committed);
}

TEST_F(ReplicationTest, AnIdleSlotMovesPastWalItDoesNotPublish) {
  CreateTables();
  std::unique_ptr<LogicalStream> stream = Open();
  ASSERT_NE(stream, nullptr);
  const uint32_t t1 = Commit({"INSERT INTO acct VALUES (1, 1)"});
  const DecodedTxn first = NextTxn(*stream);
  EXPECT_EQ(first.xid, t1);
  stream->Confirm(first.end_lsn);
  Commit({"INSERT INTO unpublished SELECT generate_series(1, 1000)"});
  absl::StatusOr<std::string> wal_end = session_->QueryValue("SELECT pg_current_wal_lsn()");
  ASSERT_TRUE(wal_end.ok()) << wal_end.status();
  const Lsn target = *ParseLsn(*wal_end);
  ASSERT_GT(target, first.end_lsn);
  // Keepalives carry the server's position; the stream reports it once nothing is pending.
  const absl::Time deadline = absl::Now() + kWait;
  while (stream->reported_flush() < target && absl::Now() < deadline) {
    absl::StatusOr<std::optional<DecodedTxn>> txn = stream->Next(absl::Milliseconds(200));
    ASSERT_TRUE(txn.ok()) << txn.status();
    ASSERT_FALSE(txn->has_value()) << "an unpublished table's transaction was delivered";
  }
  EXPECT_GE(stream->reported_flush(), target);
  ASSERT_TRUE(stream->Close().ok());
  absl::StatusOr<std::string> confirmed = session_->QueryValue(
      "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'isowatch_slot'");
  ASSERT_TRUE(confirmed.ok()) << confirmed.status();
  EXPECT_GE(*ParseLsn(*confirmed), target);
}

TEST_F(ReplicationTest, DropSlotRemovesIt) {
  CreateTables();
  std::unique_ptr<LogicalStream> stream = Open();
  ASSERT_NE(stream, nullptr);
  const uint32_t t1 = Commit({"INSERT INTO acct VALUES (1, 1)"});
  EXPECT_EQ(NextTxn(*stream).xid, t1);
  ASSERT_TRUE(stream->DropSlot().ok());
  EXPECT_EQ(*session_->QueryValue("SELECT count(*) FROM pg_replication_slots"), "0");
  EXPECT_EQ(stream->Next(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);

  ReplicationOptions options = Options();
  options.drop_slot_on_close = true;
  absl::StatusOr<std::unique_ptr<LogicalStream>> dropped = LogicalStream::Open(options);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_TRUE((*dropped)->created_slot());
  EXPECT_EQ(*session_->QueryValue("SELECT count(*) FROM pg_replication_slots"), "1");
  dropped->reset();
  EXPECT_EQ(*session_->QueryValue("SELECT count(*) FROM pg_replication_slots"), "0");
}

TEST_F(ReplicationTest, MisconfigurationIsFailedPrecondition) {
  CreateTables();
  ReplicationOptions options = Options();
  options.tables.clear();
  absl::StatusOr<std::unique_ptr<LogicalStream>> stream = LogicalStream::Open(options);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kFailedPrecondition) << stream.status();
  EXPECT_THAT(stream.status().message(), HasSubstr("publication 'isowatch_pub' does not exist"));

  options = Options();
  options.tables = {"no_such_table"};
  stream = LogicalStream::Open(options);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kFailedPrecondition) << stream.status();
  EXPECT_THAT(stream.status().message(), HasSubstr("no_such_table"));

  Exec("SELECT pg_create_logical_replication_slot('isowatch_slot', 'test_decoding')");
  stream = LogicalStream::Open(Options());
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kFailedPrecondition) << stream.status();
  EXPECT_THAT(stream.status().message(), HasSubstr("plugin 'test_decoding'"));
  options = Options();
  options.drop_slot_on_close = true;  // not a slot it may use: left alone
  EXPECT_EQ(LogicalStream::Open(options).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*session_->QueryValue("SELECT plugin FROM pg_replication_slots"), "test_decoding");

  options = Options();
  options.slot = "Bad-Name";
  EXPECT_EQ(LogicalStream::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options();
  options.dsn = "host=127.0.0.1 port=1 connect_timeout=5";
  EXPECT_EQ(LogicalStream::Open(options).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ReplicationTest, WalLevelReplicaIsFailedPrecondition) {
  StartCluster({.settings = {"wal_level=replica"}});
  CreateTables();
  absl::StatusOr<std::unique_ptr<LogicalStream>> stream = LogicalStream::Open(Options());
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kFailedPrecondition) << stream.status();
  EXPECT_THAT(stream.status().message(), HasSubstr("wal_level = 'replica'"));
}

}  // namespace
}  // namespace isowatch::pg
