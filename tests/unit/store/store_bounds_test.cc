// SPDX-License-Identifier: Apache-2.0
// The store's bounds on findings (store.h, AddViolations; docs/operations.md, "Bounded
// findings"): the first violations of a key or a transaction kept in full, the others counted
// once in a summary, the store's limit, exact counts by kind, and the summaries across
// reopenings and checkpoints (invariant 5).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/store/internal/codec.h"
#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

#include "tests/unit/store/store_fixture.h"

namespace isowatch::store {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// A NOCONFLICT violation of transactions `a` and `b` (stream "s") on `key`.
ViolationRecord Conflict(std::string id, std::string key, std::string a, std::string b,
                         int64_t finalised_ms = 0, std::string checker = "online") {
  ViolationRecord v = Violation(std::move(id), "si", "NOCONFLICT", {"s"}, finalised_ms);
  v.checker = std::move(checker);
  v.key = std::move(key);
  v.txns = {{.id = std::move(a), .stream = "s"}, {.id = std::move(b), .stream = "s"}};
  return v;
}

uint64_t Total(const std::vector<std::pair<ViolationKind, uint64_t>>& counts) {
  uint64_t sum = 0;
  for (const auto& [kind, n] : counts) sum += n;
  return sum;
}

std::vector<ViolationSummary> AllSummaries(const Store& store, const SummaryFilter& filter = {},
                                           size_t limit = 100) {
  std::vector<ViolationSummary> out;
  std::string token;
  for (int pages = 0; pages < 1000; ++pages) {
    auto page = store.QuerySummaries(filter, limit, token);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) break;
    EXPECT_LE(page->summaries.size(), limit);
    for (ViolationSummary& s : page->summaries) out.push_back(std::move(s));
    if (page->next_page_token.empty()) break;
    token = page->next_page_token;
  }
  return out;
}

class StoreBoundsTest : public StoreTest {
 protected:
  std::unique_ptr<Store> OpenBounded(ViolationBounds bounds) {
    auto store = Store::Open(dir_, StoreOptions{.violation_bounds = bounds});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // Adds `n` violations on key "k", each of transaction "t<i>" with "u<i>", ids "v0"...
  static void AddOnOneKey(Store& store, int n, std::string checker = "online") {
    std::vector<ViolationRecord> batch;
    for (int i = 0; i < n; ++i) {
      batch.push_back(Conflict(fmt::format("v{}", i), "k", fmt::format("t{}", i),
                               fmt::format("u{}", i), 100 + i, checker));
    }
    auto added = store.AddViolations(batch);
    ASSERT_TRUE(added.ok()) << added.status();
  }
};

TEST_F(StoreBoundsTest, KeepsTheFirstOfAKeyInFullAndCountsTheRestInItsSummary) {
  auto store = OpenBounded({.max_per_key = 3});
  ASSERT_NE(store, nullptr);
  std::vector<ViolationRecord> batch;
  for (int i = 0; i < 10; ++i) {
    batch.push_back(Conflict(fmt::format("v{}", i), "k", fmt::format("t{}", i),
                             fmt::format("u{}", i), 100 + i));
  }
  auto added = store->AddViolations(batch);
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_EQ(added->fates.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(added->fates[i], i < 3 ? ViolationFate::kStored : ViolationFate::kSummarised) << i;
  }
  ASSERT_EQ(added->summarised.size(), 1u);
  EXPECT_EQ(added->summarised[0].count, 7u);

  EXPECT_EQ(AllPages(*store, {}, 100), (std::vector<std::string>{"v0", "v1", "v2"}));
  EXPECT_EQ(store->CountViolations(), 3u);
  EXPECT_THAT(store->CountViolationsByKind(),
              ElementsAre(Pair(Kind("online", "si", "NOCONFLICT"), 10u)));
  EXPECT_THAT(store->CountSummarisedByKind(),
              ElementsAre(Pair(Kind("online", "si", "NOCONFLICT"), 7u)));

  const std::vector<ViolationSummary> summaries = AllSummaries(*store);
  ASSERT_EQ(summaries.size(), 1u);
  const ViolationSummary& s = summaries[0];
  EXPECT_EQ(s.scope, SummaryScope::kKey);
  EXPECT_EQ(s.subject, "k");
  EXPECT_EQ(s.anomaly, "NOCONFLICT");
  EXPECT_EQ(s.kept, 3u);
  EXPECT_EQ(s.summarised, 7u);
  EXPECT_EQ(s.first,
            (SummarisedViolation{.id = "v3", .finalised_unix_ms = 103, .txns = {"t3", "u3"}}));
  EXPECT_EQ(s.last,
            (SummarisedViolation{.id = "v9", .finalised_unix_ms = 109, .txns = {"t9", "u9"}}));
  EXPECT_EQ(s.streams, std::vector<std::string>{"s"});
  EXPECT_EQ(added->summarised[0].summary, s);
  EXPECT_EQ(store->violation_space().summaries, 1u);
}

TEST_F(StoreBoundsTest, OneAtATimeGivesWhatOneBatchGives) {
  auto store = OpenBounded({.max_per_key = 3});
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 10; ++i) {
    auto outcome = store->AddViolation(Conflict(fmt::format("v{}", i), "k", fmt::format("t{}", i),
                                                fmt::format("u{}", i), 100 + i));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->fate, i < 3 ? ViolationFate::kStored : ViolationFate::kSummarised);
    if (i >= 3) {
      EXPECT_EQ(outcome->summary.summarised, static_cast<uint64_t>(i - 2));
    }
  }
  const std::vector<ViolationSummary> summaries = AllSummaries(*store);
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].kept, 3u);
  EXPECT_EQ(summaries[0].summarised, 7u);
  EXPECT_EQ(summaries[0].first.id, "v3");
  EXPECT_EQ(summaries[0].last.id, "v9");
}

