// SPDX-License-Identifier: Apache-2.0
// Hand-written arrival orders over a version spill: late transactions checked against the versions
// it holds, and keys evicted to it under a memory budget and brought back.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/engine/engine.h"
#include "isowatch/engine/internal/order_key.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/history.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/test_history.h"
#include "tests/unit/engine/engine_harness.h"

namespace isowatch::engine {
namespace {

using history::History;
using history::Timestamp;
using ::isowatch::testing::SummarizeAll;
using ::isowatch::testing::TestHistory;
using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Lt;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using verdict::IsolationLevel;

// What Chronos reports for `h` at SI, summarised: the set the engine must reach.
std::vector<std::string> ChronosSi(const History& h) {
  return SummarizeAll(
      h, checkers::RunChronos(h, {.level = IsolationLevel::kSnapshotIsolation}).violations);
}

// The history of the spill tests: transactions 1 to 3 on the list x and the register y, then
// "4", which starts at 11 and commits at 19, after the rest has been collected. Each case adds
// a different "4" and gives what Chronos reports.
struct LateCase {
  std::string name;
  std::function<void(TestHistory&)> late;
  std::vector<std::string> expected;
};

std::vector<LateCase> LateCases() {
  return {
      {"list read as of its snapshot",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).L(kX, {8}); },
       {}},
      {"list read past its snapshot",
       [](TestHistory& t) {
         t.Txn("4", "b", 11, 19).L(kX, {8, 39});
       },
       {"EXT/uncommitted 4,2 k=0"}},
      {"register read of a collected version",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).R(kY, 4); },
       {}},
      {"register read past its snapshot",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).R(kY, 9); },
       {"EXT/after 4,2b k=1"}},
      {"writer overlapping collected writers",
       [](TestHistory& t) { t.Txn("4", "b", 11, 19).W(kY, 7); },
       {"NOCONFLICT 2b,4 k=1", "NOCONFLICT 2c,4 k=1", "NOCONFLICT 3,4 k=1"}},
  };
}

TestHistory LateHistory(const LateCase& c) {
  TestHistory t;
  t.Txn("1", "a", 2, 3).A(kX, 8).W(kY, 4);
  t.Txn("2", "a", 11, 14).A(kX, 39).L(kX, {8, 39});
  t.Txn("2b", "c", 12, 13).W(kY, 9);
  t.Txn("2c", "c", 14, 15).W(kY, 10);
  t.Txn("3", "a", 15, 18).W(kY, 6);
  c.late(t);
  return t;
}

// Delivers LateHistory: "4" last, after everything else is final.
void DeliverLate(Harness& e) {
  e.Deliver({"1"}, 3);
  e.Deliver({"2", "2b"}, 14);
  e.Deliver({"2c", "3"}, 18);
  e.Deliver({"4"}, 19);
  e.engine().Finish();
}

// With a spill, a transaction longer than any before it is checked against the versions
// collected before it arrived (here, with retention 0, those of 1 and 2b on y and of 1 and 2
// on the list x, all below the collection point 18 - 3): no horizon miss, the same verdicts as
// offline, for list and register reads and for NoConflict with a collected writer (2b).
TEST(EngineRecheckTest, LongTransactionIsCheckedAgainstTheSpill) {
  // Two ways to get there: retention 0 with everything collected spilled; or retention 8 (the
  // late transaction's start, 11, is within it) with a one-byte budget that pushes everything
  // at or below the final point out of memory, and only what retention would have kept into
  // the spill.
  struct Mode {
    std::string name;
    int64_t retention;
    bool collected;
    uint64_t budget;
  };
  for (const Mode& m : {Mode{"spill everything", 0, true, 0}, Mode{"budget", 8, false, 1}})
    for (const LateCase& c : LateCases()) {
      SCOPED_TRACE(m.name + ": " + c.name);
      const TestHistory t = LateHistory(c);
      MemoryVersionSpill spill;
      Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, m.retention, &spill, m.collected,
                m.budget);
      e.Deliver({"1"}, 3);
      e.Deliver({"2", "2b"}, 14);
      e.Deliver({"2c", "3"}, 18);
      EXPECT_GT(spill.versions(), 0u);  // versions of 1 (and 2) were collected into the spill
      e.Deliver({"4"}, 19);
      e.engine().Finish();
      const std::vector<std::string> got = e.Take();
      EXPECT_THAT(got, UnorderedElementsAreArray(c.expected));
      // The offline check of the same history agrees.
      EXPECT_THAT(got, UnorderedElementsAreArray(ChronosSi(e.h())));
      EXPECT_EQ(e.stats().horizon_misses, 0u);
      EXPECT_GT(e.stats().reloads, 0u);
      EXPECT_EQ(e.reload_seconds().size(), e.stats().reloads) << "each reload is timed";
      EXPECT_EQ(e.stats().spill_errors, 0u);
    }
}

