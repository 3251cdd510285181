// SPDX-License-Identifier: Apache-2.0
// The streaming RPC's pipeline: batches read ahead of their sync, acked in order, each once, only
// once durable; a failed sync fails its batches and the collector sends them again.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/service.h"
#include "isowatch/ingest/txn_fingerprint.h"

#include "tests/unit/ingest/manual_sync_sink.h"
#include "tests/unit/ingest/txn_builder.h"

namespace isowatch::ingest {
namespace {

using testing::WriteBatch;

constexpr absl::Duration kWait = absl::Seconds(30);

// An ack as the client saw it, with whether the sink had made its batch durable by then.
struct SeenAck {
  v1::IngestAck ack;
  bool durable_when_read = false;
};

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IngestServerOptions options;
    options.service.max_pipelined_batches = 16;
    auto server = StartIngestServer(options, sink_, &registry_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::Ingest::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Now() + absl::Seconds(5));
  }

  // A Stream RPC whose acks a thread reads as they come.
  class Rpc {
   public:
    Rpc(v1::Ingest::Stub& stub, ManualSyncSink& sink) : sink_(sink) {
      context_.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
      rw_ = stub.Stream(&context_);
      reader_ = std::thread([this] {
        v1::IngestAck ack;
        while (rw_->Read(&ack)) {
          const bool durable = sink_.IsDurable(ack.stream(), ack.durable_seq());
          absl::MutexLock lock(&mu_);
          acks_.push_back(SeenAck{ack, durable});
        }
        absl::MutexLock lock(&mu_);
        ended_ = true;
      });
    }
    ~Rpc() {
      if (reader_.joinable()) {
        context_.TryCancel();
        reader_.join();
      }
    }

    bool Write(const v1::IngestBatch& b) { return rw_->Write(b); }

    // Waits until `n` acks were read (or the RPC ended), or `timeout` passes.
    std::vector<SeenAck> AwaitAcks(size_t n) {
      absl::MutexLock lock(&mu_);
      auto enough = [this, n]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return acks_.size() >= n || ended_; };
      mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
      return acks_;
    }

    grpc::Status Finish() {
      rw_->WritesDone();
      reader_.join();
      return rw_->Finish();
    }
    grpc::Status FinishEnded() {
      reader_.join();
      return rw_->Finish();
    }

   private:
    ManualSyncSink& sink_;
    grpc::ClientContext context_;
    std::unique_ptr<grpc::ClientReaderWriter<v1::IngestBatch, v1::IngestAck>> rw_;
    std::thread reader_;
    absl::Mutex mu_;
    std::vector<SeenAck> acks_ ABSL_GUARDED_BY(mu_);
    bool ended_ ABSL_GUARDED_BY(mu_) = false;
  };

  ManualSyncSink sink_;
  MemoryIdRegistry registry_;
  std::unique_ptr<IngestServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

TEST_F(PipelineTest, BatchesInFlightAreAckedInOrderOnceEachAndOnlyWhenDurable) {
  Rpc rpc(*stub_, sink_);
  // Ten batches are read and handed over while none is durable: the service does not wait for
  // one batch's sync before it reads the next.
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    ASSERT_TRUE(rpc.Write(WriteBatch("a", seq, static_cast<int64_t>(100 * seq), 3)));
  }
  ASSERT_TRUE(sink_.AwaitTaken(10, kWait));
  EXPECT_TRUE(rpc.AwaitAcks(0).empty());
  EXPECT_EQ(sink_.Sync(), 10u);  // one sync covers the ten
  // Five more, synced one at a time while later ones wait.
  for (uint64_t seq = 11; seq <= 15; ++seq) {
    ASSERT_TRUE(rpc.Write(WriteBatch("a", seq, static_cast<int64_t>(100 * seq), 3)));
  }
  ASSERT_TRUE(sink_.AwaitTaken(15, kWait));
  EXPECT_EQ(sink_.Sync(), 5u);
  std::vector<SeenAck> acks = rpc.AwaitAcks(15);
  ASSERT_TRUE(rpc.Finish().ok());
  acks = rpc.AwaitAcks(15);
  ASSERT_EQ(acks.size(), 15u);
  for (size_t i = 0; i < acks.size(); ++i) {
    EXPECT_EQ(acks[i].ack.durable_seq(), i + 1);
    EXPECT_FALSE(acks[i].ack.duplicate());
    EXPECT_TRUE(acks[i].durable_when_read) << "ack of batch " << i + 1 << " before its sync";
  }
  EXPECT_EQ(sink_.durable_batches().size(), 15u);
  EXPECT_EQ(registry_.size(), 45u);
  EXPECT_EQ(server_->counters().batches_applied.load(), 15u);
}