TEST_F(StoreBoundsTest, ATransactionInConflictWithManyIsOneSummary) {
  auto store = OpenBounded({.max_per_key = 3, .max_per_txn = 2});
  ASSERT_NE(store, nullptr);
  // One long transaction "long" against 6 others, each on a key of its own: no key is full.
  std::vector<ViolationRecord> batch;
  for (int i = 0; i < 6; ++i) {
    batch.push_back(
        Conflict(fmt::format("v{}", i), fmt::format("k{}", i), "long", fmt::format("t{}", i)));
  }
  auto added = store->AddViolations(batch);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(store->CountViolations(), 2u);
  const std::vector<ViolationSummary> summaries = AllSummaries(*store);
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].scope, SummaryScope::kTxn);
  EXPECT_EQ(summaries[0].subject, "long");
  EXPECT_EQ(summaries[0].stream, "s");
  EXPECT_EQ(summaries[0].kept, 2u);
  EXPECT_EQ(summaries[0].summarised, 4u);
  // The second transaction of a violation counts too.
  ASSERT_TRUE(store->AddViolation(Conflict("w", "k9", "other", "long")).ok());
  EXPECT_EQ(AllSummaries(*store)[0].summarised, 5u);
  EXPECT_EQ(Total(store->CountViolationsByKind()), 7u);
}

TEST_F(StoreBoundsTest, WithoutBoundsEveryViolationIsStoredInFull) {
  auto store = OpenBounded({});
  ASSERT_NE(store, nullptr);
  ASSERT_NO_FATAL_FAILURE(AddOnOneKey(*store, 50));
  EXPECT_EQ(store->CountViolations(), 50u);
  EXPECT_TRUE(AllSummaries(*store).empty());
  EXPECT_TRUE(store->CountSummarisedByKind().empty());
}

TEST_F(StoreBoundsTest, PastTheLimitViolationsAreCountedByKindAndTheLimitIsReported) {
  auto store = OpenBounded({.max_per_key = 100, .max_bytes = 1000});
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->violation_space().limit_reached);
  std::vector<ViolationRecord> batch;
  for (int i = 0; i < 40; ++i) {
    batch.push_back(Conflict(fmt::format("v{}", i), fmt::format("k{}", i), fmt::format("t{}", i),
                             fmt::format("u{}", i)));
  }
  auto added = store->AddViolations(batch);
  ASSERT_TRUE(added.ok()) << added.status();
  const uint64_t stored = store->CountViolations();
  EXPECT_GT(stored, 0u);
  EXPECT_LT(stored, 40u);
  const ViolationSpace space = store->violation_space();
  EXPECT_TRUE(space.limit_reached);
  EXPECT_GE(space.bytes, 1000u);
  // Every one after the limit is in its kind's summary; the counts stay exact.
  const std::vector<ViolationSummary> kinds = AllSummaries(*store, {.scope = SummaryScope::kKind});
  ASSERT_EQ(kinds.size(), 1u);
  EXPECT_EQ(kinds[0].summarised, 40u - stored);
  EXPECT_EQ(kinds[0].first.id, fmt::format("v{}", stored));
  EXPECT_EQ(Total(store->CountViolationsByKind()), 40u);
  EXPECT_EQ(Total(store->CountSummarisedByKind()), 40u - stored);
  // More of them do not grow the store: the kind's summary is updated in place.
  const uint64_t bytes = space.bytes;
  std::vector<ViolationRecord> more;
  for (int i = 40; i < 80; ++i) {
    more.push_back(Conflict(fmt::format("v{}", i), fmt::format("k{}", i), "t", "u"));
  }
  ASSERT_TRUE(store->AddViolations(more).ok());
  EXPECT_EQ(store->CountViolations(), stored);
  EXPECT_LE(store->violation_space().bytes, bytes + 16);
  EXPECT_EQ(Total(store->CountViolationsByKind()), 80u);
}