// A pruned spill (spill_retention) no longer answers for snapshots at or below its prune point:
// the late transaction, which starts at 11, finds the spill pruned up to
// 18 - max(1, longest transaction 3) = 15, and each of its checks that needs the spill is a
// horizon miss, never a verdict from what the spill happens to hold still. A retention that
// reaches its start keeps every verdict.
TEST(EngineRecheckTest, PrunedSpillMakesOlderSnapshotsHorizonMisses) {
  for (int64_t spill_retention : {1, 8}) {
    for (const LateCase& c : LateCases()) {
      SCOPED_TRACE(fmt::format("spill_retention {}: {}", spill_retention, c.name));
      const TestHistory t = LateHistory(c);
      MemoryVersionSpill spill;
      Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, true, 0, spill_retention);
      DeliverLate(e);
      const std::vector<std::string> got = e.Take();
      if (spill_retention == 1) {
        EXPECT_GT(e.stats().spill_pruned, 0u);
        EXPECT_GT(e.stats().horizon_misses, 0u);
        // Only verdicts found without the spill (in memory), never one from a partial spill.
        for (const std::string& v : got) EXPECT_THAT(c.expected, Contains(v)) << "a false alarm";
      } else {
        EXPECT_EQ(e.stats().horizon_misses, 0u);
        EXPECT_THAT(got, UnorderedElementsAreArray(c.expected));
      }
      EXPECT_EQ(e.stats().spill_errors, 0u);
    }
  }
}

// Under a memory budget a key idle long enough gives its last version to the spill (an
// eviction). Reads of it are then checked against the spilled version: at or below the final
// point at once; above it they stay pending, so that a version arriving later is still the one
// they see. Late versions older than the spilled one are hidden by it, for reads and re-checks.
TEST(EngineRecheckTest, EvictedKeyIsCheckedFromTheSpill) {
  TestHistory t;
  t.Txn("W1", "a", 10, 20).W(kX, 1).W(kY, 1);
  t.Txn("W0", "b", 1, 5).W(kX, 0);      // late: older than W1
  t.Txn("R1", "c", 200, 201).R(kX, 1);  // sees W1 (not the late W0)
  t.Txn("R2", "d", 200, 202).R(kX, 0);  // EXT: sees W1
  t.Txn("R3", "e", 300, 301).R(kX, 1);  // pending when W0b arrives
  t.Txn("W0b", "f", 6, 7).W(kX, 7);     // late: older than W1
  t.Txn("R4", "g", 400, 401).R(kY, 9);  // pending (y has nothing in memory) when W9 arrives
  t.Txn("W9", "h", 380, 390).W(kY, 9);
  const History h = t.Build();
  std::vector<std::string> expected = ChronosSi(h);
  ASSERT_THAT(expected, ElementsAre("EXT/before R2,W0 k=0"));

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  e.Deliver({"W1"}, 21);
  for (int64_t w = 22; w < 100; ++w) e.Deliver({}, w);  // x stays idle: evicted
  ASSERT_EQ(e.stats().evicted_keys, 2u);
  EXPECT_EQ(e.stats().retained_versions, 0u);
  EXPECT_EQ(e.stats().resident_keys, 0u);  // the keys' states left memory too
  e.Deliver({"W0"}, 100);
  e.Deliver({"R1", "R2"}, 250);
  e.Deliver({"R3"}, 260);
  e.Deliver({"W0b"}, 270);
  e.Deliver({"R4"}, 350);
  e.Deliver({"W9"}, 360);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), UnorderedElementsAreArray(expected));
  EXPECT_EQ(e.stats().late_arrivals, 2u);
  EXPECT_EQ(e.stats().horizon_misses, 0u);
  EXPECT_EQ(e.stats().spill_errors, 0u);
  EXPECT_GT(e.stats().reloads, 0u);
}

