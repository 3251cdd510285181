// SPDX-License-Identifier: Apache-2.0
// The daemon's ingest log on its own (monitor::DurableLog): batches become durable in append
// order, reach the engine's queue only once synced, keep their history conflicts out of the log
// and in the ack, and Stop reports everything appended.
#include "isowatch/monitor/durable_log.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <gtest/gtest.h>

#include "isowatch/common/clock.h"
#include "isowatch/monitor/internal/batch_queue.h"
#include "isowatch/server/metrics.h"
#include "isowatch/store/store.h"

#include "tests/testing/temp_dir.h"

namespace isowatch::monitor {
namespace {

class DurableLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.Path().empty());
    auto store = store::Store::Open(dir_.Path(), {.sync_writes = false});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    log_ = std::make_unique<DurableLog>(store_.get(), &metrics_, &queue_,
                                        &common::SystemClock::Get(), history::DataModel::kMixed);
  }
  void TearDown() override {
    log_.reset();
    store_.reset();
  }

  // Batch `seq` of `stream`: one transaction per (kind, key) of `ops`, ids from `first_id`,
  // every transaction accepted.
  static ingest::ValidatedBatch Batch(std::string_view stream, uint64_t seq, int64_t first_id,
                                      const std::vector<std::pair<v1::Operation::Kind, int>>& ops) {
    auto b = std::make_shared<v1::IngestBatch>();
    b->set_stream(std::string(stream));
    b->set_seq(seq);
    int64_t id = first_id;
    for (const auto& [kind, key] : ops) {
      v1::Transaction* t = b->add_txns();
      t->set_id_int(id);
      t->set_session_int(id);
      t->set_status(v1::Transaction::COMMITTED);
      t->mutable_start()->set_physical(10 * id);
      t->mutable_commit()->set_physical(10 * id + 5);
      v1::Operation* op = t->add_ops();
      op->set_kind(kind);
      op->mutable_key()->set_int_(key);
      op->mutable_value()->set_int_(id);
      ++id;
    }
    ingest::ValidatedBatch vb;
    vb.batch = b;
    for (uint32_t i = 0; i < static_cast<uint32_t>(b->txns_size()); ++i) vb.accepted.push_back(i);
    vb.fingerprints.assign(vb.accepted.size(), 0);
    return vb;
  }

  // Takes what the queue holds for the engine thread now.
  std::vector<internal::DurableBatch> Queued() {
    std::vector<internal::DurableBatch> out;
    queue_.Take(absl::ZeroDuration(), &out);
    return out;
  }

  isowatch::testing::TempDir dir_{"isowatch-durable-log"};
  std::unique_ptr<store::Store> store_;
  server::DaemonMetrics metrics_{"test"};
  internal::BatchQueue queue_{16};
  std::unique_ptr<DurableLog> log_;
};

TEST_F(DurableLogTest, BatchesBecomeDurableAndReachTheEngineInAppendOrder) {
  log_->Start();
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    auto ack = log_->AppendAndWait(
        Batch("a", seq, static_cast<int64_t>(10 * seq), {{v1::Operation::WRITE, 1}}), true);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->durable_seq, seq);
    EXPECT_TRUE(ack->refusals.empty());
  }
  EXPECT_EQ(log_->Position("a").durable_seq, 3u);
  EXPECT_EQ(log_->Position("b").durable_seq, 0u);
  const std::vector<internal::DurableBatch> queued = Queued();
  ASSERT_EQ(queued.size(), 3u);
  for (size_t i = 0; i < queued.size(); ++i) {
    EXPECT_EQ(queued[i].batch->seq(), i + 1);
    EXPECT_GT(queued[i].received_ms, 0);
  }
}

