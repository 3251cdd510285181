// SPDX-License-Identifier: Apache-2.0
// The store's log and streams: batches read back in arrival order, sequence numbers, watermarks,
// headers and refusals per stream, truncation, syncs, concurrent writers and RocksDB's memory.
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/history/timestamp.h"
#include "isowatch/rocks/rocksdb_memory.h"
#include "isowatch/store/store.h"

#include "tests/unit/store/store_fixture.h"

namespace isowatch::store {
namespace {

using history::Timestamp;
using rocks::RocksDbMemory;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(StoreTest, ReadsTheLogBackInArrivalOrderAcrossStreams) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_log_position(), 1u);
  std::vector<Entry> expected;
  auto append = [&](std::string stream, uint64_t seq, std::optional<Timestamp> wm, bool eos) {
    const std::string bytes = fmt::format("{}#{}", stream, seq);
    auto pos = store->AppendBatch(stream, seq, wm, eos, bytes);
    ASSERT_TRUE(pos.ok()) << pos.status();
    if (!expected.empty()) {
      EXPECT_GT(*pos, expected.back().position);
    }
    expected.push_back({*pos, stream, seq, wm, eos, bytes});
  };
  append("a", 1, std::nullopt, false);
  append("b", 1, Timestamp{10, 0}, false);
  append("a", 2, Timestamp{5, 3}, false);
  append("c", 1, std::nullopt, false);
  append("b", 2, Timestamp{20, 1}, true);
  append("a", 3, std::nullopt, false);

  EXPECT_EQ(ReadAll(*store), expected);
  // From the middle.
  const std::vector<Entry> tail(expected.begin() + 3, expected.end());
  EXPECT_EQ(ReadAll(*store, expected[3].position), tail);
  EXPECT_TRUE(ReadAll(*store, store->next_log_position()).empty());