TEST_F(PipelineTest, IdsOfBatchesInFlightCountForTheNextBatches) {
  Rpc rpc(*stub_, sink_);
  ASSERT_TRUE(rpc.Write(WriteBatch("a", 1, 1, 3)));
  ASSERT_TRUE(rpc.Write(WriteBatch("a", 2, 1, 3)));  // the same transactions again
  ASSERT_TRUE(sink_.AwaitTaken(2, kWait));
  sink_.Sync();
  ASSERT_TRUE(rpc.Finish().ok());
  const std::vector<ValidatedBatch> batches = sink_.durable_batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].accepted.size(), 3u);
  EXPECT_TRUE(batches[1].accepted.empty());  // duplicates, though batch 1 was not durable yet
  EXPECT_EQ(server_->counters().transactions_duplicate.load(), 3u);
}

// The sink refuses transaction 2 (as the daemon refuses a history conflict): the refusal is in
// the ack among the validation's, in batch order, and counted; the id counts for nothing, so the
// next batch, read while the first still waits for its sync, may bring transaction 2 again.
TEST_F(PipelineTest, SinkRefusalsAreInTheAckAndTheirIdsCountForNothing) {
  sink_.RefuseIds({"2"});
  v1::IngestBatch first = WriteBatch("a", 1, 1, 2);  // transactions 1 and 2
  v1::Transaction no_commit = testing::WriteTxn(9, 1, 2);
  no_commit.clear_commit();
  *first.add_txns() = no_commit;
  *first.add_txns() = testing::WriteTxn(3, 2, 3);
  Rpc rpc(*stub_, sink_);
  ASSERT_TRUE(rpc.Write(first));
  ASSERT_TRUE(sink_.AwaitTaken(1, kWait));
  sink_.RefuseIds({});
  // Transaction 2 again, unchanged: new, not a duplicate of the refused one.
  ASSERT_TRUE(rpc.Write(WriteBatch("a", 2, 2, 1)));
  ASSERT_TRUE(sink_.AwaitTaken(2, kWait));
  sink_.Sync();
  const std::vector<SeenAck> acks = rpc.AwaitAcks(2);
  ASSERT_TRUE(rpc.Finish().ok());
  ASSERT_EQ(acks.size(), 2u);
  const v1::IngestAck& ack = acks[0].ack;
  ASSERT_EQ(ack.refusals_size(), 2) << ack.ShortDebugString();
  EXPECT_EQ(ack.refusals(0).index(), 1u);
  EXPECT_EQ(ack.refusals(0).txn_id(), "2");
  EXPECT_EQ(ack.refusals(0).reason(), v1::KEY_KIND_CONFLICT);
  EXPECT_EQ(ack.refusals(1).index(), 2u);
  EXPECT_EQ(ack.refusals(1).reason(), v1::MISSING_COMMIT_TIMESTAMP);
  EXPECT_EQ(acks[1].ack.refusals_size(), 0) << acks[1].ack.ShortDebugString();
  const std::vector<ValidatedBatch> batches = sink_.durable_batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].accepted, (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(batches[1].accepted, (std::vector<uint32_t>{0}));
  EXPECT_EQ(registry_.Check("a", "2", TxnFingerprint(batches[1].batch->txns(0))),
            IdRegistry::Outcome::kDuplicate);
  const IngestCounters& c = server_->counters();
  EXPECT_EQ(c.refusals[v1::KEY_KIND_CONFLICT].load(), 1u);
  EXPECT_EQ(c.transactions_accepted.load(), 3u);
  EXPECT_EQ(c.transactions_duplicate.load(), 0u);

  // The same through Push, which waits for the sink: transaction 4 refused, not remembered.
  sink_.RefuseIds({"4"});
  grpc::ClientContext context;
  v1::IngestAck pushed;
  ASSERT_TRUE(stub_->Push(&context, WriteBatch("a", 3, 4, 2), &pushed).ok());
  ASSERT_EQ(pushed.refusals_size(), 1) << pushed.ShortDebugString();
  EXPECT_EQ(pushed.refusals(0).index(), 0u);
  EXPECT_EQ(pushed.refusals(0).reason(), v1::KEY_KIND_CONFLICT);
  EXPECT_EQ(pushed.durable_seq(), 3u);
  EXPECT_EQ(registry_.Check("a", "4", 0), IdRegistry::Outcome::kNew);
  EXPECT_EQ(registry_.size(), 4u);  // 1, 3, 2 and 5
  EXPECT_EQ(c.refusals[v1::KEY_KIND_CONFLICT].load(), 2u);
}