TEST_F(DurableLogTest, HistoryConflictsStayOutOfTheLogAndAreInTheAck) {
  log_->Start();
  ASSERT_TRUE(log_->AppendAndWait(Batch("a", 1, 1, {{v1::Operation::WRITE, 7}}), true).ok());
  // Key 7 is a register now: an append to it is a history conflict; key 8 is fine.
  auto ack = log_->AppendAndWait(
      Batch("a", 2, 2, {{v1::Operation::APPEND, 7}, {v1::Operation::APPEND, 8}}), true);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_EQ(ack->refusals.size(), 1u);
  EXPECT_EQ(ack->refusals[0].index(), 0u);
  EXPECT_EQ(ack->refusals[0].reason(), v1::KEY_KIND_CONFLICT);
  // The refusals are kept with the batch, for the ack of a batch sent again.
  auto kept = log_->DurableBatchOf("a", 2);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->refusals.size(), 1u);
  EXPECT_EQ(kept->refusals[0].index(), 0u);
  // The engine gets the batch without the refused transaction.
  const std::vector<internal::DurableBatch> queued = Queued();
  ASSERT_EQ(queued.size(), 2u);
  ASSERT_EQ(queued[1].batch->txns_size(), 1);
  EXPECT_EQ(queued[1].batch->txns(0).id_int(), 3);
}

// Each batch keeps its content fingerprint; a stream's epoch is reported with its position, also
// for a stream claimed and never written.
TEST_F(DurableLogTest, KeepsContentFingerprintsAndEpochs) {
  log_->Start();
  ingest::ValidatedBatch b = Batch("a", 1, 1, {{v1::Operation::WRITE, 7}});
  b.content_fingerprint = 0x1234;
  ASSERT_TRUE(log_->AppendAndWait(std::move(b), true).ok());
  auto kept = log_->DurableBatchOf("a", 1);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->content_fingerprint, std::optional<uint64_t>(0x1234));
  EXPECT_TRUE(kept->refusals.empty());
  EXPECT_EQ(log_->DurableBatchOf("a", 2)->content_fingerprint, std::nullopt);  // not durable
  EXPECT_EQ(log_->Position("b").epoch, 0u);
  EXPECT_EQ(*log_->ClaimStream("b"), 1u);
  EXPECT_EQ(*log_->ClaimStream("b"), 2u);
  EXPECT_EQ(log_->Position("b").epoch, 2u);
  EXPECT_EQ(log_->Position("b").durable_seq, 0u);
  EXPECT_EQ(log_->Position("a").epoch, 0u);
  EXPECT_EQ(log_->Position("a").durable_seq, 1u);
}

TEST_F(DurableLogTest, StopReportsEverythingAppended) {
  log_->Start();
  absl::Mutex mu;
  std::vector<uint64_t> durable;
  for (uint64_t seq = 1; seq <= 8; ++seq) {
    auto refusals =
        log_->Append(Batch("a", seq, static_cast<int64_t>(10 * seq), {{v1::Operation::WRITE, 1}}),
                     true, [&mu, &durable](absl::StatusOr<ingest::SinkAck> ack) {
                       ASSERT_TRUE(ack.ok()) << ack.status();
                       absl::MutexLock l(&mu);
                       durable.push_back(ack->durable_seq);
                     });
    ASSERT_TRUE(refusals.ok()) << refusals.status();
  }
  log_->Stop();
  absl::MutexLock l(&mu);
  ASSERT_EQ(durable.size(), 8u);
  // Reported in append order.
  for (size_t i = 0; i < durable.size(); ++i) EXPECT_EQ(durable[i], i + 1);
}

TEST_F(DurableLogTest, AFullQueueRefusesWhenAskedNotToWait) {
  // The syncer is not started: nothing leaves the queue's reserved slots.
  internal::BatchQueue small(1);
  DurableLog log(store_.get(), &metrics_, &small, &common::SystemClock::Get(),
                 history::DataModel::kMixed);
  auto first = log.Append(Batch("a", 1, 1, {{v1::Operation::WRITE, 1}}), false,
                          [](absl::StatusOr<ingest::SinkAck>) {});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = log.Append(Batch("a", 2, 2, {{v1::Operation::WRITE, 1}}), false,
                           [](absl::StatusOr<ingest::SinkAck>) {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  log.Start();
  log.Stop();
}

}  // namespace
}  // namespace isowatch::monitor