  // Stream records follow the durable batches.
  auto a = store->GetStream("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->durable_seq, 3u);
  EXPECT_EQ(a->watermark, (Timestamp{5, 3}));
  EXPECT_FALSE(a->closed);
  auto b = store->GetStream("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->durable_seq, 2u);
  EXPECT_TRUE(b->closed);
  EXPECT_EQ(b->watermark, (Timestamp{20, 1}));
  auto c = store->GetStream("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->watermark, std::nullopt);
  EXPECT_EQ(store->GetStream("d").status().code(), absl::StatusCode::kNotFound);

  std::vector<std::string> names;
  std::set<uint32_t> ids;
  for (const StreamRecord& r : store->ListStreams()) {
    names.push_back(r.name);
    ids.insert(r.id);
  }
  EXPECT_THAT(names, ElementsAre("a", "b", "c"));
  EXPECT_EQ(ids.size(), 3u);
}

TEST_F(StoreTest, CallbackErrorStopsReadLog) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, "x").ok());
  }
  int calls = 0;
  const absl::Status s = store->ReadLog(0, [&](const LogEntry& e) {
    ++calls;
    return e.seq == 2 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
}

TEST_F(StoreTest, RefusesASequenceNumberThatDoesNotFollowTheDurableOne) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  // A new stream starts at 1.
  auto gap = store->AppendBatch("s", 2, std::nullopt, false, "x");
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.status().message(), HasSubstr("\"s\""));
  EXPECT_EQ(store->GetStream("s").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, false, "one").ok());
  EXPECT_EQ(store->AppendBatch("s", 3, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A re-sent batch is the caller's to recognise; the store refuses it.
  EXPECT_EQ(store->AppendBatch("s", 1, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->AppendBatch("s", 0, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->AppendBatch("", 1, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kInvalidArgument);

  auto s = store->GetStream("s");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->durable_seq, 1u);
  const std::vector<Entry> log = ReadAll(*store);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].bytes, "one");
  EXPECT_TRUE(store->AppendBatch("s", 2, std::nullopt, false, "two").ok());
}

TEST_F(StoreTest, KeepsTheMemosOfRecentBatches) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto memo = [&](std::string_view stream, uint64_t seq) {
    absl::StatusOr<std::string> r = store->BatchMemo(stream, seq);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::string("error");
  };
  ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, false, "one", true, "m1").ok());
  ASSERT_TRUE(store->AppendBatch("s", 2, std::nullopt, false, "two").ok());
  ASSERT_TRUE(store->AppendBatch("t", 1, std::nullopt, false, "one", false, "t1").ok());
  EXPECT_EQ(memo("s", 1), "m1");
  EXPECT_EQ(memo("s", 2), "");  // had none
  EXPECT_EQ(memo("s", 3), "");  // not durable
  EXPECT_EQ(memo("t", 1), "t1");
  EXPECT_EQ(memo("u", 1), "");  // no such stream
  // A failed append keeps nothing.
  EXPECT_FALSE(store->AppendBatch("s", 4, std::nullopt, false, "x", true, "m4").ok());
  ASSERT_TRUE(store->AppendBatch("s", 3, std::nullopt, false, "three", true, "m3").ok());
  EXPECT_EQ(memo("s", 4), "");

  // They survive reopening.
  store.reset();
  store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(memo("s", 1), "m1");
  EXPECT_EQ(memo("t", 1), "t1");

  // The memos of a stream's latest kKeptRefusalBatches batches are kept; writing batch n's
  // forgets batch n - kKeptRefusalBatches's, and only that stream's.
  const uint64_t keep = Store::kKeptRefusalBatches;
  for (uint64_t seq = 4; seq <= keep; ++seq) {
    ASSERT_TRUE(
        store->AppendBatch("s", seq, std::nullopt, false, "b", false, "m" + std::to_string(seq))
            .ok());
  }
  EXPECT_EQ(memo("s", 1), "m1");
  ASSERT_TRUE(store->AppendBatch("s", keep + 1, std::nullopt, false, "b", false, "late").ok());
  EXPECT_EQ(memo("s", 1), "");
  EXPECT_EQ(memo("s", 2), "");  // had none
  EXPECT_EQ(memo("s", 3), "m3");
  EXPECT_EQ(memo("s", keep), "m" + std::to_string(keep));
  EXPECT_EQ(memo("s", keep + 1), "late");
  EXPECT_EQ(memo("t", 1), "t1");
  ASSERT_TRUE(store->AppendBatch("s", keep + 2, std::nullopt, false, "b", false, "later").ok());
  EXPECT_EQ(memo("s", 2), "");
  EXPECT_EQ(memo("s", 3), "m3");
  ASSERT_TRUE(store->AppendBatch("s", keep + 3, std::nullopt, false, "b", false, "latest").ok());
  EXPECT_EQ(memo("s", 3), "");
}

// Each claim raises the stream's epoch, durably; streams need no record to be claimed.
TEST_F(StoreTest, ClaimsRaiseTheEpochDurably) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->StreamEpoch("s"), 0u);
  EXPECT_EQ(*store->ClaimStream("s"), 1u);
  EXPECT_EQ(*store->ClaimStream("s"), 2u);
  EXPECT_EQ(*store->ClaimStream("t"), 1u);
  EXPECT_EQ(*store->StreamEpoch("s"), 2u);
  EXPECT_FALSE(store->GetStream("s").ok());  // no record made
  EXPECT_EQ(store->ClaimStream("").status().code(), absl::StatusCode::kInvalidArgument);
  store.reset();
  store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->StreamEpoch("s"), 2u);
  EXPECT_EQ(*store->ClaimStream("s"), 3u);
  EXPECT_EQ(*store->StreamEpoch("t"), 1u);
}

TEST_F(StoreTest, AClosedStreamTakesNoMoreBatches) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, true, "last").ok());
  auto after = store->AppendBatch("s", 2, std::nullopt, false, "x");
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(after.status().message(), HasSubstr("closed"));
  EXPECT_EQ(ReadAll(*store).size(), 1u);
}

