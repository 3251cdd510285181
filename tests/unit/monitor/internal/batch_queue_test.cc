// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/internal/batch_queue.h"

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include <gtest/gtest.h>

namespace isowatch::monitor::internal {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);

DurableBatch BatchOf(uint64_t seq) {
  auto b = std::make_shared<v1::IngestBatch>();
  b->set_seq(seq);
  return DurableBatch{.batch = std::move(b), .received_ms = 0};
}

// Publishes the batches of `seqs` at the positions of the same numbers, freeing one slot each.
void PublishAt(BatchQueue& q, std::vector<uint64_t> seqs) {
  std::vector<std::pair<uint64_t, DurableBatch>> durable;
  for (uint64_t s : seqs) durable.emplace_back(s, BatchOf(s));
  q.Publish(seqs.size(), durable);
  EXPECT_TRUE(durable.empty());
}

std::vector<uint64_t> Seqs(const std::vector<DurableBatch>& taken) {
  std::vector<uint64_t> out;
  for (const DurableBatch& b : taken) out.push_back(b.batch->seq());
  return out;
}

TEST(BatchQueueTest, FullQueueRefusesOrWaitsForRoom) {
  BatchQueue q(2);
  ASSERT_TRUE(q.Reserve(/*wait=*/false).ok());
  ASSERT_TRUE(q.Reserve(/*wait=*/false).ok());
  EXPECT_EQ(q.Reserve(/*wait=*/false).code(), absl::StatusCode::kResourceExhausted);
  PublishAt(q, {1, 2});  // durable, still taking room until taken
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.Reserve(/*wait=*/false).code(), absl::StatusCode::kResourceExhausted);

  absl::Status waited = absl::UnknownError("not yet");
  std::thread waiter([&] { waited = q.Reserve(/*wait=*/true); });
  std::vector<DurableBatch> taken;
  EXPECT_FALSE(q.Take(kWait, &taken));
  waiter.join();  // taking the batches made room
  EXPECT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(Seqs(taken), (std::vector<uint64_t>{1, 2}));
}

TEST(BatchQueueTest, TakesInLogOrderAndWaitsForAReservedGap) {
  BatchQueue q(8);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Reserve(/*wait=*/false).ok());
  PublishAt(q, {2, 3});  // position 1 is still being appended
  std::vector<DurableBatch> taken;
  EXPECT_FALSE(q.Take(absl::ZeroDuration(), &taken));
  EXPECT_TRUE(taken.empty());
  PublishAt(q, {1});
  EXPECT_FALSE(q.Take(kWait, &taken));
  EXPECT_EQ(Seqs(taken), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(q.next_position(), 4u);
}

TEST(BatchQueueTest, SkipsAGapNothingReservedCanFill) {
  BatchQueue q(8);
  q.set_next_position(10);
  ASSERT_TRUE(q.Reserve(/*wait=*/false).ok());
  ASSERT_TRUE(q.Reserve(/*wait=*/false).ok());
  q.Unreserve();       // position 10: its append failed
  PublishAt(q, {11});  // frees the last slot
  std::vector<DurableBatch> taken;
  EXPECT_FALSE(q.Take(kWait, &taken));
  EXPECT_EQ(Seqs(taken), (std::vector<uint64_t>{11}));
  EXPECT_EQ(q.next_position(), 12u);
}

TEST(BatchQueueTest, DrainRefusesNewBatchesAndEndsOnceEverythingIsTaken) {
  BatchQueue q(1);
  ASSERT_TRUE(q.Reserve(/*wait=*/false).ok());
  absl::Status waited;
  std::thread waiter([&] { waited = q.Reserve(/*wait=*/true); });  // waits for room
  q.Drain();
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(q.Reserve(/*wait=*/false).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(q.draining());
  // The batch reserved before the drain still goes through.
  std::vector<DurableBatch> taken;
  EXPECT_FALSE(q.Take(absl::ZeroDuration(), &taken));
  PublishAt(q, {1});
  EXPECT_TRUE(q.Take(kWait, &taken));
  EXPECT_EQ(Seqs(taken), (std::vector<uint64_t>{1}));
}

}  // namespace
}  // namespace isowatch::monitor::internal