// 100 keys, each written once (W<k>, key k holds k), then reads of the first ten (R<k>, one of
// them wrong: key 3 holds 3), long after: by then, under a budget, the keys are evicted.
TestHistory TenReadsOfEvictedKeys() {
  TestHistory t;
  for (int k = 0; k < 100; ++k) t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
  for (int k = 0; k < 10; ++k) {
    t.Txn(fmt::format("R{}", k), "r", 5000 + 2 * k, 5001 + 2 * k).R(k, k == 3 ? 4 : k);
  }
  return t;
}

// An evicted key's state leaves memory with its version and comes back, from its record in the
// spill, at its next read or write. A key that comes back only to be read leaves again as it is,
// without writing anything; one written again is evicted with its new version.
TEST(EngineRecheckTest, EvictedKeysStateLeavesMemoryAndComesBack) {
  constexpr int kKeys = 100;
  TestHistory t = TenReadsOfEvictedKeys();
  t.Txn("W0b", "w", 9000, 9001).W(0, 50).W(3, 53);  // writes two of them again
  t.Txn("R0b", "r", 9100, 9101).R(0, 50).R(3, 3);   // EXT on key 3: it holds 53 now
  const History h = t.Build();
  std::vector<std::string> expected = ChronosSi(h);
  ASSERT_THAT(expected, UnorderedElementsAre("EXT/never R3 k=3", "EXT/before R0b,W3 k=3"));

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  for (int k = 0; k < kKeys; ++k) e.Deliver({fmt::format("W{}", k)}, 11 + 2 * k);
  for (int64_t w = 1000; w < 1100; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_EQ(e.stats().restored_keys, 0u);
  const uint64_t spilled = e.stats().spilled_versions;

  // Read at or below the final point: final at once, judged against the spilled bases.
  for (int k = 0; k < 10; ++k) e.Deliver({fmt::format("R{}", k)}, 5001 + 2 * k);
  EXPECT_EQ(e.stats().restored_keys, 10u);
  EXPECT_THAT(e.Take(), ElementsAre("EXT/never R3 k=3"));
  // Idle again: they leave as they came, with nothing written to the spill (once idle for as
  // long as the wait, which the evictions without returns have shortened).
  for (int64_t w = 5100; w < 5400; ++w) e.Deliver({}, w);
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys) + 10);
  EXPECT_EQ(e.stats().spilled_versions, spilled);

  // Written again, then read: the new versions are checked as any others.
  e.Deliver({"W0b"}, 9050);
  EXPECT_EQ(e.stats().restored_keys, 12u);
  e.Deliver({"R0b"});
  e.engine().Finish();
  EXPECT_THAT(e.Take(), ElementsAre("EXT/before R0b,W3 k=3"));
  EXPECT_EQ(e.stats().horizon_misses, 0u);
  EXPECT_EQ(e.stats().spill_errors, 0u);
}

