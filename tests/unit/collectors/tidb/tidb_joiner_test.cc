// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/joiner.h"
#include "tests/unit/collectors/tidb/describe_txns.h"

namespace isowatch::tidb {
namespace {

using testing::Describe;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A client record: id, session, seq, status, start, commit (0 = none), and ops
// ("r:k=v", "w:k=v", "a:k=v").
v1::Transaction Client(const std::string& id, int session, int seq, v1::Transaction::Status status,
                       int64_t start, int64_t commit, const std::vector<std::string>& ops) {
  v1::Transaction t;
  t.set_id_str(id);
  t.set_session_int(session);
  t.set_seq(seq);
  t.set_status(status);
  t.mutable_start()->set_physical(start);
  if (commit != 0) t.mutable_commit()->set_physical(commit);
  for (const std::string& s : ops) {
    v1::Operation* op = t.add_ops();
    const size_t eq = s.find('=');
    op->set_kind(s[0] == 'r'   ? v1::Operation::READ
                 : s[0] == 'w' ? v1::Operation::WRITE
                               : v1::Operation::APPEND);
    op->mutable_key()->set_int_(std::stoll(s.substr(2, eq - 2)));
    op->mutable_value()->set_int_(std::stoll(s.substr(eq + 1)));
  }
  return t;
}

RowChange Row(Tso commit, int64_t k, const std::string& v, const std::string& id,
              const std::string& table = "isowatch_kv") {
  return RowChange{.schema = "test",
                   .table = table,
                   .op = RowOp::kUpdate,
                   .commit_ts = commit,
                   .key_columns = {"k"},
                   .columns = {{"k", std::to_string(k)}, {"v", v}, {"t", id}}};
}

CdcTxn Cdc(Tso commit, std::vector<RowChange> rows) {
  return CdcTxn{.commit_ts = commit, .rows = std::move(rows), .schema_changes = {}};
}

class TidbJoinerTest : public ::testing::Test {
 protected:
  Joiner joiner_{JoinerOptions{}};
};

TEST_F(TidbJoinerTest, JoinsRowsToTheirClientRecordWithTheCdcCommitTs) {
  ASSERT_TRUE(joiner_
                  .AddClient(Client("a", 1, 0, v1::Transaction::COMMITTED, 10, 20,
                                    {"r:1=0", "w:1=5", "w:2=6"}))
                  .ok());
  joiner_.SealClients();
  Joiner::Output early = joiner_.Take(15);
  EXPECT_THAT(early.txns, IsEmpty());
  EXPECT_EQ(early.watermark, Tso{14});
  joiner_.AddCdc(Cdc(20, {Row(20, 2, "6", "a"), Row(20, 1, "5", "a")}));
  Joiner::Output out = joiner_.Take(21);
  EXPECT_THAT(Describe(out.txns), ElementsAre("a:COMMITTED@20"));
  EXPECT_EQ(out.txns[0].ops_size(), 3);  // the client's reads and writes
  EXPECT_EQ(out.txns[0].start().physical(), 10);
  EXPECT_EQ(out.watermark, Tso{20});
  EXPECT_EQ(joiner_.stats().joined, 1u);
  EXPECT_EQ(joiner_.stats().write_mismatches, 0u);
  EXPECT_EQ(joiner_.waiting(), 0u);
}

TEST_F(TidbJoinerTest, AbortedAndReadOnlyRecordsGoAtTheirPositions) {
  ASSERT_TRUE(
      joiner_.AddClient(Client("ab", 1, 0, v1::Transaction::ABORTED, 5, 0, {"w:1=1"})).ok());
  ASSERT_TRUE(
      joiner_.AddClient(Client("ro", 2, 0, v1::Transaction::COMMITTED, 30, 0, {"r:1=0"})).ok());
  joiner_.SealClients();
  EXPECT_THAT(Describe(joiner_.Take(6).txns), ElementsAre("ab:ABORTED"));
  EXPECT_THAT(joiner_.Take(30).txns, IsEmpty());
  // A read-only transaction commits at its snapshot.
  EXPECT_THAT(Describe(joiner_.Take(31).txns), ElementsAre("ro:COMMITTED@30"));
}

TEST_F(TidbJoinerTest, UnknownOutcomesAreDecidedAtTheirHorizonByTheRows) {
  // Session 1: u1 (unknown, committed after all), then n1 starting at 40: u1's horizon.
  // Session 2: u2 (unknown, never committed), then n2 starting at 50.
  ASSERT_TRUE(
      joiner_.AddClient(Client("u1", 1, 0, v1::Transaction::UNKNOWN, 10, 0, {"w:1=1"})).ok());
  ASSERT_TRUE(
      joiner_.AddClient(Client("n1", 1, 1, v1::Transaction::COMMITTED, 40, 0, {"r:1=1"})).ok());
  ASSERT_TRUE(
      joiner_.AddClient(Client("u2", 2, 0, v1::Transaction::UNKNOWN, 12, 0, {"w:2=2"})).ok());
  ASSERT_TRUE(
      joiner_.AddClient(Client("n2", 2, 1, v1::Transaction::COMMITTED, 50, 0, {"r:2=0"})).ok());
  joiner_.SealClients();
  joiner_.AddCdc(Cdc(15, {Row(15, 1, "1", "u1")}));
  Joiner::Output before = joiner_.Take(30);
  EXPECT_THAT(before.txns, IsEmpty());
  // Either may still commit above its start: the watermark stays below both.
  EXPECT_EQ(before.watermark, Tso{10});
  Joiner::Output mid = joiner_.Take(41);
  EXPECT_THAT(Describe(mid.txns), ElementsAre("n1:COMMITTED@40", "u1:COMMITTED@15"));
  EXPECT_EQ(mid.watermark, Tso{12});
  Joiner::Output after = joiner_.Take(51);
  EXPECT_THAT(Describe(after.txns), ElementsAre("n2:COMMITTED@50", "u2:ABORTED"));
  EXPECT_EQ(after.watermark, Tso{50});
  EXPECT_EQ(joiner_.stats().unknown_committed, 1u);
  EXPECT_EQ(joiner_.stats().unknown_aborted, 1u);
}

TEST_F(TidbJoinerTest, AnAcknowledgedCommitWithoutRowsIsSentUnknownAndCounted) {
  ASSERT_TRUE(
      joiner_.AddClient(Client("c", 1, 0, v1::Transaction::COMMITTED, 10, 20, {"w:1=1"})).ok());
  joiner_.SealClients();
  EXPECT_THAT(joiner_.Take(20).txns, IsEmpty());
  EXPECT_THAT(Describe(joiner_.Take(21).txns), ElementsAre("c:UNKNOWN@20"));
  EXPECT_EQ(joiner_.stats().missing_in_cdc, 1u);
}

TEST_F(TidbJoinerTest, CountsRowsThatDifferFromTheClientsWrites) {
  ASSERT_TRUE(
      joiner_.AddClient(Client("c", 1, 0, v1::Transaction::COMMITTED, 10, 20, {"w:1=1"})).ok());
  joiner_.SealClients();
  joiner_.AddCdc(Cdc(22, {Row(22, 1, "7", "c")}));
  EXPECT_THAT(Describe(joiner_.Take(23).txns), ElementsAre("c:COMMITTED@22"));
  EXPECT_EQ(joiner_.stats().write_mismatches, 1u);
  EXPECT_EQ(joiner_.stats().commit_ts_mismatches, 1u);
}

TEST_F(TidbJoinerTest, RowsOfNoClientRecordAreSentAsWritesAndOtherTablesSkipped) {
  joiner_.SealClients();
  joiner_.AddCdc(Cdc(8, {Row(8, 3, "9", "x"), Row(8, 1, "1", "y", "other")}));
  Joiner::Output out = joiner_.Take(9);
  ASSERT_THAT(Describe(out.txns), ElementsAre("x:COMMITTED@8"));
  EXPECT_EQ(out.txns[0].start().physical(), 8);
  ASSERT_EQ(out.txns[0].ops_size(), 1);
  EXPECT_EQ(out.txns[0].ops(0).kind(), v1::Operation::WRITE);
  EXPECT_EQ(joiner_.stats().cdc_only, 1u);
  EXPECT_EQ(joiner_.stats().foreign_rows, 1u);
  // The same id at a second commit ts is one transaction split in two: refused, counted.
  joiner_.AddCdc(Cdc(10, {Row(10, 3, "4", "x")}));
  EXPECT_THAT(joiner_.Take(11).txns, IsEmpty());
  EXPECT_EQ(joiner_.stats().split_commits, 1u);
}

TEST(TidbJoinerListTest, MatchesAppendsAgainstTheEndOfTheList) {
  Joiner joiner(JoinerOptions{.table = "isowatch_list", .data = history::DataModel::kList});
  ASSERT_TRUE(joiner
                  .AddClient(Client("l", 1, 0, v1::Transaction::COMMITTED, 10, 20,
                                    {"a:1=4", "a:1=5", "a:2=6"}))
                  .ok());
  ASSERT_TRUE(
      joiner.AddClient(Client("m", 2, 0, v1::Transaction::COMMITTED, 21, 30, {"a:1=8"})).ok());
  joiner.SealClients();
  joiner.AddCdc(
      Cdc(20, {Row(20, 1, "1,4,5", "l", "isowatch_list"), Row(20, 2, "6", "l", "isowatch_list")}));
  // m's row does not end with what m appended.
  joiner.AddCdc(Cdc(30, {Row(30, 1, "1,4,5,9", "m", "isowatch_list")}));
  EXPECT_THAT(Describe(joiner.Take(31).txns), ElementsAre("l:COMMITTED@20", "m:COMMITTED@30"));
  EXPECT_EQ(joiner.stats().joined, 2u);
  EXPECT_EQ(joiner.stats().write_mismatches, 1u);
}

// The client log of the restart tests: a committed record, an unknown outcome, a read-only one
// (session 1), an aborted and a committed one (session 2); with `more`, an unknown outcome decided
// by its successor's start (session 3) and a record with two rows (session 4).
void LoadRestartClients(Joiner& j, bool more) {
  ASSERT_TRUE(j.AddClient(Client("a", 1, 0, v1::Transaction::COMMITTED, 1, 5, {"w:1=1"})).ok());
  ASSERT_TRUE(j.AddClient(Client("b", 1, 1, v1::Transaction::UNKNOWN, 6, 0, {"w:1=2"})).ok());
  ASSERT_TRUE(j.AddClient(Client("c", 1, 2, v1::Transaction::COMMITTED, 12, 0, {"r:1=2"})).ok());
  ASSERT_TRUE(j.AddClient(Client("d", 2, 0, v1::Transaction::ABORTED, 3, 0, {"w:2=1"})).ok());
  ASSERT_TRUE(j.AddClient(Client("e", 2, 1, v1::Transaction::COMMITTED, 7, 15, {"w:2=3"})).ok());
  if (more) {
    ASSERT_TRUE(j.AddClient(Client("f", 3, 0, v1::Transaction::UNKNOWN, 2, 0, {"w:3=1"})).ok());
    ASSERT_TRUE(j.AddClient(Client("g", 3, 1, v1::Transaction::COMMITTED, 4, 8, {"w:3=2"})).ok());
    ASSERT_TRUE(
        j.AddClient(Client("h", 4, 0, v1::Transaction::COMMITTED, 9, 10, {"w:4=1", "w:5=1"})).ok());
  }
  j.SealClients();
}

// A restart reads the same client log and CDC again and skips what the first run made durable:
// together the two runs send each transaction once.
TEST(TidbJoinerRestartTest, ASecondRunSendsWhatTheFirstDidNotAndNothingTwice) {
  auto load = [](Joiner& j) { LoadRestartClients(j, /*more=*/false); };
  const std::vector<CdcTxn> cdc = {Cdc(5, {Row(5, 1, "1", "a")}), Cdc(9, {Row(9, 1, "2", "b")}),
                                   Cdc(15, {Row(15, 2, "3", "e")})};
  auto feed = [&](Joiner& j, Tso below) {
    for (const CdcTxn& t : cdc) {
      if (t.commit_ts < below) j.AddCdc(t);
    }
  };
  Joiner whole{JoinerOptions{}};
  load(whole);
  feed(whole, 100);
  const std::vector<std::string> all = Describe(whole.Take(100).txns);
  ASSERT_EQ(all.size(), 5u);
  for (Tso cut = 1; cut < 20; ++cut) {
    Joiner first{JoinerOptions{}};
    load(first);
    feed(first, cut);
    std::vector<v1::Transaction> sent = first.Take(cut).txns;
    Joiner second{JoinerOptions{}};
    load(second);
    second.SkipBelow(cut);
    feed(second, 100);
    for (v1::Transaction& t : second.Take(100).txns) sent.push_back(std::move(t));
    EXPECT_EQ(Describe(sent), all) << "restart at release point " << cut;
  }
}

// After a restart a Kafka input resumes past the rows below the durable watermark W (the offsets
// after the last watermark at or below W + 1): the records those rows joined were decided by the
// first run and are neither waited for nor counted missing.
TEST(TidbJoinerRestartTest, ASecondRunThatReadsTheCdcFromTheWatermarkOnMissesNothing) {
  auto load = [](Joiner& j) { LoadRestartClients(j, /*more=*/true); };
  const std::vector<CdcTxn> cdc = {Cdc(3, {Row(3, 3, "1", "f")}),
                                   Cdc(5, {Row(5, 1, "1", "a")}),
                                   Cdc(8, {Row(8, 3, "2", "g")}),
                                   Cdc(9, {Row(9, 1, "2", "b")}),
                                   Cdc(10, {Row(10, 4, "1", "h"), Row(10, 5, "1", "h")}),
                                   Cdc(15, {Row(15, 2, "3", "e")})};
  Joiner whole{JoinerOptions{}};
  load(whole);
  for (const CdcTxn& t : cdc) whole.AddCdc(t);
  const std::vector<std::string> all = Describe(whole.Take(100).txns);
  ASSERT_EQ(all.size(), 8u);
  for (Tso cut = 1; cut < 20; ++cut) {
    Joiner first{JoinerOptions{}};
    load(first);
    for (const CdcTxn& t : cdc) {
      if (t.commit_ts < cut) first.AddCdc(t);
    }
    Joiner::Output out = first.Take(cut);
    std::vector<v1::Transaction> sent = std::move(out.txns);
    const Tso resume = out.watermark.value_or(0) + 1;
    Joiner second{JoinerOptions{}};
    load(second);
    second.SkipBelow(cut);
    // What TiCDC sent again after a watermark comes first: one of h's two rows.
    if (resume > 10) second.AddCdc(Cdc(10, {Row(10, 4, "1", "h")}));
    for (const CdcTxn& t : cdc) {
      if (t.commit_ts >= resume) second.AddCdc(t);
    }
    for (v1::Transaction& t : second.Take(100).txns) sent.push_back(std::move(t));
    EXPECT_EQ(Describe(sent), all) << "restart at release point " << cut << ", CDC from " << resume;
    EXPECT_EQ(second.stats().missing_in_cdc, 0u) << "restart at release point " << cut;
    EXPECT_EQ(second.stats().write_mismatches, 0u) << "restart at release point " << cut;
  }
}

TEST(TidbJoinerClientTest, RefusesRecordsWithoutIdOrStartAndRepeatedIds) {
  Joiner joiner{JoinerOptions{}};
  v1::Transaction no_id = Client("x", 1, 0, v1::Transaction::COMMITTED, 1, 0, {});
  no_id.clear_id_str();
  EXPECT_EQ(joiner.AddClient(no_id).code(), absl::StatusCode::kInvalidArgument);
  v1::Transaction no_start = Client("x", 1, 0, v1::Transaction::COMMITTED, 1, 0, {});
  no_start.clear_start();
  EXPECT_EQ(joiner.AddClient(no_start).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(joiner.AddClient(Client("x", 1, 0, v1::Transaction::ABORTED, 1, 0, {})).ok());
  EXPECT_EQ(joiner.AddClient(Client("x", 1, 1, v1::Transaction::ABORTED, 2, 0, {})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(joiner.stats().duplicate_client_ids, 1u);
}

}  // namespace
}  // namespace isowatch::tidb