// Two streams send one id at once: the first batch to be validated reserves it, so the other is
// refused while the first still waits for its sync, and after it too. A batch that failed gives
// its ids back.
TEST_F(PipelineTest, AnIdInFlightOnAnotherStreamIsRefused) {
  Rpc a(*stub_, sink_);
  ASSERT_TRUE(a.Write(WriteBatch("a", 1, 1, 2)));  // ids 1 and 2, not durable yet
  ASSERT_TRUE(sink_.AwaitTaken(1, kWait));
  Rpc b(*stub_, sink_);
  ASSERT_TRUE(b.Write(WriteBatch("b", 1, 2, 2)));  // ids 2 and 3
  ASSERT_TRUE(sink_.AwaitTaken(2, kWait));
  sink_.Sync();
  std::vector<SeenAck> acks = b.AwaitAcks(1);
  ASSERT_EQ(acks.size(), 1u);
  ASSERT_EQ(acks[0].ack.refusals_size(), 1) << acks[0].ack.ShortDebugString();
  EXPECT_EQ(acks[0].ack.refusals(0).txn_id(), "2");
  EXPECT_EQ(acks[0].ack.refusals(0).reason(), v1::ID_ON_OTHER_STREAM);
  EXPECT_EQ(a.AwaitAcks(1).size(), 1u);
  ASSERT_TRUE(a.Finish().ok());

  // Stream "c" takes id 9, its sync fails: 9 is free again for "b".
  {
    Rpc c(*stub_, sink_);
    ASSERT_TRUE(c.Write(WriteBatch("c", 1, 9, 1)));
    ASSERT_TRUE(sink_.AwaitTaken(3, kWait));
    sink_.Fail(absl::UnavailableError("disk gone"));
    EXPECT_FALSE(c.FinishEnded().ok());
  }
  ASSERT_TRUE(b.Write(WriteBatch("b", 2, 9, 1)));
  ASSERT_TRUE(sink_.AwaitTaken(4, kWait));
  sink_.Sync();
  acks = b.AwaitAcks(2);
  ASSERT_TRUE(b.Finish().ok());
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[1].ack.refusals_size(), 0) << acks[1].ack.ShortDebugString();
  EXPECT_EQ(registry_.OwnerOf("a", "9"), "b");
  EXPECT_EQ(registry_.OwnerOf("b", "1"), "a");
}

TEST_F(PipelineTest, FailedSyncFailsItsBatchesAndTheyAreSentAgain) {
  {
    Rpc rpc(*stub_, sink_);
    for (uint64_t seq = 1; seq <= 2; ++seq) {
      ASSERT_TRUE(rpc.Write(WriteBatch("a", seq, static_cast<int64_t>(10 * seq), 2)));
    }
    ASSERT_TRUE(sink_.AwaitTaken(2, kWait));
    sink_.Sync();
    ASSERT_EQ(rpc.AwaitAcks(2).size(), 2u);
    for (uint64_t seq = 3; seq <= 5; ++seq) {
      ASSERT_TRUE(rpc.Write(WriteBatch("a", seq, static_cast<int64_t>(10 * seq), 2)));
    }
    ASSERT_TRUE(sink_.AwaitTaken(5, kWait));
    EXPECT_EQ(sink_.Fail(absl::UnavailableError("the disk went away")), 3u);
    EXPECT_FALSE(rpc.FinishEnded().ok());
    const std::vector<SeenAck> acks = rpc.AwaitAcks(5);
    ASSERT_EQ(acks.size(), 2u);  // none for the failed batches
    EXPECT_EQ(acks[1].ack.durable_seq(), 2u);
  }
  // The collector reconnects and sends the failed batches again: they are taken, their
  // transactions accepted (the failed attempt remembered none of their ids).
  Rpc rpc(*stub_, sink_);
  for (uint64_t seq = 3; seq <= 5; ++seq) {
    ASSERT_TRUE(rpc.Write(WriteBatch("a", seq, static_cast<int64_t>(10 * seq), 2)));
  }
  ASSERT_TRUE(sink_.AwaitTaken(8, kWait));
  sink_.Sync();
  const std::vector<SeenAck> acks = rpc.AwaitAcks(3);
  ASSERT_TRUE(rpc.Finish().ok());
  ASSERT_EQ(acks.size(), 3u);
  for (size_t i = 0; i < acks.size(); ++i) {
    EXPECT_EQ(acks[i].ack.durable_seq(), i + 3);
    EXPECT_FALSE(acks[i].ack.duplicate());
    EXPECT_TRUE(acks[i].durable_when_read);
  }
  const std::vector<ValidatedBatch> batches = sink_.durable_batches();
  ASSERT_EQ(batches.size(), 5u);
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].batch->seq(), i + 1);
    EXPECT_EQ(batches[i].accepted.size(), 2u);
  }
  EXPECT_EQ(registry_.size(), 10u);
}

TEST_F(PipelineTest, DrainWaitsForTheBatchesWaitingForTheirSync) {
  Rpc rpc(*stub_, sink_);
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE(rpc.Write(WriteBatch("a", seq, static_cast<int64_t>(10 * seq), 1)));
  }
  ASSERT_TRUE(sink_.AwaitTaken(3, kWait));
  EXPECT_FALSE(server_->Drain(absl::Now() + absl::Milliseconds(50)));
  sink_.Sync();
  EXPECT_TRUE(server_->Drain(absl::Now() + kWait));
  EXPECT_EQ(rpc.AwaitAcks(3).size(), 3u);
}

}  // namespace
}  // namespace isowatch::ingest