TEST_F(StoreBoundsTest, DuplicatesAreNotCountedAgain) {
  auto store = OpenBounded({.max_per_key = 2});
  ASSERT_NE(store, nullptr);
  ASSERT_NO_FATAL_FAILURE(AddOnOneKey(*store, 5, "adya"));
  // Twice in one batch, and again: stored or summarised, each is known by its id.
  ViolationRecord again = Conflict("v4", "k", "t4", "u4", 0, "adya");
  auto added = store->AddViolations(
      std::vector<ViolationRecord>{Conflict("v0", "k", "t0", "u0", 0, "adya"), again, again,
                                   Conflict("x", "k", "a", "b", 0, "adya")});
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_THAT(added->fates, ElementsAre(ViolationFate::kDuplicate, ViolationFate::kDuplicate,
                                        ViolationFate::kDuplicate, ViolationFate::kSummarised));
  EXPECT_EQ(AllSummaries(*store)[0].summarised, 4u);
  EXPECT_EQ(Total(store->CountViolationsByKind()), 6u);
  auto empty = store->AddViolations(std::vector<ViolationRecord>{Conflict("", "k", "a", "b")});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Total(store->CountViolationsByKind()), 6u);
}

TEST_F(StoreBoundsTest, OtherCheckersSummariesAreKeptAcrossReopenings) {
  {
    auto store = OpenBounded({.max_per_key = 2});
    ASSERT_NE(store, nullptr);
    ASSERT_NO_FATAL_FAILURE(AddOnOneKey(*store, 6, "adya"));
  }
  auto store = OpenBounded({.max_per_key = 2});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(AllSummaries(*store)[0].summarised, 4u);
  EXPECT_THAT(store->CountViolationsByKind(),
              ElementsAre(Pair(Kind("adya", "si", "NOCONFLICT"), 6u)));
  // A window that overlaps the one before finds the same violations again.
  ASSERT_NO_FATAL_FAILURE(AddOnOneKey(*store, 6, "adya"));
  EXPECT_EQ(AllSummaries(*store)[0].summarised, 4u);
  EXPECT_EQ(Total(store->CountViolationsByKind()), 6u);
}

TEST_F(StoreBoundsTest, OnlineSummariesSinceTheLastCheckpointAreCountedAgainByTheReplay) {
  {
    auto store = OpenBounded({.max_per_key = 2});
    ASSERT_NE(store, nullptr);
    ASSERT_NO_FATAL_FAILURE(AddOnOneKey(*store, 5));
    // A checkpoint: what was summarised before it is final for good.
    ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, false, "b").ok());
    ASSERT_TRUE(store->PutCheckpoint(store->next_log_position(), "state").ok());
    std::vector<ViolationRecord> batch;
    for (int i = 5; i < 9; ++i) {
      batch.push_back(Conflict(fmt::format("v{}", i), "k", fmt::format("t{}", i), "u"));
    }
    ASSERT_TRUE(store->AddViolations(batch).ok());
    EXPECT_EQ(AllSummaries(*store)[0].summarised, 7u);
    EXPECT_EQ(Total(store->CountViolationsByKind()), 9u);
  }
  // As after a kill -9: the four summarised after the checkpoint are taken out ...
  auto store = OpenBounded({.max_per_key = 2});
  ASSERT_NE(store, nullptr);
  const std::vector<ViolationSummary> summaries = AllSummaries(*store);
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].summarised, 3u);
  EXPECT_EQ(summaries[0].kept, 2u);
  EXPECT_THAT(store->CountViolationsByKind(),
              ElementsAre(Pair(Kind("online", "si", "NOCONFLICT"), 5u)));
  EXPECT_THAT(store->CountSummarisedByKind(),
              ElementsAre(Pair(Kind("online", "si", "NOCONFLICT"), 3u)));
  // ... and the replay of the log after the checkpoint counts them once more.
  std::vector<ViolationRecord> replay;
  for (int i = 5; i < 9; ++i) {
    replay.push_back(Conflict(fmt::format("v{}", i), "k", fmt::format("t{}", i), "u"));
  }
  ASSERT_TRUE(store->AddViolations(replay).ok());
  EXPECT_EQ(AllSummaries(*store)[0].summarised, 7u);
  EXPECT_EQ(AllSummaries(*store)[0].last.id, "v8");
  EXPECT_EQ(Total(store->CountViolationsByKind()), 9u);
  // Reopened again without a checkpoint, the replay still counts them once.
  store.reset();
  store = OpenBounded({.max_per_key = 2});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Total(store->CountViolationsByKind()), 5u);
  ASSERT_TRUE(store->AddViolations(replay).ok());
  EXPECT_EQ(Total(store->CountViolationsByKind()), 9u);
}

