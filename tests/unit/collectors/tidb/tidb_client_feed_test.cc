// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/client_feed.h"
#include "collectors/tidb/client_source.h"
#include "collectors/tidb/joiner.h"
#include "tests/unit/collectors/tidb/describe_txns.h"

namespace isowatch::tidb {
namespace {

using testing::Describe;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::Transaction Client(const std::string& id, const std::string& session, int seq,
                       v1::Transaction::Status status, int64_t start, int64_t commit,
                       bool writes = true) {
  v1::Transaction t;
  t.set_id_str(id);
  t.set_session_str(session);
  t.set_seq(seq);
  t.set_status(status);
  t.mutable_start()->set_physical(start);
  if (commit != 0) t.mutable_commit()->set_physical(commit);
  v1::Operation* op = t.add_ops();
  op->set_kind(writes ? v1::Operation::WRITE : v1::Operation::READ);
  op->mutable_key()->set_int_(1);
  op->mutable_value()->set_int_(std::hash<std::string>()(id) % 1000 + 1);
  return t;
}

CdcTxn Rows(Tso commit, const v1::Transaction& writer) {
  RowChange row{
      .schema = "test",
      .table = "isowatch_kv",
      .op = RowOp::kUpdate,
      .commit_ts = commit,
      .key_columns = {"k"},
      .columns = {
          {"k", "1"}, {"v", std::to_string(writer.ops(0).value().int_())}, {"t", writer.id_str()}}};
  return CdcTxn{.commit_ts = commit, .rows = {std::move(row)}, .schema_changes = {}};
}

// A live source whose polls the test scripts.
class ScriptedSource : public ClientSource {
 public:
  const v1::Header& header() const override { return header_; }
  bool live() const override { return live_; }
  absl::Status Start(uint32_t /*run*/) override { return absl::OkStatus(); }
  absl::StatusOr<Polled> Poll() override {
    if (polls_.empty()) return Polled{.floor = floor_, .done = done_, .end_ts = end_ts_};
    Polled p = std::move(polls_.front());
    polls_.pop_front();
    floor_ = p.floor;
    done_ = p.done;
    end_ts_ = p.end_ts;
    return p;
  }
  void Stop() override {}

  void Add(std::vector<v1::Transaction> txns, Tso floor, bool done = false, Tso end_ts = 0) {
    polls_.push_back(
        Polled{.txns = std::move(txns), .floor = floor, .done = done, .end_ts = end_ts});
  }

  bool live_ = true;

