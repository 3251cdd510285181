// SPDX-License-Identifier: Apache-2.0
#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/list_text.h"
#include "collectors/tidb/tidb_errors.h"
#include "collectors/tidb/timestamp_source.h"

namespace isowatch::tidb {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

// The classification table: every error the workload is meant to tell apart, by number.
struct Case {
  uint32_t code;
  ErrorKind kind;
};

class TidbErrorClassTest : public ::testing::TestWithParam<Case> {};

TEST_P(TidbErrorClassTest, ClassifiesByNumber) {
  const Case c = GetParam();
  const ErrorInfo info = ClassifyError(c.code);
  EXPECT_EQ(info.kind, c.kind) << c.code << " " << info.name;
  EXPECT_EQ(info.retryable(), c.kind != ErrorKind::kOther) << c.code;
  EXPECT_EQ(info.conflict(), c.kind == ErrorKind::kConflict) << c.code;
  if (c.kind != ErrorKind::kOther) {
    EXPECT_STRNE(info.name, "other") << c.code;
  }
}

INSTANTIATE_TEST_SUITE_P(
    TidbErrors, TidbErrorClassTest,
    ::testing::Values(
        // Concurrency conflicts: TiKV's and TiDB's write conflicts, pessimistic lock waits,
        // deadlocks, and the retry error of a commit that was rolled back.
        Case{9007, ErrorKind::kConflict}, Case{8005, ErrorKind::kConflict},
        Case{8002, ErrorKind::kConflict}, Case{8022, ErrorKind::kConflict},
        Case{1205, ErrorKind::kConflict}, Case{1213, ErrorKind::kConflict},
        Case{1020, ErrorKind::kConflict},
        // The cluster busy or changing: schema changes, GC, PD/TiKV timeouts, region errors.
        Case{8027, ErrorKind::kTransient}, Case{8028, ErrorKind::kTransient},
        Case{9001, ErrorKind::kTransient}, Case{9002, ErrorKind::kTransient},
        Case{9003, ErrorKind::kTransient}, Case{9004, ErrorKind::kTransient},
        Case{9005, ErrorKind::kTransient}, Case{9006, ErrorKind::kTransient},
        Case{9008, ErrorKind::kTransient},
        // The connection gone: the client library's numbers and a server shutting down.
        Case{2006, ErrorKind::kConnectionLost}, Case{2013, ErrorKind::kConnectionLost},
        Case{2002, ErrorKind::kConnectionLost}, Case{2003, ErrorKind::kConnectionLost},
        Case{2055, ErrorKind::kConnectionLost}, Case{1053, ErrorKind::kConnectionLost},
        Case{1927, ErrorKind::kConnectionLost}, Case{4031, ErrorKind::kConnectionLost},
        // Not retried: syntax, a missing table, duplicate key, too large, TiDB's catch-all.
        Case{1064, ErrorKind::kOther}, Case{1146, ErrorKind::kOther}, Case{1062, ErrorKind::kOther},
        Case{8004, ErrorKind::kOther}, Case{1105, ErrorKind::kOther}, Case{0, ErrorKind::kOther}));

TEST(TidbErrorsTest, NamesTheCommonOnes) {
  EXPECT_STREQ(ClassifyError(errc::kWriteConflict).name, "write conflict");
  EXPECT_STREQ(ClassifyError(errc::kDeadlock).name, "deadlock");
  EXPECT_STREQ(ClassifyError(errc::kLockWaitTimeout).name, "lock wait timeout");
  EXPECT_STREQ(ClassifyError(errc::kServerLost).name, "lost connection during query");
}

TEST(FakeTsoTest, FollowsTheClockWithALogicalCounterWithinAMillisecond) {
  int64_t now = 1'700'000'000'000;
  FakeTso tso([&] { return now; });
  const Tso a = tso.Next();
  EXPECT_EQ(TsoPhysicalMs(a), static_cast<uint64_t>(now));
  EXPECT_EQ(TsoLogical(a), 0u);
  const Tso b = tso.Next();
  EXPECT_EQ(b, a + 1);
  EXPECT_EQ(TsoLogical(b), 1u);
  now += 5;
  const Tso c = tso.Next();
  EXPECT_EQ(c, MakeTso(static_cast<uint64_t>(now), 0));
  // A clock that steps back never makes a TSO go back.
  now -= 1000;
  EXPECT_EQ(tso.Next(), c + 1);
}

TEST(FakeTsoTest, AFullMillisecondCarriesIntoTheNext) {
  FakeTso tso([] { return int64_t{1'000}; });
  Tso last = 0;
  for (int i = 0; i < (1 << kTsoLogicalBits) + 3; ++i) last = tso.Next();
  EXPECT_EQ(TsoPhysicalMs(last), 1'001u);
  EXPECT_EQ(TsoLogical(last), 2u);
}

TEST(FakeTsoTest, IsStrictlyIncreasingAcrossThreads) {
  auto tso = std::make_shared<FakeTso>();
  constexpr int kThreads = 4;
  constexpr int kEach = 5000;
  std::vector<std::vector<Tso>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) got[t].push_back(tso->Next());
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<Tso> all;
  for (const auto& v : got) {
    for (size_t i = 1; i < v.size(); ++i) ASSERT_LT(v[i - 1], v[i]);
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));  // never handed out twice
}

TEST(FakeTimestampsTest, StartAfterBeginCommitBeforeCommitNoneForReadOnly) {
  int64_t now = 5'000;
  auto oracle = std::make_shared<FakeTso>([&] { return now; });
  std::unique_ptr<TimestampSource> source = MakeFakeTimestamps(oracle);
  EXPECT_FALSE(source->tidb());
  std::unique_ptr<SessionClock> a = source->NewSession();
  std::unique_ptr<SessionClock> b = source->NewSession();
  MysqlConn* no_conn = nullptr;  // the double asks the server nothing
  const TsoResult sa = a->StartTs(no_conn);
  const TsoResult sb = b->StartTs(no_conn);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_LT(sa.ts, sb.ts);
  now = 6'000;
  b->BeforeCommit();
  a->BeforeCommit();
  const CommitTsResult ca = a->AfterCommit(no_conn, /*wrote=*/true);
  const CommitTsResult cb = b->AfterCommit(no_conn, /*wrote=*/false);
  ASSERT_TRUE(ca.ok() && cb.ok());
  EXPECT_EQ(ca.info.start_ts, sa.ts);
  // Drawn at BeforeCommit: a's after b's, though both began before.
  EXPECT_EQ(ca.info.commit_ts, MakeTso(6'000, 1));
  EXPECT_EQ(cb.info.start_ts, sb.ts);
  EXPECT_EQ(cb.info.commit_ts, 0u);
}

TEST(LastTxnInfoTest, ParsesTidbsJson) {
  absl::StatusOr<LastTxnInfo> info = ParseLastTxnInfo(
      R"({"txn_scope":"global","start_ts":416402227016171521,"commit_ts":416402227016171522,)"
      R"("txn_commit_mode":"async_commit","async_commit_fallback":false,"one_pc_fallback":false})");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->start_ts, 416402227016171521u);
  EXPECT_EQ(info->commit_ts, 416402227016171522u);
  EXPECT_EQ(info->commit_mode, "async_commit");
  EXPECT_EQ(info->error, "");
}

TEST(LastTxnInfoTest, AReadOnlyTransactionHasNoCommitTs) {
  absl::StatusOr<LastTxnInfo> info =
      ParseLastTxnInfo(R"({"txn_scope":"global","start_ts":416402227016171521,"commit_ts":0})");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->commit_ts, 0u);
  info = ParseLastTxnInfo(R"({"start_ts":"416402227016171521"})");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->start_ts, 416402227016171521u);
  EXPECT_EQ(info->commit_ts, 0u);
}

TEST(LastTxnInfoTest, RefusesWhatIsNotItsJson) {
  EXPECT_FALSE(ParseLastTxnInfo("").ok());
  EXPECT_FALSE(ParseLastTxnInfo("[1]").ok());
  EXPECT_FALSE(ParseLastTxnInfo(R"({"commit_ts":5})").ok());  // no start_ts
  EXPECT_FALSE(ParseLastTxnInfo(R"({"start_ts":-1})").ok());  // not a TSO
  EXPECT_FALSE(ParseLastTxnInfo(R"({"start_ts":5,"commit_ts":"x"})").ok());
}

TEST(ListTextTest, FormatsAndParsesTheVColumnOfAList) {
  const std::vector<int64_t> elements = {1, 140737488355330, -7};
  EXPECT_EQ(FormatListText(elements), "1,140737488355330,-7");
  EXPECT_THAT(ParseListText("1,140737488355330,-7"), Optional(ElementsAre(1, 140737488355330, -7)));
  EXPECT_EQ(FormatListText({}), "");
  EXPECT_THAT(ParseListText(""), Optional(ElementsAre()));
  EXPECT_THAT(ParseListText("42"), Optional(ElementsAre(42)));
  // What CONCAT(v, ',', e) builds from a list, appended twice in one transaction.
  EXPECT_THAT(ParseListText("5,6,7"), Optional(ElementsAre(5, 6, 7)));
}

TEST(ListTextTest, RefusesWhatIsNotAList) {
  for (const char* bad : {",", "1,", ",1", "1,,2", "1 ,2", " 1", "+1", "1.5", "a",
                          "99999999999999999999", "1,-", "0x10"}) {
    EXPECT_EQ(ParseListText(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace isowatch::tidb
