// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/delivery.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/sim/simulator.h"

namespace isowatch::sim {
namespace {

using history::History;
using history::Timestamp;
using history::Transaction;
using history::TxnStatus;

History Simulated(uint64_t seed, uint64_t txns = 2000, bool record_aborted = true) {
  sim::WorkloadOptions o;
  o.seed = seed;
  o.txns = txns;
  o.sessions = 12;
  o.keys = 200;
  o.record_aborted = record_aborted;
  auto r = sim::Simulate(o);
  if (!r.ok()) std::abort();
  return std::move(r->history);
}

// The timestamp a transaction is collected at (commit, else start), if it has one.
std::optional<Timestamp> CollectionTs(const Transaction& t) {
  if (t.has_commit) return t.commit;
  if (t.has_start) return t.start;
  return std::nullopt;
}

// Index of the batch each transaction was delivered in.
std::vector<size_t> BatchOf(const History& h, const DeliverySchedule& s) {
  std::vector<size_t> out(h.size(), SIZE_MAX);
  for (size_t b = 0; b < s.batches.size(); ++b) {
    for (TxnId id : s.txns(s.batches[b])) out[id.value()] = b;
  }
  return out;
}

bool SameSchedule(const DeliverySchedule& a, const DeliverySchedule& b) {
  if (a.order != b.order || a.arrival_ms != b.arrival_ms) return false;
  if (a.batches.size() != b.batches.size()) return false;
  for (size_t i = 0; i < a.batches.size(); ++i) {
    const DeliveryBatch& x = a.batches[i];
    const DeliveryBatch& y = b.batches[i];
    if (x.begin != y.begin || x.end != y.end || x.time_ms != y.time_ms ||
        x.watermark != y.watermark) {
      return false;
    }
  }
  return true;
}

TEST(DeliveryTest, DeterministicPerSeed) {
  const History h = Simulated(1);
  const DeliveryOptions o{.sigma_ms = 20, .batch = 64, .seed = 7};
  const DeliverySchedule a = BuildDeliverySchedule(h, o);
  const DeliverySchedule b = BuildDeliverySchedule(h, o);
  EXPECT_TRUE(SameSchedule(a, b));
  DeliveryOptions other = o;
  other.seed = 8;
  EXPECT_NE(BuildDeliverySchedule(h, other).order, a.order);
}

TEST(DeliveryTest, EveryTransactionDeliveredExactlyOnceInBatchesOfTheRightSize) {
  const History h = Simulated(2, 1999);
  for (uint32_t batch : {1u, 7u, 500u, 5000u}) {
    const DeliverySchedule s =
        BuildDeliverySchedule(h, {.sigma_ms = 30, .batch = batch, .seed = batch});
    ASSERT_EQ(s.order.size(), h.size());
    ASSERT_EQ(s.arrival_ms.size(), h.size());
    std::vector<int> count(h.size(), 0);
    for (TxnId id : s.order) ++count[id.value()];
    EXPECT_TRUE(std::all_of(count.begin(), count.end(), [](int c) { return c == 1; }));

    ASSERT_EQ(s.batches.size(), (h.size() + batch - 1) / batch);
    size_t next = 0;
    double time = 0;
    for (size_t i = 0; i < s.batches.size(); ++i) {
      const DeliveryBatch& b = s.batches[i];
      EXPECT_EQ(b.begin, next);
      const size_t size = b.end - b.begin;
      if (i + 1 < s.batches.size()) {
        EXPECT_EQ(size, batch);
      } else {
        EXPECT_GE(size, 1u);
        EXPECT_LE(size, batch);
      }
      EXPECT_GE(b.time_ms, time);  // batches leave in time order
      time = b.time_ms;
      for (size_t j = b.begin; j < b.end; ++j) EXPECT_LE(s.arrival_ms[j], b.time_ms);
      next = b.end;
    }
    EXPECT_EQ(next, h.size());
    EXPECT_TRUE(std::is_sorted(s.arrival_ms.begin(), s.arrival_ms.end()));
  }
}

TEST(DeliveryTest, WatermarksAreMonotoneAndHonest) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const History h = Simulated(seed, 1500);
    const DeliverySchedule s = BuildDeliverySchedule(
        h, {.sigma_ms = 5.0 * static_cast<double>(seed), .batch = 40, .seed = seed});
    const std::vector<size_t> batch_of = BatchOf(h, s);
    std::optional<Timestamp> previous;
    for (size_t b = 0; b < s.batches.size(); ++b) {
      const std::optional<Timestamp>& w = s.batches[b].watermark;
      if (previous) {
        ASSERT_TRUE(w.has_value());
        EXPECT_GE(*w, *previous);
      }
      previous = w;
      if (!w) continue;
      // Honest: everything collected at or below the watermark is already delivered, and the
      // watermark is the commit timestamp of a delivered transaction.
      bool names_a_commit = false;
      for (size_t i = 0; i < h.size(); ++i) {
        const Transaction& t = h.txns()[i];
        const std::optional<Timestamp> ts = CollectionTs(t);
        if (ts && *ts <= *w) {
          EXPECT_LE(batch_of[i], b) << "seed " << seed << " txn " << h.txn_name(TxnId(i));
        }
        if (t.has_commit && t.commit == *w && batch_of[i] <= b) names_a_commit = true;
      }
      EXPECT_TRUE(names_a_commit);
    }
    // Once everything is delivered the watermark is the last commit timestamp.
    Timestamp last = Timestamp::Min();
    for (const Transaction& t : h.txns()) {
      if (t.has_commit) last = std::max(last, t.commit);
    }
    ASSERT_TRUE(s.batches.back().watermark.has_value());
    EXPECT_EQ(*s.batches.back().watermark, last);
  }
}

