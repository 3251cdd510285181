// SPDX-License-Identifier: Apache-2.0
// The engine's internal containers against the standard ones: ChainMap (the per-key B+-tree)
// against std::map under random and near-sequential insertions, searches and prefix erasures;
// TimeQueue against a plain list of entries under rising and falling bounds.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "isowatch/engine/internal/chain_map.h"
#include "isowatch/engine/internal/key_table.h"
#include "isowatch/engine/internal/time_queue.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::engine::internal {
namespace {

using history::Timestamp;

struct Payload {
  uint64_t a = 0;
  uint32_t b = 0;
};

struct StdLess {
  bool operator()(const OrderKey& x, const OrderKey& y) const {
    return std::tuple(x.ts.physical, x.ts.logical, x.phase(), x.txn()) <
           std::tuple(y.ts.physical, y.ts.logical, y.phase(), y.txn());
  }
};

using Model = std::map<OrderKey, uint64_t, StdLess>;

// Checks every entry in both directions, and the size.
void ExpectSame(const ChainMap<Payload>& m, const Model& model) {
  ASSERT_EQ(m.size(), model.size());
  ASSERT_EQ(m.empty(), model.empty());
  auto it = m.begin();
  for (const auto& [k, v] : model) {
    ASSERT_FALSE(it == m.end());
    ASSERT_TRUE(it.key() == k);
    ASSERT_EQ(it.value().a, v);
    ++it;
  }
  ASSERT_TRUE(it == m.end());
  for (auto r = model.rbegin(); r != model.rend(); ++r) {
    --it;
    ASSERT_TRUE(it.key() == r->first);
  }
  ASSERT_TRUE(it == m.begin());
  if (!model.empty()) {
    ASSERT_TRUE(m.front_key() == model.begin()->first);
    ASSERT_TRUE(m.back_key() == model.rbegin()->first);
    ASSERT_TRUE(m.last().key() == model.rbegin()->first);
  }
}

OrderKey RandomKey(std::mt19937_64& rng, int64_t range) {
  std::uniform_int_distribution<int64_t> ts(0, range);
  std::uniform_int_distribution<int64_t> small(0, 2);
  // Transactions on both sides of 2^32.
  const uint64_t txn = rng() % 4 + (rng() % 2 == 0 ? 0 : (uint64_t{1} << 32) - 2);
  return OrderKey{Timestamp{ts(rng), small(rng)}, static_cast<uint32_t>(small(rng)), txn};
}

// Positions probed by lower_bound / upper_bound: present keys, keys between, and beyond the ends.
void ExpectSameBounds(const ChainMap<Payload>& m, const Model& model, std::mt19937_64& rng,
                      int64_t range) {
  for (int probe = 0; probe < 50; ++probe) {
    OrderKey k = RandomKey(rng, range + 2);
    k.ts.physical -= 1;
    if (probe % 3 == 0 && !model.empty()) {
      auto pick = model.begin();
      std::advance(pick, static_cast<long>(rng() % model.size()));
      k = pick->first;
    }
    auto lb = m.lower_bound(k);
    auto mlb = model.lower_bound(k);
    if (mlb == model.end()) {
      ASSERT_TRUE(lb == m.end());
    } else {
      ASSERT_FALSE(lb == m.end());
      ASSERT_TRUE(lb.key() == mlb->first);
    }
    auto ub = m.upper_bound(k);
    auto mub = model.upper_bound(k);
    if (mub == model.end()) {
      ASSERT_TRUE(ub == m.end());
    } else {
      ASSERT_FALSE(ub == m.end());
      ASSERT_TRUE(ub.key() == mub->first);
    }
  }
}

TEST(OrderKeyTest, OrdersByTimestampPhaseThenTransaction) {
  const OrderKey a{Timestamp{5, 0}, 0, 9};
  const OrderKey b{Timestamp{5, 0}, 1, 1};
  const OrderKey c{Timestamp{5, 1}, 0, 0};
  const OrderKey d{Timestamp{6, -3}, 2, 0};
  EXPECT_TRUE(a < b);
  EXPECT_TRUE(b < c);
  EXPECT_TRUE(c < d);
  EXPECT_FALSE(b < a);
  EXPECT_TRUE(OrderKey(Timestamp{5, 0}, 0, 1) < a);
  EXPECT_TRUE(a == OrderKey(Timestamp{5, 0}, 0, 9));
  EXPECT_TRUE(OrderKey(Timestamp::Min(), 0, 0) < OrderKey(Timestamp{-1, 0}, 0, 0));
  // Transactions past 32 bits, and the greatest one, keep their phase and their order.
  const uint64_t big = (uint64_t{1} << 32) + 5;
  const OrderKey e{Timestamp{5, 0}, 0, big};
  EXPECT_EQ(e.phase(), 0u);
  EXPECT_EQ(e.txn(), big);
  EXPECT_TRUE(a < e);
  EXPECT_TRUE(e < b);
  const OrderKey f{Timestamp{5, 0}, 2, OrderKey::kMaxTxn};
  EXPECT_EQ(f.phase(), 2u);
  EXPECT_EQ(f.txn(), OrderKey::kMaxTxn);
  EXPECT_TRUE(b < f);
  EXPECT_TRUE(f < OrderKey::Last(Timestamp{5, 0}));
  EXPECT_TRUE(OrderKey::Last(Timestamp{5, 0}) < c);
}

// Random keys, random prefix erasures: every shape, from one growing leaf to several levels.
TEST(ChainMapTest, MatchesStdMapUnderRandomOperations) {
  for (int64_t range : {int64_t{20}, int64_t{2000}, int64_t{200000}}) {
    std::mt19937_64 rng(static_cast<uint64_t>(range));
    ChainMap<Payload> m;
    Model model;
    uint64_t serial = 0;
    for (int round = 0; round < 60; ++round) {
      const int inserts = static_cast<int>(rng() % 2000);
      for (int i = 0; i < inserts; ++i) {
        const OrderKey k = RandomKey(rng, range);
        if (model.count(k) != 0) continue;
        ++serial;
        auto it = m.insert(k, Payload{serial, 1});
        ASSERT_TRUE(it.key() == k);
        ASSERT_EQ(it.value().a, serial);
        model.emplace(k, serial);
      }
      ExpectSame(m, model);
      ExpectSameBounds(m, model, rng, range);
      // Values stay writable through iterators.
      if (!model.empty()) {
        auto it = m.lower_bound(model.begin()->first);
        it.value().b = 7;
        ASSERT_EQ(m.begin().value().b, 7u);
      }
      // Erase a prefix: sometimes nothing, sometimes everything.
      const uint64_t choice = rng() % 10;
      OrderKey cut = RandomKey(rng, range);
      size_t expected = static_cast<size_t>(std::distance(model.begin(), model.lower_bound(cut)));
      auto at = m.lower_bound(cut);
      if (choice == 0) {
        at = m.begin();
        expected = 0;
      } else if (choice == 1) {
        at = m.end();
        expected = model.size();
      }
      ASSERT_EQ(m.erase_prefix(at), expected);
      auto mit = model.begin();
      std::advance(mit, static_cast<long>(expected));
      model.erase(model.begin(), mit);
      ExpectSame(m, model);
      ExpectSameBounds(m, model, rng, range);
    }
  }
}

// The engine's pattern: keys arrive near the end of the order, a window is kept, the prefix
// below a rising point is dropped. Large enough for three levels of inner nodes.
TEST(ChainMapTest, MatchesStdMapOnASlidingWindow) {
  std::mt19937_64 rng(3);
  ChainMap<Payload> m;
  Model model;
  std::normal_distribution<double> jitter(0, 300);
  int64_t now = 0;
  uint64_t serial = 0;
  for (int step = 0; step < 400000; ++step) {
    now += 1;
    const OrderKey k{Timestamp{now + static_cast<int64_t>(jitter(rng)), 0}, 0,
                     static_cast<uint32_t>(step)};
    ++serial;
    m.insert(k, Payload{serial, 0});
    model.emplace(k, serial);
    // Keep a window that is large for a while, then small.
    const int64_t window = step < 200000 ? 60000 : 500;
    if (step % 97 == 0) {
      const OrderKey cut{Timestamp{now - window, 0}, 0, 0};
      const size_t expected =
          static_cast<size_t>(std::distance(model.begin(), model.lower_bound(cut)));
      ASSERT_EQ(m.erase_prefix(m.lower_bound(cut)), expected);
      model.erase(model.begin(), model.lower_bound(cut));
    }
    if (step % 20011 == 0) {
      ExpectSame(m, model);
      ExpectSameBounds(m, model, rng, now);
    }
  }
  ExpectSame(m, model);
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_TRUE(m.begin() == m.end());
}

TEST(ChainMapTest, DescendingInsertionsAndMoves) {
  ChainMap<Payload> m;
  Model model;
  for (int64_t i = 5000; i > 0; --i) {
    const OrderKey k{Timestamp{i, 0}, 0, 0};
    m.insert(k, Payload{static_cast<uint64_t>(i), 0});
    model.emplace(k, static_cast<uint64_t>(i));
  }
  ExpectSame(m, model);
  ChainMap<Payload> moved(std::move(m));
  EXPECT_TRUE(m.empty());  // NOLINT(bugprone-use-after-move): a moved-from map is empty
  ExpectSame(moved, model);
  ChainMap<Payload> assigned;
  assigned.insert(OrderKey{Timestamp{1, 0}, 2, 3}, Payload{});
  assigned = std::move(moved);
  ExpectSame(assigned, model);
}

// TimeQueue: what each TakeUpTo returns is exactly the entries at or below the bound.
TEST(TimeQueueTest, TakesExactlyTheEntriesAtOrBelowTheBound) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    std::mt19937_64 rng(seed);
    TimeQueue q;
    std::vector<std::pair<Timestamp, uint32_t>> model;
    Timestamp bound = Timestamp::Min();
    uint32_t serial = 0;
    for (int round = 0; round < 3000; ++round) {
      const int pushes = static_cast<int>(rng() % 20);
      for (int i = 0; i < pushes; ++i) {
        // Mostly above the last bound, sometimes at or below it; logical parts and negative
        // physical parts included.
        const int64_t base = bound == Timestamp::Min() ? -1000 : bound.physical;
        const int64_t offset = static_cast<int64_t>(rng() % 3000) - (seed == 4 ? 1500 : 100);
        const Timestamp ts{base + offset, static_cast<int64_t>(rng() % 3) - 1};
        q.Push(ts, ++serial);
        model.emplace_back(ts, serial);
      }
      // Bounds mostly rise; seed 3 lets them fall too (as a collection point may).
      const int64_t step = static_cast<int64_t>(rng() % 400) - (seed == 3 ? 150 : 0);
      const int64_t base = bound == Timestamp::Min() ? -1000 : bound.physical;
      bound = Timestamp{base + step, static_cast<int64_t>(rng() % 3) - 1};
      std::vector<uint32_t> got;
      q.TakeUpTo(bound, [&](uint32_t key) { got.push_back(key); });
      std::vector<uint32_t> want;
      std::vector<std::pair<Timestamp, uint32_t>> rest;
      for (const auto& e : model) {
        if (e.first <= bound) {
          want.push_back(e.second);
        } else {
          rest.push_back(e);
        }
      }
      model = std::move(rest);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << "seed " << seed << " round " << round;
      ASSERT_EQ(q.size(), model.size());
    }
    std::vector<uint32_t> got;
    q.TakeUpTo(Timestamp::Max(), [&](uint32_t key) { got.push_back(key); });
    EXPECT_EQ(got.size(), model.size());
    EXPECT_TRUE(q.empty());
  }
}

