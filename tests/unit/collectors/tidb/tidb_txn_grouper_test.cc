// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/open_protocol.h"
#include "collectors/tidb/txn_grouper.h"
#include "tests/unit/collectors/tidb/open_protocol_frames.h"
#include "tests/unit/collectors/tidb/samples.h"

namespace isowatch::tidb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RowChange Row(Tso ts, int key, const std::string& value) {
  return RowChange{.schema = "d",
                   .table = "t",
                   .op = RowOp::kInsert,
                   .commit_ts = ts,
                   .key_columns = {"k"},
                   .columns = {{"k", std::to_string(key)}, {"v", value}}};
}

std::vector<Tso> CommitTimes(const std::vector<CdcTxn>& txns) {
  std::vector<Tso> out;
  for (const CdcTxn& txn : txns) out.push_back(txn.commit_ts);
  return out;
}

TEST(TxnGrouperTest, ReleasesATransactionOnceEveryStreamsWatermarkIsAboveIt) {
  TxnGrouper grouper(2);
  ASSERT_TRUE(grouper.Add(1, Row(100, 2, "b")).ok());
  ASSERT_TRUE(grouper.Add(0, Row(100, 1, "a")).ok());
  ASSERT_TRUE(grouper.Add(0, Watermark{150}).ok());
  EXPECT_THAT(grouper.Release(), IsEmpty());  // stream 1 has promised nothing yet
  ASSERT_TRUE(grouper.Add(1, Watermark{100}).ok());
  EXPECT_EQ(grouper.release_point(), 100u);
  EXPECT_THAT(grouper.Release(), IsEmpty());  // a watermark at 100 says nothing about 100
  ASSERT_TRUE(grouper.Add(1, Watermark{101}).ok());
  const std::vector<CdcTxn> released = grouper.Release();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].commit_ts, 100u);
  EXPECT_THAT(released[0].rows, ElementsAre(Row(100, 1, "a"), Row(100, 2, "b")));
  EXPECT_EQ(grouper.pending_txns(), 0u);
  EXPECT_EQ(grouper.stats().released_txns, 1u);
}

TEST(TxnGrouperTest, KeepsADuplicateRowOnceAndCountsIt) {
  TxnGrouper grouper(1);
  ASSERT_TRUE(grouper.Add(0, Row(10, 1, "a")).ok());
  ASSERT_TRUE(grouper.Add(0, Row(10, 1, "a")).ok());
  RowChange reordered = Row(10, 1, "a");
  std::reverse(reordered.columns.begin(), reordered.columns.end());
  ASSERT_TRUE(grouper.Add(0, reordered).ok());  // the same change, columns in another order
  ASSERT_TRUE(grouper.Add(0, Watermark{11}).ok());
  const std::vector<CdcTxn> released = grouper.Release();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].rows.size(), 1u);
  // Re-sent after its transaction went out: still recognised.
  ASSERT_TRUE(grouper.Add(0, Row(10, 1, "a")).ok());
  EXPECT_THAT(grouper.Release(), IsEmpty());
  EXPECT_EQ(grouper.stats().rows, 1u);
  EXPECT_EQ(grouper.stats().duplicate_rows, 3u);
  EXPECT_EQ(grouper.stats().late_rows, 0u);
}

TEST(TxnGrouperTest, RefusesAndCountsARowItsTransactionWentOutWithout) {
  TxnGrouper grouper(1);
  ASSERT_TRUE(grouper.Add(0, Row(10, 1, "a")).ok());
  ASSERT_TRUE(grouper.Add(0, Watermark{20}).ok());
  ASSERT_EQ(grouper.Release().size(), 1u);
  const absl::Status late = grouper.Add(0, Row(10, 2, "b"));
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.message(), HasSubstr("a row of d.t (INSERT) at commit ts 10 arrived after"));
  EXPECT_THAT(late.message(), HasSubstr("its transaction went out without it"));
  const absl::Status unknown = grouper.Add(0, Row(15, 2, "b"));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(grouper.stats().late_rows, 2u);
  EXPECT_THAT(grouper.Release(), IsEmpty());
  // At or above the release point a row is on time.
  EXPECT_TRUE(grouper.Add(0, Row(20, 3, "c")).ok());
}