// Without aborted transactions the watermark is the largest commit timestamp W such that every
// transaction committed at or below W has been delivered.
TEST(DeliveryTest, WatermarkIsTheLargestHonestOne) {
  const History h = Simulated(3, 1200, /*record_aborted=*/false);
  const DeliverySchedule s = BuildDeliverySchedule(h, {.sigma_ms = 10, .batch = 30, .seed = 3});
  const std::vector<size_t> batch_of = BatchOf(h, s);
  std::vector<Timestamp> commits;
  for (const Transaction& t : h.txns()) commits.push_back(t.commit);
  std::sort(commits.begin(), commits.end());
  for (size_t b = 0; b < s.batches.size(); ++b) {
    // The smallest commit timestamp not yet delivered.
    std::optional<Timestamp> missing;
    for (size_t i = 0; i < h.size(); ++i) {
      if (batch_of[i] > b && (!missing || h.txns()[i].commit < *missing)) {
        missing = h.txns()[i].commit;
      }
    }
    std::optional<Timestamp> best;
    for (const Timestamp& c : commits) {
      if (!missing || c < *missing) best = c;
    }
    EXPECT_EQ(s.batches[b].watermark, best) << "batch " << b;
  }
}

TEST(DeliveryTest, NoWatermarksWhenOff) {
  const History h = Simulated(4, 500);
  const DeliverySchedule s = BuildDeliverySchedule(h, {.batch = 50, .watermarks = false});
  for (const DeliveryBatch& b : s.batches) EXPECT_FALSE(b.watermark.has_value());
}

TEST(DeliveryTest, ZeroSigmaDeliversInCommitOrder) {
  const History h = Simulated(5, 1500);
  const DeliverySchedule s =
      BuildDeliverySchedule(h, {.mean_ms = 100, .sigma_ms = 0, .batch = 100, .seed = 5});
  std::vector<Timestamp> ts;
  for (TxnId id : s.order) {
    const std::optional<Timestamp> c = CollectionTs(h.txn(id));
    ASSERT_TRUE(c.has_value());
    ts.push_back(*c);
  }
  EXPECT_TRUE(std::is_sorted(ts.begin(), ts.end()));
  EXPECT_EQ(s.max_disorder_ms, 0);
  EXPECT_EQ(s.overtaken, 0u);
  // Each batch's watermark covers every commit it delivered, save a tie with the next batch.
  for (size_t b = 0; b + 1 < s.batches.size(); ++b) {
    const TxnId last = s.order[s.batches[b].end - 1];
    if (h.txn(last).has_commit && ts[s.batches[b].end - 1] < ts[s.batches[b].end]) {
      EXPECT_EQ(s.batches[b].watermark, h.txn(last).commit) << "batch " << b;
    }
  }
  // The delays are all `mean`: arrival = position / rate + mean.
  EXPECT_DOUBLE_EQ(s.arrival_ms[0], 100.0);
  EXPECT_DOUBLE_EQ(s.arrival_ms[10], 101.0);
}