// Keys the history forgets (Engine::ForgetKeys) are looked up in the spill, by name, at their
// next read or write: an evicted one comes back with what it held, one never evicted is a new
// key. MarkKeys marks exactly the keys whose state in memory holds something, which must not be
// forgotten: they keep their state.
TEST(EngineRecheckTest, ForgottenKeysAreLookedUpInTheSpill) {
  constexpr int kKeys = 100;
  TestHistory t = TenReadsOfEvictedKeys();
  t.Txn("N", "n", 6000, 6001).R(500, 0);  // a key never touched before: EXT, not 0
  t.Txn("W0b", "w", 9000, 9001).W(0, 50).W(3, 53);
  t.Txn("R0b", "r", 9100, 9101).R(0, 50).R(3, 3);  // EXT on key 3: it holds 53 now
  const History h = t.Build();
  std::vector<std::string> expected = ChronosSi(h);
  ASSERT_THAT(expected, UnorderedElementsAre("EXT/never R3 k=3", "EXT/never N k=500",
                                             "EXT/before R0b,W3 k=3"));

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  for (int k = 0; k < kKeys; ++k) e.Deliver({fmt::format("W{}", k)}, 11 + 2 * k);
  for (int64_t w = 1000; w < 1100; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  auto marked = [&e] {
    std::vector<uint64_t> marks;
    e.engine().MarkKeys(marks);
    std::vector<int64_t> keys;
    for (size_t k = 0; k < marks.size() * 64; ++k) {
      if ((marks[k / 64] >> (k % 64) & 1) != 0) keys.push_back(e.h().key(KeyId(k)).payload);
    }
    return keys;
  };
  EXPECT_THAT(marked(), ElementsAre());
  std::vector<KeyId> all;
  for (uint32_t k = 0; k < h.key_count(); ++k) all.push_back(KeyId(k));
  e.engine().ForgetKeys(all);
  EXPECT_EQ(e.stats().forgotten_keys, h.key_count());

  for (int k = 0; k < 10; ++k) e.Deliver({fmt::format("R{}", k)}, 5001 + 2 * k);
  EXPECT_EQ(e.stats().restored_keys, 10u);
  EXPECT_EQ(e.stats().forgotten_returns, 10u);
  EXPECT_THAT(e.Take(), ElementsAre("EXT/never R3 k=3"));
  // Back from the spill, they hold their spilled bases: marked (but those evicted again
  // already, as the wait is short by now), and not forgotten.
  const std::vector<int64_t> held = marked();
  EXPECT_THAT(held, Contains(9));
  EXPECT_THAT(held, Each(Lt(10)));
  std::vector<KeyId> back;
  for (int k = 0; k < 10; ++k) back.push_back(h.FindIntKey(k));
  e.engine().ForgetKeys(back);
  EXPECT_EQ(e.stats().forgotten_keys, h.key_count() + 10 - held.size());

  e.Deliver({"N"}, 6001);
  EXPECT_EQ(e.stats().new_key_lookups, 1u);
  e.Deliver({"W0b"}, 9050);
  e.Deliver({"R0b"});
  e.engine().Finish();
  EXPECT_THAT(e.Take(), UnorderedElementsAre("EXT/never N k=500", "EXT/before R0b,W3 k=3"));
  EXPECT_EQ(e.stats().horizon_misses, 0u);
  EXPECT_EQ(e.stats().spill_errors, 0u);
}

// What an evicted key's record keeps is what late checks of it need: the versions it dropped
// (a late read that needed one is a horizon miss, not a verdict against an older value) and its
// longest writer (a late writer overlapping the long one is still found).
TEST(EngineRecheckTest, EvictedKeysRecordKeepsWhatLateChecksNeed) {
  TestHistory t;
  t.Txn("W1", "a", 1, 10).W(kX, 1);
  t.Txn("W2", "b", 11, 20).W(kX, 2);
  t.Txn("W3", "c", 21, 30).W(kX, 3);
  t.Txn("U0", "d", 100, 900).W(kY, 5);  // a long writer
  t.Txn("R", "e", 15, 16).R(kX, 1);     // late: right, but W1 was dropped
  t.Txn("T", "f", 200, 300).W(kY, 6);   // late: overlaps U0
  const History h = t.Build();
  const std::vector<std::string> expected = ChronosSi(h);
  ASSERT_EQ(expected.size(), 1u);  // NoConflict U0, T

  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  e.Deliver({"W1", "W2", "W3", "U0"}, 900);
  for (int64_t w = 1000; w < 1200; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().resident_keys, 0u);
  ASSERT_EQ(e.stats().spilled_versions, 2u) << "W1 and W2 were dropped, not spilled";
  e.Deliver({"R", "T"}, 1300);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), UnorderedElementsAreArray(expected));
  EXPECT_EQ(e.stats().restored_keys, 2u);
  EXPECT_EQ(e.stats().horizon_misses, 1u);  // R
  EXPECT_EQ(e.stats().spill_errors, 0u);
}