TEST(TxnGrouperTest, ForgetsReleasedRowsPastItsMemory) {
  TxnGrouper grouper(1, /*remembered_rows=*/2);
  for (Tso ts = 1; ts <= 4; ++ts) ASSERT_TRUE(grouper.Add(0, Row(ts, 1, "a")).ok());
  ASSERT_TRUE(grouper.Add(0, Watermark{10}).ok());
  ASSERT_EQ(grouper.Release().size(), 4u);
  EXPECT_TRUE(grouper.Add(0, Row(4, 1, "a")).ok());  // remembered: a duplicate
  const absl::Status old = grouper.Add(0, Row(1, 1, "a"));
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(old.message(), HasSubstr("too old to tell"));
  EXPECT_EQ(grouper.stats().duplicate_rows, 1u);
  EXPECT_EQ(grouper.stats().late_rows, 1u);
}

TEST(TxnGrouperTest, IgnoresAndCountsAWatermarkThatGoesBack) {
  TxnGrouper grouper(1);
  ASSERT_TRUE(grouper.Add(0, Watermark{50}).ok());
  ASSERT_TRUE(grouper.Add(0, Watermark{40}).ok());
  EXPECT_EQ(grouper.release_point(), 50u);
  // The stream's promise stands: a row below 50 is late.
  EXPECT_EQ(grouper.Add(0, Row(45, 1, "a")).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(grouper.stats().stale_watermarks, 1u);
  EXPECT_EQ(grouper.stats().watermarks, 1u);
}

TEST(TxnGrouperTest, RefusesAnUnknownStream) {
  TxnGrouper grouper(2);
  EXPECT_EQ(grouper.Add(2, Watermark{1}).code(), absl::StatusCode::kOutOfRange);
}

TEST(TxnGrouperTest, GroupsTheDocumentedOpenProtocolStream) {
  // docs-excerpts/open-protocol-event-stream.log: two partitions, a DDL and resolved events
  // broadcast to both, a duplicated row (lines 7 and 8), and a last resolved ts below the
  // last transaction, which must therefore stay pending.
  const std::vector<std::string> lines = testing::SplitRecords(
      testing::ReadSample("docs-excerpts/open-protocol-event-stream.log"), "\n");
  ASSERT_EQ(lines.size(), 14u);
  TxnGrouper grouper(2);
  for (const std::string& line : lines) {
    const size_t partition = line.find("[partition=1]") != std::string::npos ? 1 : 0;
    const size_t key_start = line.find("[key=\"") + 6;
    const size_t key_end = line.find("\"] [value=");
    std::string key = line.substr(key_start, key_end - key_start);
    std::string value = line.substr(key_end + 10, line.rfind(']') - key_end - 10);
    if (!value.empty()) value = value.substr(1, value.size() - 2);
    for (std::string* text : {&key, &value}) {
      std::string unescaped;
      for (char c : *text) {
        if (c != '\\') unescaped.push_back(c);
      }
      *text = unescaped;
    }
    auto events =
        DecodeOpenProtocol(testing::OpenProtocolKey({key}), testing::OpenProtocolValue({value}));
    ASSERT_TRUE(events.ok()) << events.status();
    for (CdcEvent& event : *events) ASSERT_TRUE(grouper.Add(partition, std::move(event)).ok());
  }
  const std::vector<CdcTxn> released = grouper.Release();
  EXPECT_THAT(CommitTimes(released), ElementsAre(415508856908021766u, 415508878783938562u));
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[0].schema_changes.size(), 1u);
  EXPECT_THAT(released[0].rows, IsEmpty());
  std::vector<std::string> rows;
  for (const RowChange& row : released[1].rows) rows.push_back(testing::Describe(row));
  EXPECT_THAT(rows, ElementsAre("INSERT test.t1 @415508878783938562 key(id) [id=1 val=YWE=]",
                                "INSERT test.t1 @415508878783938562 key(id) [id=2 val=YmI=]",
                                "INSERT test.t1 @415508878783938562 key(id) [id=3 val=Y2M=]"));
  EXPECT_EQ(grouper.release_point(), 415508881038376963u);
  EXPECT_EQ(grouper.pending_txns(), 1u);  // the 4-row transaction at ...418485761
  EXPECT_EQ(grouper.stats().rows, 7u);
  EXPECT_EQ(grouper.stats().duplicate_rows, 1u);
  EXPECT_EQ(grouper.stats().schema_changes, 1u);
  EXPECT_EQ(grouper.stats().duplicate_schema_changes, 1u);
}