TEST(DeliveryTest, DisorderGrowsWithSigma) {
  const History h = Simulated(6, 3000);
  double previous = -1;
  for (double sigma : {0.0, 1.0, 10.0, 100.0}) {
    const DeliverySchedule s =
        BuildDeliverySchedule(h, {.mean_ms = 300, .sigma_ms = sigma, .batch = 50});
    EXPECT_GT(s.max_disorder_ms, previous) << "sigma " << sigma;
    EXPECT_EQ(s.overtaken > 0, sigma > 0) << "sigma " << sigma;
    previous = s.max_disorder_ms;
  }
}

TEST(DeliveryTest, DelaysAreClampedAtZero) {
  const History h = Simulated(7, 1000);
  const DeliverySchedule s =
      BuildDeliverySchedule(h, {.mean_ms = 1, .sigma_ms = 50, .batch = 10, .rate_tps = 1000});
  // Transaction at collection position i is collected at i ms; it can never arrive earlier.
  std::vector<double> arrival(h.size());
  for (size_t i = 0; i < s.order.size(); ++i) arrival[s.order[i].value()] = s.arrival_ms[i];
  std::vector<TxnId> collected;
  for (size_t i = 0; i < h.size(); ++i) collected.push_back(TxnId(static_cast<uint32_t>(i)));
  std::stable_sort(collected.begin(), collected.end(), [&](TxnId a, TxnId b) {
    return *CollectionTs(h.txn(a)) < *CollectionTs(h.txn(b));
  });
  for (size_t i = 0; i < collected.size(); ++i) {
    EXPECT_GE(arrival[collected[i].value()], static_cast<double>(i)) << i;
  }
}

// Aborted transactions without a commit timestamp are collected at their start, and a
// transaction with no timestamp at all right after the one before it in the history.
TEST(DeliveryTest, TransactionsWithoutCommitTimestamp) {
  history::HistoryBuilder b;
  const KeyId x = b.IntKey(0);
  auto add = [&](std::string_view id, std::optional<Timestamp> start,
                 std::optional<Timestamp> commit, TxnStatus status) {
    ASSERT_TRUE(
        b.BeginTxn({.id = id, .session = id, .status = status, .start = start, .commit = commit})
            .ok());
    b.Write(x, history::Value::Int(1));
    b.EndTxn();
  };
  add("1", Timestamp{1, 0}, Timestamp{2, 0}, TxnStatus::kCommitted);
  add("2", Timestamp{3, 0}, Timestamp{8, 0}, TxnStatus::kCommitted);
  add("3", Timestamp{4, 0}, std::nullopt, TxnStatus::kAborted);
  add("4", Timestamp{5, 0}, Timestamp{6, 0}, TxnStatus::kCommitted);
  add("5", std::nullopt, std::nullopt, TxnStatus::kAborted);  // collected right after "4"
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  const DeliverySchedule s = BuildDeliverySchedule(*h, {.sigma_ms = 0, .batch = 1});
  std::vector<std::string> names;
  for (TxnId id : s.order) names.emplace_back(h->txn_name(id));
  EXPECT_EQ(names, (std::vector<std::string>{"1", "3", "4", "5", "2"}));
  // After "1": 2; after "3" (aborted, started at 4): still 2; after "4": still 2, as "5" shares
  // its collection timestamp; after "5": 6; after "2": 8.
  ASSERT_EQ(s.batches.size(), 5u);
  EXPECT_EQ(s.batches[0].watermark, (Timestamp{2, 0}));
  EXPECT_EQ(s.batches[1].watermark, (Timestamp{2, 0}));
  EXPECT_EQ(s.batches[2].watermark, (Timestamp{2, 0}));
  EXPECT_EQ(s.batches[3].watermark, (Timestamp{6, 0}));
  EXPECT_EQ(s.batches[4].watermark, (Timestamp{8, 0}));
}

// An aborted transaction that arrives late holds the watermark below its start.
TEST(DeliveryTest, LateAbortedTransactionHoldsTheWatermark) {
  const History h = Simulated(8, 2000);
  const DeliverySchedule s = BuildDeliverySchedule(h, {.sigma_ms = 20, .batch = 25, .seed = 2});
  const std::vector<size_t> batch_of = BatchOf(h, s);
  size_t aborted = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    const Transaction& t = h.txns()[i];
    if (t.has_commit || !t.has_start) continue;
    ++aborted;
    for (size_t b = 0; b < batch_of[i]; ++b) {
      if (s.batches[b].watermark) {
        EXPECT_LT(*s.batches[b].watermark, t.start);
      }
    }
  }
  EXPECT_GT(aborted, 0u);
}

}  // namespace
}  // namespace isowatch::sim