TEST_F(StoreBoundsTest, ASummaryOfOnlyUncheckpointedViolationsGoesAtReopening) {
  uint64_t bytes_of_one = 0;
  {
    auto store = OpenBounded({.max_bytes = 1});
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->AddViolation(Conflict("a", "k", "t", "u")).ok());
    bytes_of_one = store->violation_space().bytes;
    // Past the limit: in the kind's summary, which keeps nothing in full.
    auto b = store->AddViolation(Conflict("b", "k", "t", "w"));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->fate, ViolationFate::kSummarised);
    EXPECT_EQ(b->summary.scope, SummaryScope::kKind);
    EXPECT_EQ(store->violation_space().summaries, 1u);
    EXPECT_GT(store->violation_space().bytes, bytes_of_one);
  }
  auto store = OpenBounded({.max_bytes = 1});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->violation_space().summaries, 0u);
  EXPECT_EQ(store->violation_space().bytes, bytes_of_one);
  EXPECT_TRUE(AllSummaries(*store).empty());
  EXPECT_EQ(Total(store->CountViolationsByKind()), 1u);
  EXPECT_TRUE(store->CountSummarisedByKind().empty());
}

TEST_F(StoreBoundsTest, SummariesArePagedAndFiltered) {
  auto store = OpenBounded({.max_per_key = 1});
  ASSERT_NE(store, nullptr);
  std::vector<ViolationRecord> batch;
  for (int k = 0; k < 7; ++k) {
    for (int i = 0; i < 3; ++i) {
      batch.push_back(
          Conflict(fmt::format("v{}-{}", k, i), fmt::format("k{}", k), fmt::format("t{}", i), "u"));
    }
  }
  ViolationRecord ext = Conflict("e0", "k0", "r", "w");
  ext.anomaly = "EXT";
  batch.push_back(ext);
  ext.id = "e1";
  batch.push_back(ext);
  ASSERT_TRUE(store->AddViolations(batch).ok());
  EXPECT_EQ(AllSummaries(*store, {}, 2).size(), 8u);
  EXPECT_EQ(AllSummaries(*store, {}, 100).size(), 8u);
  EXPECT_EQ(AllSummaries(*store, {.anomaly = "EXT"}, 1).size(), 1u);
  EXPECT_EQ(AllSummaries(*store, {.level = "ser"}, 1).size(), 0u);
  EXPECT_EQ(AllSummaries(*store, {.scope = SummaryScope::kTxn}, 1).size(), 0u);
  EXPECT_EQ(store->QuerySummaries({}, 10, "zz").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->QuerySummaries({}, 0, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreBoundsTest, CountsAndSpaceMissingAreCountedAgainFromRecordsAndSummaries) {
  uint64_t bytes = 0;
  {
    auto store = OpenBounded({.max_per_key = 2});
    ASSERT_NE(store, nullptr);
    ASSERT_NO_FATAL_FAILURE(AddOnOneKey(*store, 5, "adya"));
    bytes = store->violation_space().bytes;
    EXPECT_GT(bytes, 0u);
  }
  {
    RawDb raw(dir_);
    ASSERT_TRUE(raw.Db().Delete({}, raw.Cf("meta"), "violation_space").ok());
    ASSERT_TRUE(raw.Db()
                    .Delete({}, raw.Cf("meta"),
                            internal::EncodeSummarisedCountKey(Kind("adya", "si", "NOCONFLICT")))
                    .ok());
  }
  auto store = OpenBounded({.max_per_key = 2});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->violation_space().bytes, bytes);
  EXPECT_EQ(store->violation_space().summaries, 1u);
  EXPECT_THAT(store->CountViolationsByKind(),
              ElementsAre(Pair(Kind("adya", "si", "NOCONFLICT"), 5u)));
  EXPECT_THAT(store->CountSummarisedByKind(),
              ElementsAre(Pair(Kind("adya", "si", "NOCONFLICT"), 3u)));
}

}  // namespace
}  // namespace isowatch::store