// A key only ever read holds nothing a fresh state would not once its reads are final: under a
// memory budget its state leaves memory and is made again at its next read. Without one it stays.
TEST(EngineRecheckTest, KeysOnlyReadLeaveMemoryUnderABudget) {
  constexpr int kKeys = 50;
  TestHistory t;
  t.DefaultInitial(0);
  for (int k = 0; k < kKeys; ++k) {
    t.Txn(fmt::format("R{}", k), "r", 10 + 2 * k, 11 + 2 * k).R(k, k == 7 ? 1 : 0);
  }
  t.Txn("Rb", "r", 2000, 2001).R(7, 2);  // key 7 again, wrong again
  const History h = t.Build();
  const std::vector<std::string> expected = ChronosSi(h);
  ASSERT_EQ(expected.size(), 2u);

  for (uint64_t budget : {0, 1}) {
    SCOPED_TRACE(budget);
    MemoryVersionSpill spill;
    Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
              budget);
    for (int k = 0; k < kKeys; ++k) e.Deliver({fmt::format("R{}", k)});
    EXPECT_EQ(e.stats().resident_keys, static_cast<uint64_t>(kKeys));
    for (int64_t w = 200; w < 300; ++w) e.Deliver({}, w);
    EXPECT_EQ(e.stats().resident_keys, budget > 0 ? 0u : static_cast<uint64_t>(kKeys));
    EXPECT_THAT(e.Take(), ElementsAre(expected[0]));
    e.Deliver({"Rb"});
    EXPECT_EQ(e.stats().resident_keys, budget > 0 ? 1u : static_cast<uint64_t>(kKeys));
    e.engine().Finish();
    EXPECT_THAT(e.Take(), ElementsAre(expected[1]));
    EXPECT_EQ(e.stats().evicted_keys, 0u) << "nothing was written: nothing to evict";
  }
}

// Eviction backs off when evicted keys come back soon: a key read again shortly after it was
// evicted costs a lookup in the spill each time, so keys must stay idle longer before they are
// evicted (up to 65,536 advances). Keys written once and never read again take the wait down
// below 64 advances.
TEST(EngineRecheckTest, EvictionWaitsLongerWhenEvictedKeysComeBackSoon) {
  constexpr int kCold = 300;
  constexpr int kHot = 8;
  constexpr int kReads = 800;
  TestHistory t;
  for (int k = 0; k < kCold; ++k) {
    t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
  }
  // Key i % kHot read at advance i: each hot key every kHot advances.
  for (int i = 0; i < kReads; ++i) {
    t.Txn(fmt::format("R{}", i), "r", 10000 + 10 * i, 10001 + 10 * i).R(i % kHot, i % kHot);
  }
  MemoryVersionSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  for (int k = 0; k < kCold; ++k) e.Deliver({fmt::format("W{}", k)}, 11 + 2 * k);
  for (int64_t w = 1000; w < 1200; ++w) e.Deliver({}, w);
  EXPECT_GT(e.stats().evicted_keys, 200u);
  EXPECT_LT(e.stats().eviction_idle_advances, 64u);
  uint64_t restored_late = 0;
  for (int i = 0; i < kReads; ++i) {
    if (i == kReads - 200) restored_late = e.stats().restored_keys;
    e.Deliver({fmt::format("R{}", i)}, 10001 + 10 * i);
  }
  // The wait grew past the time a hot key stays away, and the hot keys stopped leaving.
  EXPECT_GE(e.stats().eviction_idle_advances, static_cast<uint64_t>(kHot));
  EXPECT_LE(e.stats().restored_keys - restored_late, 1u);
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());  // every read saw its key's spilled version
  EXPECT_EQ(e.stats().horizon_misses, 0u);
}

