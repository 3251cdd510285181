// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/memory_id_registry.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace isowatch::ingest {
namespace {

using Outcome = IdRegistry::Outcome;

constexpr char kStream[] = "s1";

uint64_t Fingerprint(size_t id) { return 1000 + id; }

// Records ids "1", "2", ..., "n" on `stream`.
void RecordRange(MemoryIdRegistry& r, size_t from, size_t to, const char* stream = kStream) {
  for (size_t id = from; id <= to; ++id) r.Record(stream, std::to_string(id), Fingerprint(id));
}

TEST(MemoryIdRegistryTest, UnboundedRemembersEveryId) {
  MemoryIdRegistry r;
  EXPECT_EQ(r.per_stream(), 0u);
  RecordRange(r, 1, 10'000);
  EXPECT_EQ(r.size(), 10'000u);
  for (size_t id = 1; id <= 10'000; id += 97) {
    EXPECT_EQ(r.Check(kStream, std::to_string(id), Fingerprint(id)), Outcome::kDuplicate) << id;
  }
  EXPECT_EQ(r.Check(kStream, "1", 7), Outcome::kConflict);
  EXPECT_EQ(r.Check(kStream, "10001", Fingerprint(10'001)), Outcome::kNew);
  EXPECT_EQ(r.Check("other", "1", Fingerprint(1)), Outcome::kNew);
}

// The guarantee, checked after every Record: an id with at most N new ids recorded after it is
// remembered; one with 2N or more is forgotten; between N + 1 and 2N ids are held.
TEST(MemoryIdRegistryTest, BoundedKeepsTheNewestNAndForgetsBeyondTwoN) {
  for (size_t n : {1u, 2u, 3u, 8u}) {
    SCOPED_TRACE(fmt::format("N = {}", n));
    MemoryIdRegistry r(n);
    EXPECT_EQ(r.per_stream(), n);
    for (size_t last = 1; last <= 7 * n + 3; ++last) {
      r.Record(kStream, std::to_string(last), Fingerprint(last));
      for (size_t id = 1; id <= last; ++id) {
        const size_t after = last - id;  // new ids recorded after `id`
        const Outcome o = r.Check(kStream, std::to_string(id), Fingerprint(id));
        if (after <= n) {
          EXPECT_EQ(o, Outcome::kDuplicate) << "id " << id << " after " << last;
          EXPECT_EQ(r.Check(kStream, std::to_string(id), 1), Outcome::kConflict);
        } else if (after >= 2 * n) {
          EXPECT_EQ(o, Outcome::kNew) << "id " << id << " after " << last;
        }
      }
      if (last > n) {
        EXPECT_GE(r.size(), n + 1) << last;
      } else {
        EXPECT_EQ(r.size(), last);
      }
      EXPECT_LE(r.size(), 2 * n) << last;
    }
  }
}

// Where in [N, 2N) an id is dropped depends on where it fell in its generation: exactly.
TEST(MemoryIdRegistryTest, GenerationsTurnOverEveryNIds) {
  MemoryIdRegistry r(4);
  RecordRange(r, 1, 4);  // current {1..4}
  EXPECT_EQ(r.size(), 4u);
  r.Record(kStream, "5", Fingerprint(5));  // previous {1..4}, current {5}
  EXPECT_EQ(r.size(), 5u);
  RecordRange(r, 6, 8);  // previous {1..4}, current {5..8}
  EXPECT_EQ(r.size(), 8u);
  EXPECT_EQ(r.Check(kStream, "1", Fingerprint(1)), Outcome::kDuplicate);
  r.Record(kStream, "9", Fingerprint(9));  // previous {5..8}, current {9}
  EXPECT_EQ(r.size(), 5u);
  for (int id = 1; id <= 4; ++id) {
    EXPECT_EQ(r.Check(kStream, std::to_string(id), Fingerprint(id)), Outcome::kNew) << id;
  }
  for (int id = 5; id <= 9; ++id) {
    EXPECT_EQ(r.Check(kStream, std::to_string(id), Fingerprint(id)), Outcome::kDuplicate) << id;
  }
}

// Beyond the window a re-sent id is new: it is accepted and remembered again, with the content it
// now has.
TEST(MemoryIdRegistryTest, AForgottenIdIsNewAgain) {
  MemoryIdRegistry r(2);
  RecordRange(r, 1, 5);
  ASSERT_EQ(r.Check(kStream, "1", Fingerprint(1)), Outcome::kNew);
  ASSERT_EQ(r.Check(kStream, "1", 42), Outcome::kNew);  // not even a conflict
  r.Record(kStream, "1", 42);
  EXPECT_EQ(r.Check(kStream, "1", 42), Outcome::kDuplicate);
  EXPECT_EQ(r.Check(kStream, "1", Fingerprint(1)), Outcome::kConflict);
}

// Recording an id already remembered (in either generation) changes nothing: it neither counts
// towards the turnover nor moves the id to the current generation.
TEST(MemoryIdRegistryTest, RecordingARememberedIdChangesNothing) {
  MemoryIdRegistry r(3);
  RecordRange(r, 1, 3);
  r.Record(kStream, "2", Fingerprint(2));
  r.Record(kStream, "2", 99);  // another fingerprint: the first one stays
  EXPECT_EQ(r.size(), 3u);
  EXPECT_EQ(r.Check(kStream, "2", Fingerprint(2)), Outcome::kDuplicate);
  RecordRange(r, 4, 4);                    // previous {1, 2, 3}, current {4}
  r.Record(kStream, "1", Fingerprint(1));  // in the previous generation: stays there
  EXPECT_EQ(r.size(), 4u);
  RecordRange(r, 5, 7);  // previous {4, 5, 6}, current {7}: 1 is gone
  EXPECT_EQ(r.Check(kStream, "1", Fingerprint(1)), Outcome::kNew);
  EXPECT_EQ(r.Check(kStream, "4", Fingerprint(4)), Outcome::kDuplicate);
}

TEST(MemoryIdRegistryTest, EachStreamHasItsOwnBound) {
  MemoryIdRegistry r(2);
  RecordRange(r, 1, 2, "a");
  RecordRange(r, 1, 100, "b");
  EXPECT_EQ(r.Check("a", "1", Fingerprint(1)), Outcome::kDuplicate);
  EXPECT_EQ(r.Check("a", "2", Fingerprint(2)), Outcome::kDuplicate);
  EXPECT_EQ(r.Check("b", "1", Fingerprint(1)), Outcome::kNew);
  EXPECT_EQ(r.Check("b", "100", Fingerprint(100)), Outcome::kDuplicate);
  EXPECT_EQ(r.size(), 2u + 4u);  // b: previous {97, 98}, current {99, 100}
}

// Integer and string ids share one generation; "7" and 7 are one id.
TEST(MemoryIdRegistryTest, IntegerAndStringIdsCountTogether) {
  MemoryIdRegistry r(2);
  r.Record(kStream, "7", 1);
  r.Record(kStream, "txn-a", 2);
  EXPECT_EQ(r.Check(kStream, "7", 1), Outcome::kDuplicate);
  EXPECT_EQ(r.Check(kStream, "07", 1), Outcome::kNew);  // not the integer's text
  r.Record(kStream, "txn-b", 3);                        // previous {7, txn-a}, current {txn-b}
  r.Record(kStream, "-8", 4);                           // current {txn-b, -8}
  EXPECT_EQ(r.Check(kStream, "txn-a", 2), Outcome::kDuplicate);
  EXPECT_EQ(r.Check(kStream, "-8", 5), Outcome::kConflict);
  r.Record(kStream, "9", 5);  // previous {txn-b, -8}, current {9}
  EXPECT_EQ(r.Check(kStream, "7", 1), Outcome::kNew);
  EXPECT_EQ(r.Check(kStream, "txn-a", 2), Outcome::kNew);
  EXPECT_EQ(r.Check(kStream, "txn-b", 3), Outcome::kDuplicate);
  EXPECT_EQ(r.size(), 3u);
}

// A daemon rebuilds its registry at start from the log: the same Record calls, without the Checks
// that came with them and with other streams interleaved differently. It remembers the same ids.
TEST(MemoryIdRegistryTest, TheSameRecordsGiveTheSameState) {
  constexpr size_t kBound = 5;
  MemoryIdRegistry live(kBound);
  MemoryIdRegistry rebuilt(kBound);
  std::vector<std::string> ids;
  for (size_t i = 0; i < 40; ++i) {
    // Some ids come twice (a duplicate, recorded again: a no-op).
    const std::string id = std::to_string(i % 7 == 6 ? i - 3 : i);
    ids.push_back(id);
    if (live.Check(kStream, id, Fingerprint(i)) == Outcome::kNew) {
      live.Record(kStream, id, Fingerprint(i));
    }
    live.Record("other", id, 1);
  }
  for (size_t i = 0; i < 40; ++i) rebuilt.Record("other", ids[i], 1);
  for (size_t i = 0; i < 40; ++i) {
    if (rebuilt.Check(kStream, ids[i], Fingerprint(i)) == Outcome::kNew) {
      rebuilt.Record(kStream, ids[i], Fingerprint(i));
    }
  }
  EXPECT_EQ(live.size(), rebuilt.size());
  for (size_t i = 0; i < 40; ++i) {
    for (const char* stream : {kStream, "other"}) {
      for (uint64_t fp : {Fingerprint(i), uint64_t{1}}) {
        EXPECT_EQ(live.Check(stream, ids[i], fp), rebuilt.Check(stream, ids[i], fp))
            << stream << " " << ids[i];
      }
    }
  }
}

// Ids are unique across streams: OwnerOf names the other stream that holds an id, never the
// asking stream itself, and only while the id is remembered.
TEST(MemoryIdRegistryTest, OwnerOfNamesTheOtherStreamThatHoldsAnId) {
  MemoryIdRegistry r(/*per_stream=*/2);
  r.Record("a", "7", 1);
  r.Record("a", "x-1", 2);
  EXPECT_EQ(r.OwnerOf("b", "7"), "a");
  EXPECT_EQ(r.OwnerOf("b", "x-1"), "a");
  EXPECT_EQ(r.OwnerOf("a", "7"), std::nullopt);  // its own
  EXPECT_EQ(r.OwnerOf("b", "8"), std::nullopt);
  EXPECT_EQ(r.OwnerOf("b", "07"), std::nullopt);  // not the integer 7
  r.Record("b", "9", 3);
  EXPECT_EQ(r.OwnerOf("a", "9"), "b");
  // Four more ids on "a": 7 and x-1 are forgotten (2N after them), so nobody holds them.
  for (const char* id : {"10", "11", "12", "13"}) r.Record("a", id, 4);
  EXPECT_EQ(r.Check("a", "7", 1), IdRegistry::Outcome::kNew);
  EXPECT_EQ(r.OwnerOf("b", "7"), std::nullopt);
  EXPECT_EQ(r.OwnerOf("b", "x-1"), std::nullopt);
  EXPECT_EQ(r.OwnerOf("b", "13"), "a");
}

// A checkpoint restores the owners with the ids.
TEST(MemoryIdRegistryTest, OwnersSurviveACheckpoint) {
  MemoryIdRegistry r;
  r.Record("a", "1", 1);
  r.Record("b", "two", 2);
  v1::IdRegistryCheckpoint saved;
  r.Save(&saved);
  MemoryIdRegistry restored;
  ASSERT_TRUE(restored.Restore(saved).ok());
  EXPECT_EQ(restored.OwnerOf("b", "1"), "a");
  EXPECT_EQ(restored.OwnerOf("a", "two"), "b");
  EXPECT_EQ(restored.OwnerOf("c", "1"), "a");
  EXPECT_EQ(restored.OwnerOf("a", "1"), std::nullopt);
  restored.Record("c", "3", 3);
  EXPECT_EQ(restored.OwnerOf("a", "3"), "c");
}

}  // namespace
}  // namespace isowatch::ingest