// Transactions spread over streams as TiCDC sends them: each row to one stream, rows between
// two watermarks in any order, duplicates anywhere (also after their transaction was
// released), watermarks to every stream; the streams interleaved at random.
TEST(TxnGrouperTest, ReleasesEveryTransactionExactlyOnceWhateverTheArrivalOrder) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const size_t streams = 1 + rng() % 4;
    std::map<Tso, std::set<std::string>> expected;
    std::vector<std::vector<CdcEvent>> per_stream(streams);
    std::vector<std::vector<CdcEvent>> window(streams);
    uint64_t duplicates = 0;
    std::vector<RowChange> sent;
    auto flush = [&](Tso watermark) {
      for (size_t s = 0; s < streams; ++s) {
        std::shuffle(window[s].begin(), window[s].end(), rng);
        for (CdcEvent& event : window[s]) per_stream[s].push_back(std::move(event));
        window[s].clear();
        per_stream[s].push_back(Watermark{watermark});
      }
    };
    Tso ts = MakeTso(1700000000000, 0);
    for (int t = 0; t < 60; ++t) {
      ts += 1 + rng() % 3;
      const int rows = 1 + static_cast<int>(rng() % 4);
      for (int r = 0; r < rows; ++r) {
        RowChange row = Row(ts, t * 10 + r, std::to_string(rng() % 5));
        expected[ts].insert(RowFingerprint(row));
        window[rng() % streams].emplace_back(row);
        if (rng() % 5 == 0) {  // a re-send, on the row's stream or another, now or later
          window[rng() % streams].emplace_back(row);
          ++duplicates;
        }
        sent.push_back(std::move(row));
      }
      if (rng() % 3 == 0) flush(ts + 1);
      if (rng() % 7 == 0) {  // a re-send of something long released
        window[rng() % streams].emplace_back(sent[rng() % sent.size()]);
        ++duplicates;
      }
    }
    flush(ts + 1);
    TxnGrouper grouper(streams);
    std::vector<size_t> next(streams, 0);
    std::vector<CdcTxn> released;
    while (true) {
      std::vector<size_t> open;
      for (size_t s = 0; s < streams; ++s) {
        if (next[s] < per_stream[s].size()) open.push_back(s);
      }
      if (open.empty()) break;
      const size_t s = open[rng() % open.size()];
      ASSERT_TRUE(grouper.Add(s, per_stream[s][next[s]++]).ok()) << "seed " << seed;
      for (CdcTxn& txn : grouper.Release()) {
        ASSERT_LT(txn.commit_ts, grouper.release_point()) << "seed " << seed;
        released.push_back(std::move(txn));
      }
    }
    std::map<Tso, std::set<std::string>> got;
    for (size_t i = 0; i < released.size(); ++i) {
      if (i > 0) {
        ASSERT_LT(released[i - 1].commit_ts, released[i].commit_ts) << "seed " << seed;
      }
      for (const RowChange& row : released[i].rows) {
        ASSERT_TRUE(got[released[i].commit_ts].insert(RowFingerprint(row)).second)
            << "seed " << seed;
      }
    }
    EXPECT_EQ(got, expected) << "seed " << seed;
    EXPECT_EQ(grouper.stats().duplicate_rows, duplicates) << "seed " << seed;
    EXPECT_EQ(grouper.stats().late_rows, 0u) << "seed " << seed;
    EXPECT_EQ(grouper.pending_txns(), 0u) << "seed " << seed;
  }
}

}  // namespace
}  // namespace isowatch::tidb