// Keys that stay away long after their eviction (a new key written at every advance, some read
// back 300 advances later) take the wait down to a single advance: each stays in memory for a
// few advances instead of 64, and the reads still see the spilled versions.
TEST(EngineRecheckTest, KeysThatStayAwayLeaveMemorySoon) {
  constexpr int kKeys = 2000;
  TestHistory t;
  for (int k = 0; k < kKeys; ++k) {
    t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
    const int back = std::max(0, k - 300);
    if (k % 8 == 7) t.Txn(fmt::format("R{}", k), "r", 12 + 2 * k, 12 + 2 * k).R(back, back);
  }
  auto run = [&t](uint64_t budget, uint64_t* resident_at_most) {
    MemoryVersionSpill spill;
    Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
              budget);
    *resident_at_most = 0;
    for (int k = 0; k < kKeys; ++k) {
      e.Deliver({fmt::format("W{}", k)});
      if (k % 8 == 7) e.Deliver({fmt::format("R{}", k)});
      e.Deliver({}, 12 + 2 * k);
      if (k > kKeys / 2) *resident_at_most = std::max(*resident_at_most, e.stats().resident_keys);
    }
    e.engine().Finish();
    EXPECT_THAT(e.Take(), IsEmpty());
    EXPECT_EQ(e.stats().horizon_misses, 0u);
    return e.stats().eviction_idle_advances;
  };
  uint64_t bounded = 0;
  EXPECT_EQ(run(/*budget=*/1, &bounded), 1u);
  EXPECT_LT(bounded, 16u);
  // Without a budget every key stays.
  uint64_t unbounded = 0;
  EXPECT_EQ(run(/*budget=*/0, &unbounded), 0u);
  EXPECT_GT(unbounded, 64u);
}

// Keys in memory together, then evicted, give back the memory their states took: the key
// table's array of states shrinks once at most a quarter of it is in use.
// One transaction W<k> per key k, writing it.
TestHistory OneWriterPerKey(int keys) {
  TestHistory t;
  for (int k = 0; k < keys; ++k) t.Txn(fmt::format("W{}", k), "w", 10 + 2 * k, 11 + 2 * k).W(k, k);
  return t;
}

// An engine with a one-byte budget over an in-memory spill, given every writer of
// OneWriterPerKey(keys) in one batch, without a watermark: every key is in memory at once, none
// final.
struct AllWritersInMemory {
  explicit AllWritersInMemory(int keys)
      : e(OneWriterPerKey(keys), IsolationLevel::kSnapshotIsolation, 5000, 0, &spill,
          /*spill_collected=*/false, /*memory_budget=*/1) {
    std::vector<TxnId> all;
    for (int k = 0; k < keys; ++k) all.push_back(e.h().FindTxn(fmt::format("W{}", k)));
    e.engine().Deliver(e.stream(), all, std::nullopt);
  }
  MemoryVersionSpill spill;
  Harness e;
};

TEST(EngineRecheckTest, KeyStatesGiveTheirMemoryBackOnceEvicted) {
  constexpr int kKeys = 5000;
  AllWritersInMemory run(kKeys);
  Harness& e = run.e;
  const uint64_t together = e.stats().memory_bytes;
  EXPECT_EQ(e.stats().resident_keys, static_cast<uint64_t>(kKeys));
  for (int64_t w = 20000; w < 20300; ++w) e.Deliver({}, w);
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  EXPECT_LT(e.stats().memory_bytes * 4, together)
      << e.stats().memory_bytes << " bytes held after eviction, " << together << " before";
}