TEST_F(StoreTest, KeepsTheHighestWatermark) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendBatch("s", 1, Timestamp{7, 2}, false, "").ok());
  ASSERT_TRUE(store->AppendBatch("s", 2, Timestamp{7, 1}, false, "").ok());
  ASSERT_TRUE(store->AppendBatch("s", 3, std::nullopt, false, "").ok());
  EXPECT_EQ(store->GetStream("s")->watermark, (Timestamp{7, 2}));
  // The log keeps each batch's own watermark.
  const std::vector<Entry> log = ReadAll(*store);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[1].watermark, (Timestamp{7, 1}));
  EXPECT_EQ(log[2].watermark, std::nullopt);
  ASSERT_TRUE(store->AppendBatch("s", 4, Timestamp{-3, 0}, false, "").ok());
  ASSERT_TRUE(store->AppendBatch("s", 5, Timestamp{8, -1}, false, "").ok());
  EXPECT_EQ(store->GetStream("s")->watermark, (Timestamp{8, -1}));
}

TEST_F(StoreTest, StreamHeaders) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SetStreamHeader("h", std::string("\0init", 5)).ok());
  auto h = store->GetStream("h");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->durable_seq, 0u);
  EXPECT_EQ(h->header, std::string("\0init", 5));
  ASSERT_TRUE(store->AppendBatch("h", 1, Timestamp{1, 0}, false, "b").ok());
  EXPECT_EQ(store->GetStream("h")->header, std::string("\0init", 5));
  ASSERT_TRUE(store->SetStreamHeader("h", "second").ok());
  h = store->GetStream("h");
  EXPECT_EQ(h->header, "second");
  EXPECT_EQ(h->durable_seq, 1u);
  EXPECT_EQ(store->SetStreamHeader("", "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, UnsyncedAppendsMadeDurableBySyncLogAreKeptAcrossReopening) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    // Appends of several streams without sync, with syncs running at the same time.
    std::vector<std::thread> writers;
    for (int w = 0; w < 3; ++w) {
      writers.emplace_back([&store, w] {
        const std::string stream = fmt::format("s{}", w);
        for (uint64_t seq = 1; seq <= 50; ++seq) {
          auto pos = store->AppendBatch(stream, seq, Timestamp{static_cast<int64_t>(seq), 0}, false,
                                        fmt::format("{}#{}", stream, seq), /*sync=*/false);
          EXPECT_TRUE(pos.ok()) << pos.status();
          if (seq % 10 == 0) {
            EXPECT_TRUE(store->SyncLog().ok());
          }
        }
      });
    }
    for (std::thread& t : writers) t.join();
    ASSERT_TRUE(store->SyncLog().ok());
    EXPECT_EQ(store->GetStream("s1")->durable_seq, 50u);
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  const std::vector<Entry> entries = ReadAll(*store);
  ASSERT_EQ(entries.size(), 150u);
  std::map<std::string, uint64_t> last;
  for (const Entry& e : entries) {
    EXPECT_EQ(e.seq, last[e.stream] + 1) << e.stream;
    last[e.stream] = e.seq;
    EXPECT_EQ(e.bytes, fmt::format("{}#{}", e.stream, e.seq));
  }
  for (int w = 0; w < 3; ++w) {
    auto r = store->GetStream(fmt::format("s{}", w));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->durable_seq, 50u);
    EXPECT_EQ(r->watermark, (Timestamp{50, 0}));
  }
}

TEST_F(StoreTest, SyncLogWithoutSyncWritesIsANoOp) {
  auto store = Store::Open(dir_, {.sync_writes = false});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->AppendBatch("a", 1, std::nullopt, false, "x", /*sync=*/false).ok());
  EXPECT_TRUE((*store)->SyncLog().ok());
  EXPECT_EQ(ReadAll(**store).size(), 1u);
}

