// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/batch_pipe.h"

#include <thread>

#include <gtest/gtest.h>

namespace isowatch::formats::internal {
namespace {

struct Batch {
  int value = 0;
};

// TryTakeEmpty hands out the free batches and then says it would wait, without waiting; a batch
// given back is handed out again; once the consumer cancels, it returns at once with no batch.
TEST(BatchPipeTest, TryTakeEmptyNeverWaits) {
  BatchPipe<Batch> pipe(2);
  Batch* a = nullptr;
  Batch* b = nullptr;
  ASSERT_TRUE(pipe.TryTakeEmpty(&a));
  ASSERT_TRUE(pipe.TryTakeEmpty(&b));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  Batch* c = nullptr;
  EXPECT_FALSE(pipe.TryTakeEmpty(&c));
  EXPECT_EQ(c, nullptr);

  a->value = 7;
  pipe.Send(a);
  Batch* got = pipe.Receive();
  ASSERT_EQ(got, a);
  EXPECT_EQ(got->value, 7);
  pipe.Release(got);
  ASSERT_TRUE(pipe.TryTakeEmpty(&c));
  EXPECT_EQ(c, a);

  EXPECT_FALSE(pipe.TryTakeEmpty(&c));
  pipe.Cancel();
  c = a;
  EXPECT_TRUE(pipe.TryTakeEmpty(&c));
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(pipe.TakeEmpty(), nullptr);
}

// A producer that tries first and waits only when it must sees every batch through, in order.
TEST(BatchPipeTest, TryingProducerAndWaitingConsumerAgree) {
  constexpr int kBatches = 1000;
  BatchPipe<Batch> pipe(3);
  std::thread producer([&] {
    for (int i = 0; i < kBatches; ++i) {
      Batch* b = nullptr;
      if (!pipe.TryTakeEmpty(&b)) b = pipe.TakeEmpty();
      if (b == nullptr) {
        ADD_FAILURE() << "no batch for " << i;
        break;
      }
      b->value = i;
      pipe.Send(b);
    }
    pipe.Close();
  });
  int next = 0;
  while (Batch* b = pipe.Receive()) {
    EXPECT_EQ(b->value, next++);
    pipe.Release(b);
  }
  producer.join();
  EXPECT_EQ(next, kBatches);
}

}  // namespace
}  // namespace isowatch::formats::internal