// The key table against a model: each key has no state, an evicted one, or a state of its own
// that keeps what was written to it until it is released; released states are reused.
TEST(KeyTableTest, MatchesAModelUnderRandomOperations) {
  std::mt19937_64 rng(5);
  KeyTable table(/*sparse=*/true);
  enum class Held { kNone, kEvicted, kResident };
  std::vector<Held> model;
  std::vector<int64_t> marks;  // the resident key's max_duration, as written
  size_t resident = 0;
  size_t most_resident = 0;
  for (int step = 0; step < 20000; ++step) {
    if (model.size() < 500 && rng() % 20 == 0) {
      const size_t n = model.size() + rng() % 50;
      table.Grow(n);
      model.resize(n, Held::kNone);
      marks.resize(n, 0);
    }
    if (model.empty()) continue;
    const auto key = static_cast<uint32_t>(rng() % model.size());
    if (model[key] == Held::kResident) {
      ASSERT_NE(table.Find(key), nullptr);
      ASSERT_EQ(table.Find(key)->max_duration, marks[key]);
      if (rng() % 2 == 0) {
        const bool evicted = rng() % 2 == 0;
        table.Release(key, evicted);
        model[key] = evicted ? Held::kEvicted : Held::kNone;
        --resident;
      }
    } else {
      ASSERT_EQ(table.Find(key), nullptr);
      ASSERT_EQ(table.slot(key),
                model[key] == Held::kEvicted ? KeyTable::Slot::kEvicted : KeyTable::Slot::kNone);
      KeyState& ks = table.Create(key);
      ASSERT_EQ(ks.max_duration, 0) << "a fresh state, even when reused";
      ASSERT_TRUE(ks.versions.empty());
      ks.max_duration = step + 1;
      ks.versions.insert(OrderKey(Timestamp{step, 0}, 0, 1), VersionInfo{});
      marks[key] = step + 1;
      model[key] = Held::kResident;
      most_resident = std::max(most_resident, ++resident);
    }
    ASSERT_EQ(table.resident(), resident);
  }
  for (uint32_t k = 0; k < model.size(); ++k) {
    EXPECT_EQ(table.slot(k) == KeyTable::Slot::kResident, model[k] == Held::kResident) << k;
  }
  // States are reused: the table holds no more of them than were ever resident at once (plus
  // the two never handed out and the vector's spare capacity).
  EXPECT_LE(table.MemoryBytes(), model.size() * 8 + (2 * most_resident + 2) * sizeof(KeyState) +
                                     most_resident * sizeof(uint32_t) * 2 + 4096);
}

// A dense table gives every key its own state from Grow on.
TEST(KeyTableTest, DenseTableHoldsAStatePerKey) {
  KeyTable table(/*sparse=*/false);
  table.Grow(10);
  EXPECT_EQ(table.size(), 10u);
  EXPECT_EQ(table.resident(), 10u);
  table.Find(3)->max_duration = 7;
  table.Grow(1000);
  EXPECT_EQ(table.resident(), 1000u);
  for (uint32_t k = 0; k < 1000; ++k) {
    ASSERT_NE(table.Find(k), nullptr);
    EXPECT_EQ(table.slot(k), KeyTable::Slot::kResident);
    EXPECT_EQ(table.Find(k)->max_duration, k == 3 ? 7 : 0) << k;
  }
  EXPECT_NE(table.Find(1), table.Find(2));
}

}  // namespace
}  // namespace isowatch::engine::internal