TEST_F(StoreTest, ReportsRocksDbMemoryWithinItsBounds) {
  const std::string bytes(1000, 'x');
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    for (uint64_t seq = 1; seq <= 2000; ++seq) {
      ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, bytes, /*sync=*/false).ok());
    }
    const RocksDbMemory m = store->rocksdb_memory();
    EXPECT_GE(m.memtables, 2000u * bytes.size());
    EXPECT_LE(m.memtables, uint64_t{80} << 20);
    EXPECT_EQ(m.total(), m.memtables + m.table_readers + m.block_cache);
  }
  // Reopened, the log is in SST files: reading it back goes through the block cache.
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  uint64_t read = 0;
  ASSERT_TRUE(store
                  ->ReadLog(1,
                            [&](const LogEntry&) {
                              ++read;
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(read, 2000u);
  const RocksDbMemory m = store->rocksdb_memory();
  EXPECT_GT(m.block_cache, 0u);
  EXPECT_LE(m.block_cache, uint64_t{80} << 20);
  EXPECT_LE(m.table_readers, uint64_t{1} << 20);
}

// ---- Log truncation ----

TEST_F(StoreTest, TruncationDropsTheOldEntriesAndKeepsThePositions) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    for (uint64_t seq = 1; seq <= 10; ++seq) {
      ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, "b").ok());
    }
    EXPECT_EQ(store->TruncateLogBefore(12).code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(store->TruncateLogBefore(6).ok());
    EXPECT_EQ(store->first_log_position(), 6u);
    ASSERT_TRUE(store->TruncateLogBefore(3).ok());  // already done
    EXPECT_EQ(store->first_log_position(), 6u);
    const std::vector<Entry> log = ReadAll(*store);
    ASSERT_EQ(log.size(), 5u);
    EXPECT_EQ(log.front().seq, 6u);
    // Everything: the next position survives an empty log.
    ASSERT_TRUE(store->TruncateLogBefore(store->next_log_position()).ok());
    EXPECT_TRUE(ReadAll(*store).empty());
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->first_log_position(), 11u);
  EXPECT_EQ(store->next_log_position(), 11u);
  EXPECT_EQ(store->GetStream("s")->durable_seq, 10u);
  auto pos = store->AppendBatch("s", 11, std::nullopt, false, "b");
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(*pos, 11u);
}

// ---- Concurrency ----

TEST_F(StoreTest, ConcurrentAppendsPutsAndQueries) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  constexpr int kStreams = 4;
  constexpr uint64_t kBatches = 40;
  std::vector<std::thread> threads;
  threads.reserve(kStreams + 4);
  for (int t = 0; t < kStreams; ++t) {
    threads.emplace_back([&store, t] {
      const std::string stream = fmt::format("t{}", t);
      for (uint64_t seq = 1; seq <= kBatches; ++seq) {
        EXPECT_TRUE(store
                        ->AppendBatch(stream, seq, std::nullopt, seq == kBatches,
                                      fmt::format("{}:{}", stream, seq))
                        .ok());
      }
    });
  }
  // Two threads race to append the same batches of one stream: each batch is taken once.
  std::atomic<int> shared_ok{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&store, &shared_ok] {
      for (uint64_t seq = 1; seq <= kBatches; ++seq) {
        if (store->AppendBatch("shared", seq, std::nullopt, false, "x").ok()) ++shared_ok;
      }
    });
  }
  threads.emplace_back([&store] {
    for (int i = 0; i < 40; ++i) {
      EXPECT_TRUE(
          store->PutViolation(Violation(fmt::format("v{}", i % 30), "si", "EXT", {}, i)).ok());
    }
  });
  threads.emplace_back([&store] {
    for (int i = 0; i < 20; ++i) {
      auto page = store->QueryViolations({}, 7, "");
      EXPECT_TRUE(page.ok());
      EXPECT_LE(page->violations.size(), 7u);
      store->ListStreams();
    }
  });
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(store->CountViolations(), 30u);
  auto shared = store->GetStream("shared");
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(static_cast<uint64_t>(shared_ok.load()), shared->durable_seq);
  // Per stream, the log holds 1..n in position order.
  std::map<std::string, uint64_t> last_seq;
  for (const Entry& e : ReadAll(*store)) {
    EXPECT_EQ(e.seq, last_seq[e.stream] + 1) << e.stream;
    last_seq[e.stream] = e.seq;
  }
  for (int t = 0; t < kStreams; ++t) {
    EXPECT_EQ(last_seq[fmt::format("t{}", t)], kBatches);
    EXPECT_TRUE(store->GetStream(fmt::format("t{}", t))->closed);
  }
  EXPECT_EQ(last_seq["shared"], shared->durable_seq);
}

}  // namespace
}  // namespace isowatch::store
