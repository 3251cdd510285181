// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/client.h"

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "isowatch/ingest/health_check.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/service.h"
#include "isowatch/ingest/txn_fingerprint.h"

#include "tests/unit/ingest/fake_batch_sink.h"
#include "tests/unit/ingest/txn_builder.h"

namespace isowatch::ingest {
namespace {

using testing::WriteBatch;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr char kStream[] = "replay";

// Transactions per batch in these tests.
constexpr int kTxns = 5;

v1::IngestBatch Batch(int64_t n) { return WriteBatch("", 0, 1 + n * kTxns, kTxns); }

class ClientTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Now() + absl::Seconds(5));
  }

  void Start(int port, FakeBatchSink& sink) {
    IngestServerOptions options;
    options.port = port;
    auto server = StartIngestServer(options, sink, &registry_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  static ClientOptions Options() {
    ClientOptions o;
    o.max_in_flight = 4;
    o.initial_backoff = absl::Milliseconds(10);
    o.max_backoff = absl::Milliseconds(200);
    o.deadline = kWait;
    return o;
  }

  FakeBatchSink sink_;
  MemoryIdRegistry registry_;
  std::unique_ptr<IngestServer> server_;
};

TEST_F(ClientTest, SendsEverythingAndCloses) {
  Start(0, sink_);
  IngestClient client(server_->address(), kStream, Options());
  for (int64_t n = 0; n < 20; ++n) {
    v1::IngestBatch b = Batch(n);
    if (n == 7) b.mutable_txns(2)->clear_commit();  // one refusal
    ASSERT_TRUE(client.Send(std::move(b)).ok());
  }
  absl::StatusOr<std::vector<v1::Refusal>> refusals = client.Close();
  ASSERT_TRUE(refusals.ok()) << refusals.status();
  ASSERT_EQ(refusals->size(), 1u);
  EXPECT_EQ((*refusals)[0].seq(), 8u);
  EXPECT_EQ((*refusals)[0].index(), 2u);
  EXPECT_EQ((*refusals)[0].reason(), v1::MISSING_COMMIT_TIMESTAMP);
  EXPECT_EQ(client.durable_seq(), 21u);  // 20 batches and the closing one
  EXPECT_EQ(client.reconnects(), 0u);
  EXPECT_EQ(client.refusals(), 1u);
  StreamPosition p = sink_.Position(kStream);
  EXPECT_EQ(p.durable_seq, 21u);
  EXPECT_TRUE(p.closed);
  EXPECT_EQ(sink_.txn_counts().size(), 20u * kTxns - 1);
  EXPECT_FALSE(client.Send(Batch(99)).ok());  // closed
}

TEST_F(ClientTest, SendBlocksWhileTooManyBatchesAreUnacknowledged) {
  Start(0, sink_);
  sink_.SetFull(true);
  ClientOptions o = Options();
  o.max_in_flight = 2;
  o.deadline = absl::Milliseconds(100);
  IngestClient client(server_->address(), kStream, o);
  ASSERT_TRUE(client.Send(Batch(0)).ok());
  ASSERT_TRUE(client.Send(Batch(1)).ok());
  // No ack can come while the sink is full: the third batch finds no room.
  EXPECT_EQ(client.Send(Batch(2)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(sink_.AwaitWaiting(1, kWait));
  sink_.SetFull(false);
  ASSERT_TRUE(sink_.AwaitDurable(kStream, 2, kWait));
  const absl::Time until = absl::Now() + kWait;
  while (client.durable_seq() < 2 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_TRUE(client.Send(Batch(2)).ok());
  EXPECT_EQ(client.next_seq(), 4u);
}

TEST_F(ClientTest, ResumesAfterTheServerRestartsAndAppliesEachBatchOnce) {
  Start(0, sink_);
  const int port = server_->port();
  const std::string address = server_->address();
  IngestClient client(address, kStream, Options());
  constexpr int64_t kBatches = 60;
  std::thread sender([&] {
    for (int64_t n = 0; n < kBatches; ++n) EXPECT_TRUE(client.Send(Batch(n)).ok()) << n;
  });
  // Kill the server mid-stream, then bring up another on the same port over the same store.
  ASSERT_TRUE(sink_.AwaitDurable(kStream, 20, kWait));
  // Hold a batch in the sink, so that the server goes down with batches in flight.
  sink_.SetFull(true);
  ASSERT_TRUE(sink_.AwaitWaiting(1, kWait));
  std::thread killer([this] { server_->Shutdown(absl::Now()); });
  // Once the server takes no new calls it is cancelling the open ones: let the held batch finish
  // (it becomes durable, its ack may be lost).
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  const absl::Time until = absl::Now() + kWait;
  while (CheckHealth(channel, "", absl::Seconds(1)).ok() && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  sink_.SetFull(false);
  killer.join();
  server_.reset();
  Start(port, sink_);
  sender.join();
  absl::StatusOr<std::vector<v1::Refusal>> refusals = client.Close();
  ASSERT_TRUE(refusals.ok()) << refusals.status();
  EXPECT_TRUE(refusals->empty());
  EXPECT_GE(client.reconnects(), 1u);
  EXPECT_EQ(client.durable_seq(), static_cast<uint64_t>(kBatches + 1));

  const auto applied = sink_.applied_counts();
  ASSERT_EQ(applied.size(), static_cast<size_t>(kBatches + 1));
  for (const auto& [key, count] : applied) EXPECT_EQ(count, 1) << key.second;
  const auto txns = sink_.txn_counts();
  EXPECT_EQ(txns.size(), static_cast<size_t>(kBatches * kTxns));
  for (const auto& [id, count] : txns) EXPECT_EQ(count, 1) << id;
}

TEST_F(ClientTest, ReconnectsWhenTheServerIsNotYetUp) {
  // Take a free port, then leave it free for a while.
  Start(0, sink_);
  const int port = server_->port();
  const std::string address = server_->address();
  server_->Shutdown(absl::Now());
  server_.reset();
  IngestClient client(address, kStream, Options());
  ASSERT_TRUE(client.Send(Batch(0)).ok());
  const absl::Time until = absl::Now() + kWait;
  while (client.reconnects() < 2 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_GE(client.reconnects(), 2u);
  Start(port, sink_);
  ASSERT_TRUE(client.Close().ok());
  EXPECT_EQ(sink_.Position(kStream).durable_seq, 2u);
}

TEST_F(ClientTest, ServerThatLostAcknowledgedBatchesIsDataLoss) {
  Start(0, sink_);
  const int port = server_->port();
  IngestClient client(server_->address(), kStream, Options());
  for (int64_t n = 0; n < 3; ++n) ASSERT_TRUE(client.Send(Batch(n)).ok());
  ASSERT_TRUE(sink_.AwaitDurable(kStream, 3, kWait));
  const absl::Time until = absl::Now() + kWait;
  while (client.durable_seq() < 3 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(2));
  ASSERT_EQ(client.durable_seq(), 3u);
  server_->Shutdown(absl::Now());
  server_.reset();
  FakeBatchSink empty;  // the store is gone
  Start(port, empty);
  EXPECT_TRUE(client.Send(Batch(3)).ok());
  absl::StatusOr<std::vector<v1::Refusal>> closed = client.Close();
  EXPECT_EQ(closed.status().code(), absl::StatusCode::kDataLoss) << closed.status();
  EXPECT_TRUE(empty.batches().empty());
  server_->Shutdown(absl::Now());
  server_.reset();
}

TEST_F(ClientTest, ResumesAStreamFromAGivenSeq) {
  Start(0, sink_);
  {
    IngestClient first(server_->address(), kStream, Options());
    for (int64_t n = 0; n < 3; ++n) ASSERT_TRUE(first.Send(Batch(n)).ok());
    ASSERT_TRUE(sink_.AwaitDurable(kStream, 3, kWait));
  }  // abandoned without Close
  ClientOptions o = Options();
  o.first_seq = 2;  // re-sends batch 2 and 3, then goes on
  IngestClient second(server_->address(), kStream, o);
  for (int64_t n = 1; n < 5; ++n) ASSERT_TRUE(second.Send(Batch(n)).ok());
  ASSERT_TRUE(second.Close().ok());
  // Batch 2 comes back as a duplicate; its ack covers batch 3 too, which the client then need not
  // send (or, when already sent, also comes back as a duplicate).
  EXPECT_GE(second.duplicates(), 1u);
  EXPECT_LE(second.duplicates(), 2u);
  EXPECT_EQ(second.durable_seq(), 6u);
  EXPECT_EQ(sink_.txn_counts().size(), 5u * kTxns);
  for (const auto& [key, count] : sink_.applied_counts()) EXPECT_EQ(count, 1) << key.second;
}

// Two collectors on one stream name: the second's claim fences the first, whose next batch fails
// it (FAILED_PRECONDITION); the second's own batch 1 is another batch under a durable (stream,
// seq), refused (ALREADY_EXISTS). Neither is acknowledged as a duplicate of the other, and the sink
// holds the first one's batches only.
TEST_F(ClientTest, TwoWritersOfOneStreamAreBothStoppedAndNothingIsMixed) {
  Start(0, sink_);
  IngestClient first(server_->address(), kStream, Options());
  ASSERT_TRUE(first.Send(Batch(0)).ok());
  ASSERT_TRUE(sink_.AwaitDurable(kStream, 1, kWait));
  const absl::Time until = absl::Now() + kWait;
  while (first.durable_seq() < 1 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(first.epoch(), 1u);

  IngestClient second(server_->address(), kStream, Options());
  ASSERT_TRUE(second.Send(Batch(100)).ok());
  absl::StatusOr<std::vector<v1::Refusal>> second_closed = second.Close();
  EXPECT_EQ(second_closed.status().code(), absl::StatusCode::kAlreadyExists)
      << second_closed.status();
  EXPECT_EQ(second.epoch(), 2u);

  EXPECT_TRUE(first.status().ok());
  (void)first.Send(Batch(1));
  // The fenced batch stops the client; status() says why without a Send or a Close.
  const absl::Time stopped_by = absl::Now() + kWait;
  while (first.status().ok() && absl::Now() < stopped_by) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(first.status().code(), absl::StatusCode::kFailedPrecondition) << first.status();
  absl::StatusOr<std::vector<v1::Refusal>> first_closed = first.Close();
  EXPECT_EQ(first_closed.status().code(), absl::StatusCode::kFailedPrecondition)
      << first_closed.status();
  EXPECT_THAT(std::string(first_closed.status().message()),
              ::testing::HasSubstr("claimed by another writer"));

  const std::vector<ValidatedBatch> batches = sink_.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(TxnIdString(batches[0].batch->txns(0)), "1");
  EXPECT_FALSE(sink_.Position(kStream).closed);
}

// Detach leaves the stream open: everything sent is acknowledged, no end of stream is sent, and a
// successor that claims the stream resumes it after the last ack.
TEST_F(ClientTest, DetachLeavesTheStreamOpenForASuccessor) {
  Start(0, sink_);
  uint64_t durable = 0;
  {
    IngestClient client(server_->address(), kStream, Options());
    for (int64_t n = 0; n < 5; ++n) ASSERT_TRUE(client.Send(Batch(n)).ok());
    absl::StatusOr<std::vector<v1::Refusal>> detached = client.Detach();
    ASSERT_TRUE(detached.ok()) << detached.status();
    durable = client.durable_seq();
    EXPECT_EQ(client.Send(Batch(5)).code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(durable, 5u);
  EXPECT_EQ(sink_.Position(kStream).durable_seq, 5u);
  EXPECT_FALSE(sink_.Position(kStream).closed);
  ClientOptions o = Options();
  o.first_seq = durable + 1;
  IngestClient successor(server_->address(), kStream, o);
  ASSERT_TRUE(successor.Send(Batch(5)).ok());
  ASSERT_TRUE(successor.Close().ok());
  EXPECT_EQ(successor.epoch(), 2u);
  EXPECT_EQ(sink_.Position(kStream).durable_seq, 7u);
  EXPECT_TRUE(sink_.Position(kStream).closed);
  EXPECT_EQ(sink_.txn_counts().size(), static_cast<size_t>(6 * kTxns));
}

// Detach with nothing sent ends at once, and sends nothing.
TEST_F(ClientTest, DetachWithNothingSentSendsNothing) {
  Start(0, sink_);
  IngestClient client(server_->address(), kStream, Options());
  ASSERT_TRUE(client.Detach().ok());
  EXPECT_TRUE(sink_.batches().empty());
}

}  // namespace
}  // namespace isowatch::ingest