 private:
  v1::Header header_;
  std::deque<Polled> polls_;
  Tso floor_ = 0;
  bool done_ = false;
  Tso end_ts_ = 0;
};

class TidbClientFeedTest : public ::testing::Test {
 protected:
  ScriptedSource source_;
  Joiner joiner_{JoinerOptions{.live = true}};
  ClientFeed feed_{source_, joiner_};
};

TEST_F(TidbClientFeedTest, RowsAheadOfTheirRecordWaitForTheClientsFloor) {
  const v1::Transaction a = Client("a", "s0", 0, v1::Transaction::COMMITTED, 10, 20);
  // The changefeed has a's rows and has resolved up to 100, but session s0 has not handed a
  // over yet: its floor is 5.
  source_.Add({}, 5);
  ASSERT_TRUE(feed_.Pump().ok());
  feed_.AddCdc(Rows(20, a));
  EXPECT_EQ(feed_.held(), 1u);
  const Tso r1 = feed_.ReleasePoint(100);
  EXPECT_EQ(r1, Tso{6});
  Joiner::Output out = joiner_.Take(r1);
  EXPECT_THAT(out.txns, IsEmpty());
  EXPECT_EQ(out.watermark, Tso{5});  // never past what the client may still hand over
  // a arrives; the session's floor moves to its start, then past it.
  source_.Add({a}, 10);
  ASSERT_TRUE(feed_.Pump().ok());
  EXPECT_THAT(joiner_.Take(feed_.ReleasePoint(100)).txns, IsEmpty());
  source_.Add({}, 30);
  ASSERT_TRUE(feed_.Pump().ok());
  const Tso r2 = feed_.ReleasePoint(100);
  EXPECT_EQ(r2, Tso{31});
  out = joiner_.Take(r2);
  EXPECT_THAT(Describe(out.txns), ElementsAre("a:COMMITTED@20"));
  EXPECT_EQ(out.watermark, Tso{30});
  EXPECT_EQ(joiner_.stats().joined, 1u);
  EXPECT_EQ(joiner_.stats().cdc_only, 0u);
  EXPECT_EQ(feed_.held(), 0u);
}

TEST_F(TidbClientFeedTest, AnUnknownOutcomeIsDecidedAtItsSessionsNextStart) {
  const v1::Transaction u = Client("u", "s0", 0, v1::Transaction::UNKNOWN, 10, 0);
  const v1::Transaction n = Client("n", "s0", 1, v1::Transaction::COMMITTED, 40, 0, false);
  const v1::Transaction v = Client("v", "s1", 0, v1::Transaction::UNKNOWN, 12, 0);
  source_.Add({u, v}, 12);
  ASSERT_TRUE(feed_.Pump().ok());
  feed_.AddCdc(Rows(15, u));
  // No horizon yet: u and v stay undecided, and the watermark below their starts.
  Joiner::Output out = joiner_.Take(feed_.ReleasePoint(1000));
  EXPECT_THAT(out.txns, IsEmpty());
  EXPECT_EQ(out.watermark, Tso{10});
  source_.Add({n}, 40);
  ASSERT_TRUE(feed_.Pump().ok());
  out = joiner_.Take(feed_.ReleasePoint(1000));
  EXPECT_THAT(Describe(out.txns), ElementsAre("n:COMMITTED@40", "u:COMMITTED@15"));
  EXPECT_EQ(out.watermark, Tso{12});
  // The workload ends: v, its session's last, is decided at the end ts (aborted: no rows).
  source_.Add({}, std::numeric_limits<Tso>::max(), /*done=*/true, /*end_ts=*/60);
  ASSERT_TRUE(feed_.Pump().ok());
  EXPECT_TRUE(feed_.done());
  out = joiner_.Take(feed_.ReleasePoint(61));
  EXPECT_THAT(Describe(out.txns), ElementsAre("v:ABORTED"));
  EXPECT_EQ(out.watermark, Tso{60});
  EXPECT_EQ(joiner_.waiting(), 0u);
}

TEST_F(TidbClientFeedTest, RowsOfNoRecordBelowTheFloorAreTheChangefeedsAlone) {
  source_.Add({}, 50);
  ASSERT_TRUE(feed_.Pump().ok());
  v1::Transaction other = Client("r0:0:0", "x", 0, v1::Transaction::COMMITTED, 1, 2);
  feed_.AddCdc(Rows(20, other));
  EXPECT_EQ(feed_.held(), 0u);
  EXPECT_THAT(Describe(joiner_.Take(feed_.ReleasePoint(30)).txns),
              ElementsAre("r0:0:0:COMMITTED@20"));
  EXPECT_EQ(joiner_.stats().cdc_only, 1u);
}

TEST(TidbClientFeedLogTest, AClientLogIsAllInAtTheFirstPumpAndGatesNothing) {
  ScriptedSource source;
  source.live_ = false;
  const v1::Transaction a = Client("a", "s0", 0, v1::Transaction::COMMITTED, 10, 20);
  source.Add({a}, std::numeric_limits<Tso>::max(), /*done=*/true);
  Joiner joiner(JoinerOptions{});
  ClientFeed feed(source, joiner);
  ASSERT_TRUE(feed.Pump().ok());
  EXPECT_TRUE(feed.done());
  EXPECT_EQ(feed.records(), 1u);
  feed.AddCdc(Rows(20, a));
  EXPECT_EQ(feed.held(), 0u);
  EXPECT_EQ(feed.ReleasePoint(21), Tso{21});
  EXPECT_THAT(Describe(joiner.Take(21).txns), ElementsAre("a:COMMITTED@20"));
}

TEST(TidbJoinerForgetTest, ALiveJoinerForgetsTheIdsOfOldRecords) {
  Joiner joiner(JoinerOptions{.live = true, .forget_after = 100});
  const v1::Transaction a = Client("a", "s0", 0, v1::Transaction::COMMITTED, 10, 20);
  ASSERT_TRUE(joiner.AddClient(a).ok());
  joiner.AddCdc(Rows(20, a));
  EXPECT_THAT(Describe(joiner.Take(21).txns), ElementsAre("a:COMMITTED@20"));
  // Remembered: a second commit of the same id is a split commit.
  joiner.AddCdc(Rows(50, a));
  EXPECT_THAT(joiner.Take(51).txns, IsEmpty());
  EXPECT_EQ(joiner.stats().split_commits, 1u);
  // Forgotten once the release point is 100 past it: the id may come again.
  EXPECT_THAT(joiner.Take(200).txns, IsEmpty());
  EXPECT_TRUE(joiner.AddClient(Client("a", "s0", 1, v1::Transaction::ABORTED, 210, 0)).ok());
}

}  // namespace
}  // namespace isowatch::tidb