// A burst of idle keys (all final at once, far over the budget) leaves memory over several
// advances, at most 16384 keys each, so that no single write to the spill holds the engine long.
TEST(EngineRecheckTest, EvictionsAreSpreadOverAdvances) {
  constexpr int kKeys = 40000;
  AllWritersInMemory run(kKeys);
  Harness& e = run.e;
  std::vector<uint64_t> per_advance;
  uint64_t before = 0;
  for (int64_t w = 200000; w < 200300; ++w) {
    e.Deliver({}, w);
    if (e.stats().evicted_keys != before) per_advance.push_back(e.stats().evicted_keys - before);
    before = e.stats().evicted_keys;
  }
  EXPECT_EQ(e.stats().evicted_keys, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(e.stats().resident_keys, 0u);
  EXPECT_THAT(per_advance, ElementsAre(16384u, 16384u, kKeys - 2 * 16384u));
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
}

// A spill whose reads fail once told to (the writes still go through).
class FailingReadsSpill final : public VersionSpill {
 public:
  void Put(std::string_view key, const SpilledVersion& v) override { inner_.Put(key, v); }
  void Replace(std::string_view key, const SpilledVersion& v) override { inner_.Replace(key, v); }
  absl::Status Flush() override { return inner_.Flush(); }
  absl::StatusOr<std::optional<SpilledVersion>> NewestBefore(
      std::string_view key, const internal::OrderKey& point) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.NewestBefore(key, point);
  }
  absl::StatusOr<std::optional<SpilledVersion>> Find(std::string_view key,
                                                     const internal::OrderKey& at) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.Find(key, at);
  }
  absl::Status ScanAfter(std::string_view key, const internal::OrderKey& after,
                         absl::FunctionRef<bool(const SpilledVersion&)> fn) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.ScanAfter(key, after, fn);
  }
  void PruneUpTo(Timestamp point) override { inner_.PruneUpTo(point); }
  absl::Status Compact() override { return inner_.Compact(); }
  void PutKey(std::string_view key, const SpilledKey& record) override {
    inner_.PutKey(key, record);
  }
  absl::StatusOr<std::optional<SpilledKey>> FindKey(std::string_view key) override {
    if (fail_) return absl::UnavailableError("the disk is gone");
    return inner_.FindKey(key);
  }
  uint64_t versions() const override { return inner_.versions(); }
  uint64_t bytes() const override { return inner_.bytes(); }
  uint64_t pruned() const override { return inner_.pruned(); }
  void Fail() { fail_ = true; }

 private:
  MemoryVersionSpill inner_;
  bool fail_ = false;
};

// A read of an evicted key that the spill cannot answer goes unjudged and counted, never a
// verdict made up without its base.
TEST(EngineRecheckTest, EvictedKeyWhoseSpillFailsIsAHorizonMiss) {
  TestHistory t;
  t.Txn("W1", "a", 10, 20).W(kX, 1);
  t.Txn("R1", "b", 200, 201).R(kX, 5);  // wrong, but its base cannot be read
  FailingReadsSpill spill;
  Harness e(t, IsolationLevel::kSnapshotIsolation, 5000, 0, &spill, /*spill_collected=*/false,
            /*memory_budget=*/1);
  e.Deliver({"W1"}, 21);
  for (int64_t w = 22; w < 100; ++w) e.Deliver({}, w);
  ASSERT_EQ(e.stats().evicted_keys, 1u);
  spill.Fail();
  e.Deliver({"R1"}, 150);  // pending: above the final point
  e.engine().Finish();
  EXPECT_THAT(e.Take(), IsEmpty());
  EXPECT_EQ(e.stats().horizon_misses, 1u);
  EXPECT_GE(e.stats().spill_errors, 1u);
}

}  // namespace
}  // namespace isowatch::engine
