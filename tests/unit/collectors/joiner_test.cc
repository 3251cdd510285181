// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/joiner.h"

#include <gtest/gtest.h>

#include "collectors/postgres/workload.h"

namespace isowatch::pg {
namespace {

constexpr uint64_t kEpoch = uint64_t{3} << 32;
const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

JoinerOptions Options(history::DataModel data = history::DataModel::kKeyValue) {
  return JoinerOptions{.run = 2,
                       .message_prefix = "isowatch",
                       .table = data == history::DataModel::kList ? "isowatch_list" : "isowatch_kv",
                       .data = data,
                       .stream = "pg"};
}

// A client record of run 2: xid, session, seq, status and writes of (key, value).
ClientTxn Client(uint64_t xid, uint32_t session, uint64_t seq, v1::Transaction::Status status,
                 std::vector<std::pair<int, int64_t>> writes = {}) {
  ClientTxn c;
  c.txn.set_xid(xid);
  c.txn.set_session_str("r2s" + std::to_string(session));
  c.txn.set_seq(static_cast<int64_t>(seq));
  c.txn.set_status(status);
  c.txn.mutable_snapshot()->set_xmin(xid);
  c.txn.mutable_snapshot()->set_xmax(xid);
  for (auto [k, v] : writes) {
    v1::Operation* op = c.txn.add_ops();
    op->set_kind(v1::Operation::WRITE);
    op->mutable_key()->set_bytes("isowatch_kv/" + std::to_string(k));
    op->mutable_value()->set_int_(v);
  }
  c.tag = "2:" + std::to_string(session) + ":" + std::to_string(seq);
  c.txn.set_id_str(c.tag);
  return c;
}

DecodedTxn Decoded(uint64_t xid, Lsn commit, std::string tag,
                   std::vector<std::pair<int, std::string>> rows = {},
                   std::string table = "isowatch_kv") {
  DecodedTxn d;
  d.xid = static_cast<uint32_t>(xid);
  d.commit_lsn = commit;
  d.end_lsn = commit + 40;
  for (auto& [k, v] : rows) {
    DecodedChange c;
    c.kind = DecodedChange::Kind::kUpdate;
    c.schema = "public";
    c.table = table;
    c.column_names = {"k", "v"};
    c.values = {std::to_string(k), v};
    d.changes.push_back(std::move(c));
  }
  if (!tag.empty()) d.messages.push_back({.prefix = "isowatch", .content = std::move(tag)});
  return d;
}

TEST(JoinerTest, EmitsInCommitOrderOnceBothHalvesArrive) {
  Joiner j(Options());
  j.AddDecoded(Decoded(kEpoch + 11, 1000, "2:1:0", {{5, "77"}}));
  j.AddDecoded(Decoded(kEpoch + 10, 2000, "2:0:0"));
  // The second commit's client record came first: nothing before the first is joined.
  j.AddClient(Client(kEpoch + 10, 0, 0, v1::Transaction::COMMITTED));
  Joiner::Output o = j.Take(kT0);
  EXPECT_TRUE(o.txns.empty());
  EXPECT_FALSE(o.watermark.has_value());
  j.AddClient(Client(kEpoch + 11, 1, 0, v1::Transaction::COMMITTED, {{5, 77}}));
  o = j.Take(kT0);
  ASSERT_EQ(o.txns.size(), 2u);
  EXPECT_EQ(o.txns[0].xid(), kEpoch + 11);
  EXPECT_EQ(o.txns[0].commit().physical(), 1000);
  EXPECT_EQ(o.txns[1].xid(), kEpoch + 10);
  EXPECT_EQ(o.txns[1].commit().physical(), 2000);
  EXPECT_EQ(o.txns[1].stream(), "pg");
  ASSERT_TRUE(o.watermark.has_value());
  EXPECT_EQ(*o.watermark, 2000u);
  EXPECT_EQ(*o.handled_upto, 2040u);
  EXPECT_EQ(j.stats().joined, 2u);
  EXPECT_EQ(j.stats().write_mismatches, 0u);
  EXPECT_EQ(j.waiting_clients(), 0u);
}

TEST(JoinerTest, AbortedGoOutAtOnceWithoutCommit) {
  Joiner j(Options());
  j.AddClient(Client(kEpoch + 5, 0, 0, v1::Transaction::ABORTED, {{1, 9}}));
  Joiner::Output o = j.Take(kT0);
  ASSERT_EQ(o.txns.size(), 1u);
  EXPECT_EQ(o.txns[0].status(), v1::Transaction::ABORTED);
  EXPECT_FALSE(o.txns[0].has_commit());
  EXPECT_FALSE(o.watermark.has_value());
}

TEST(JoinerTest, UnknownOutcomeBecomesCommittedWhenDecoded) {
  Joiner j(Options());
  j.AddClient(Client(kEpoch + 7, 0, 0, v1::Transaction::UNKNOWN));
  EXPECT_TRUE(j.Take(kT0).txns.empty());
  j.AddDecoded(Decoded(kEpoch + 7, 500, "2:0:0"));
  Joiner::Output o = j.Take(kT0);
  ASSERT_EQ(o.txns.size(), 1u);
  EXPECT_EQ(o.txns[0].status(), v1::Transaction::COMMITTED);
}

TEST(JoinerTest, GivesUpOnInDoubtRecordsNeverDecodedButNotOnCommits) {
  Joiner j(Options());
  j.AddClient(Client(kEpoch + 7, 0, 0, v1::Transaction::UNKNOWN));
  j.AddClient(Client(kEpoch + 8, 1, 0, v1::Transaction::COMMITTED));
  j.GiveUpWaiting();
  Joiner::Output o = j.Take(kT0);
  ASSERT_EQ(o.txns.size(), 1u);
  EXPECT_EQ(o.txns[0].xid(), kEpoch + 7);
  EXPECT_EQ(o.txns[0].status(), v1::Transaction::UNKNOWN);
  EXPECT_EQ(j.stats().never_decoded, 1u);
  // The acknowledged commit still joins when decoding shows it.
  EXPECT_EQ(j.waiting_clients(), 1u);
  j.AddDecoded(Decoded(kEpoch + 8, 300, "2:1:0"));
  o = j.Take(kT0);
  ASSERT_EQ(o.txns.size(), 1u);
  EXPECT_EQ(o.txns[0].status(), v1::Transaction::COMMITTED);
}

TEST(JoinerTest, CountsWritesTheWalDoesNotShow) {
  Joiner j(Options());
  j.AddClient(Client(kEpoch + 3, 0, 0, v1::Transaction::COMMITTED, {{1, 10}, {2, 20}}));
  j.AddDecoded(Decoded(kEpoch + 3, 100, "2:0:0", {{1, "10"}, {2, "21"}}));
  EXPECT_EQ(j.Take(kT0).txns.size(), 1u);
  EXPECT_EQ(j.stats().write_mismatches, 1u);
}

TEST(JoinerTest, EarlierRunIsSentFromTheWalAlone) {
  Joiner j(Options(history::DataModel::kList));
  // A client record from this run sets the epoch used to widen decoded 32-bit xids.
  j.AddClient(Client(kEpoch + 100, 0, 0, v1::Transaction::ABORTED));
  j.AddDecoded(Decoded(kEpoch + 90, 700, "1:4:12", {{3, "{5,6,8}"}}, "isowatch_list"));
  Joiner::Output o = j.Take(kT0);
  ASSERT_EQ(o.txns.size(), 2u);
  const v1::Transaction& t = o.txns[1];
  EXPECT_EQ(t.xid(), kEpoch + 90);
  EXPECT_EQ(t.id_str(), "1:4:12");
  EXPECT_EQ(t.session_str(), "r1s4");
  EXPECT_EQ(t.seq(), 12);
  EXPECT_FALSE(t.has_snapshot());
  EXPECT_EQ(t.start().physical(), 700);  // its writes are versions at its commit
  ASSERT_EQ(t.ops_size(), 1);
  EXPECT_EQ(t.ops(0).kind(), v1::Operation::APPEND);
  EXPECT_EQ(t.ops(0).key().bytes(), "isowatch_list/3");
  EXPECT_EQ(t.ops(0).value().int_(), 8);
  EXPECT_EQ(j.stats().decoded_only, 1u);
}

TEST(JoinerTest, SkipsRedeliveredAndForeignTransactions) {
  Joiner j(Options());
  j.SkipUpto(1040);
  j.AddDecoded(Decoded(kEpoch + 1, 1000, "2:0:0"));  // ends at 1040: handled before
  j.AddDecoded(Decoded(kEpoch + 2, 1100, ""));       // not the workload's
  Joiner::Output o = j.Take(kT0);
  EXPECT_TRUE(o.txns.empty());
  ASSERT_TRUE(o.watermark.has_value());
  EXPECT_EQ(*o.watermark, 1100u);
  EXPECT_EQ(j.stats().redelivered, 1u);
  EXPECT_EQ(j.stats().foreign, 1u);
}

TEST(JoinerTest, CommitWithoutClientRecordGoesOutAfterTheTimeout) {
  Joiner j(Options());
  j.AddDecoded(Decoded(kEpoch + 11, 1000, "2:1:0", {{5, "77"}}));
  j.AddDecoded(Decoded(kEpoch + 12, 2000, "2:1:1"));
  j.AddClient(Client(kEpoch + 12, 1, 1, v1::Transaction::COMMITTED));
  EXPECT_TRUE(j.Take(kT0).txns.empty());
  EXPECT_TRUE(j.Take(kT0 + absl::Seconds(29)).txns.empty());
  Joiner::Output o = j.Take(kT0 + absl::Seconds(30));
  ASSERT_EQ(o.txns.size(), 2u);
  EXPECT_EQ(o.txns[0].xid(), kEpoch + 11);
  EXPECT_FALSE(o.txns[0].has_snapshot());
  ASSERT_EQ(o.txns[0].ops_size(), 1);
  EXPECT_EQ(o.txns[0].ops(0).value().int_(), 77);
  EXPECT_EQ(o.txns[1].xid(), kEpoch + 12);
  EXPECT_TRUE(o.txns[1].has_snapshot());
  EXPECT_EQ(j.stats().orphaned, 1u);
  EXPECT_EQ(j.stats().decoded_only, 0u);
  EXPECT_EQ(j.stats().joined, 1u);
}

TEST(JoinerTest, JoinsByTagWhenACrashHandsAnXidOutAgain) {
  Joiner j(Options());
  // Session 0's transaction had xid 40 when the server crashed; its outcome stayed unknown.
  j.AddClient(Client(kEpoch + 40, 0, 5, v1::Transaction::UNKNOWN));
  // After the restart session 1 got xid 40 again and committed.
  j.AddClient(Client(kEpoch + 40, 1, 9, v1::Transaction::COMMITTED, {{3, 30}}));
  j.AddDecoded(Decoded(kEpoch + 40, 900, "2:1:9", {{3, "30"}}));
  Joiner::Output o = j.Take(kT0);
  ASSERT_EQ(o.txns.size(), 1u);
  EXPECT_EQ(o.txns[0].id_str(), "2:1:9");
  EXPECT_EQ(o.txns[0].session_str(), "r2s1");
  EXPECT_EQ(j.stats().write_mismatches, 0u);
  EXPECT_EQ(j.waiting_clients(), 1u);  // the unknown one still waits for a commit
}

TEST(SnapshotTextTest, ParsesPgCurrentSnapshot) {
  absl::StatusOr<v1::Snapshot> s = ParseSnapshotText("100:104:100,102");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->xmin(), 100u);
  EXPECT_EQ(s->xmax(), 104u);
  ASSERT_EQ(s->xip_size(), 2);
  EXPECT_EQ(s->xip(1), 102u);
  s = ParseSnapshotText("7:7:");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->xip_size(), 0);
  EXPECT_FALSE(ParseSnapshotText("9:7:").ok());   // xmin above xmax
  EXPECT_FALSE(ParseSnapshotText("1:7:8").ok());  // xip outside [xmin, xmax)
  EXPECT_FALSE(ParseSnapshotText("1:7").ok());    // two fields
  EXPECT_FALSE(ParseSnapshotText("a:7:").ok());   // not a number
}

}  // namespace
}  // namespace isowatch::pg
