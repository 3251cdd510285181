// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/service.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "isowatch/ingest/client.h"
#include "isowatch/ingest/health_check.h"
#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/validate.h"

#include "tests/unit/ingest/fake_batch_sink.h"
#include "tests/unit/ingest/txn_builder.h"

namespace isowatch::ingest {
namespace {

using testing::WriteBatch;

constexpr absl::Duration kWait = absl::Seconds(30);

uint64_t Load(const std::atomic<uint64_t>& counter) {
  return counter.load(std::memory_order_relaxed);
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(0); }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Now() + absl::Seconds(5));
  }

  void Start(int port) {
    IngestServerOptions options;
    options.port = port;
    options.service = service_options_;
    auto server = StartIngestServer(options, sink_, &registry_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::Ingest::NewStub(channel_);
  }

  // Opens a raw Stream RPC, as the writer with `epoch` (0: one that never claimed).
  struct RawStream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::IngestBatch, v1::IngestAck>> rw;
  };
  std::unique_ptr<RawStream> Open(uint64_t epoch = 0) {
    auto s = std::make_unique<RawStream>();
    s->context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    if (epoch != 0) s->context.AddMetadata(kEpochMetadataKey, std::to_string(epoch));
    s->rw = stub_->Stream(&s->context);
    return s;
  }

  // Claims `stream`; its epoch.
  uint64_t Claim(const std::string& stream) {
    grpc::ClientContext context;
    v1::ClaimRequest request;
    request.set_stream(stream);
    v1::ClaimReply reply;
    const grpc::Status status = stub_->Claim(&context, request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.epoch();
  }

  // Writes `batch` on `s` and returns how the RPC ended (it must end).
  static grpc::Status ExchangeFails(RawStream& s, const v1::IngestBatch& batch) {
    EXPECT_TRUE(s.rw->Write(batch));
    v1::IngestAck ack;
    EXPECT_FALSE(s.rw->Read(&ack)) << ack.ShortDebugString();
    return s.rw->Finish();
  }

  // Writes `batch` on `s` and reads its ack.
  static v1::IngestAck Exchange(RawStream& s, const v1::IngestBatch& batch) {
    v1::IngestAck ack;
    EXPECT_TRUE(s.rw->Write(batch));
    EXPECT_TRUE(s.rw->Read(&ack));
    return ack;
  }

  static grpc::Status Finish(RawStream& s) {
    s.rw->WritesDone();
    return s.rw->Finish();
  }

  IngestServiceOptions service_options_;
  FakeBatchSink sink_;
  MemoryIdRegistry registry_;
  std::unique_ptr<IngestServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

TEST_F(ServiceTest, StreamedBatchesAreAcknowledgedInOrder) {
  auto s = Open();
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    v1::IngestAck ack = Exchange(*s, WriteBatch("a", seq, static_cast<int64_t>(10 * seq), 4));
    EXPECT_EQ(ack.stream(), "a");
    EXPECT_EQ(ack.durable_seq(), seq);
    EXPECT_FALSE(ack.duplicate());
    EXPECT_TRUE(ack.refusals().empty());
  }
  EXPECT_TRUE(Finish(*s).ok());
  const std::vector<ValidatedBatch> batches = sink_.batches();
  ASSERT_EQ(batches.size(), 3u);
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].batch->seq(), i + 1);
    EXPECT_EQ(batches[i].accepted.size(), 4u);
  }
  EXPECT_EQ(Load(server_->counters().batches_received), 3u);
  EXPECT_EQ(Load(server_->counters().transactions_accepted), 12u);
  EXPECT_EQ(registry_.size(), 12u);
}

TEST_F(ServiceTest, RefusedTransactionsAreInTheAckAndCounted) {
  auto s = Open();
  v1::IngestBatch batch = WriteBatch("a", 1, 1, 3);
  batch.mutable_txns(1)->clear_commit();
  v1::IngestAck ack = Exchange(*s, batch);
  EXPECT_EQ(ack.durable_seq(), 1u);
  ASSERT_EQ(ack.refusals_size(), 1);
  EXPECT_EQ(ack.refusals(0).index(), 1u);
  EXPECT_EQ(ack.refusals(0).txn_id(), "2");
  EXPECT_EQ(ack.refusals(0).reason(), v1::MISSING_COMMIT_TIMESTAMP);
  EXPECT_TRUE(Finish(*s).ok());
  ASSERT_EQ(sink_.batches().size(), 1u);
  EXPECT_EQ(sink_.batches()[0].accepted, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(Load(server_->counters().refusals[v1::MISSING_COMMIT_TIMESTAMP]), 1u);
  EXPECT_EQ(Load(server_->counters().transactions_received), 3u);
  EXPECT_EQ(Load(server_->counters().transactions_accepted), 2u);
}

TEST_F(ServiceTest, ResentBatchIsADuplicateAppliedOnce) {
  auto s = Open();
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 1, 1, 2)).durable_seq(), 1u);
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 2, 3, 2)).durable_seq(), 2u);
  v1::IngestAck again = Exchange(*s, WriteBatch("a", 1, 1, 2));
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(again.durable_seq(), 2u);
  EXPECT_TRUE(Finish(*s).ok());
  // A new RPC (a reconnect) is no different.
  auto t = Open();
  EXPECT_TRUE(Exchange(*t, WriteBatch("a", 2, 3, 2)).duplicate());
  EXPECT_TRUE(Finish(*t).ok());
  auto counts = sink_.applied_counts();
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ((counts[{"a", 1}]), 1);
  EXPECT_EQ((counts[{"a", 2}]), 1);
  EXPECT_EQ(Load(server_->counters().batches_duplicate), 2u);
}

TEST_F(ServiceTest, DuplicatesAreRecognisedAfterARestart) {
  auto s = Open();
  Exchange(*s, WriteBatch("a", 1, 1, 2));
  EXPECT_TRUE(Finish(*s).ok());
  server_->Shutdown(absl::Now() + absl::Seconds(5));
  Start(0);  // a new server over the same sink: it learns the durable seq from the sink
  auto t = Open();
  EXPECT_TRUE(Exchange(*t, WriteBatch("a", 1, 1, 2)).duplicate());
  EXPECT_EQ(Exchange(*t, WriteBatch("a", 2, 3, 1)).durable_seq(), 2u);
  EXPECT_TRUE(Finish(*t).ok());
  EXPECT_EQ(sink_.batches().size(), 2u);
}

// A batch sent again under its (stream, seq) is a duplicate only with the same content; another
// batch under a (stream, seq) already durable is refused (ALREADY_EXISTS), never acknowledged,
// counted, and nothing of it is kept. After a restart too.
TEST_F(ServiceTest, AnotherBatchUnderADurableSeqIsRefused) {
  std::vector<std::pair<std::string, uint64_t>> reported;
  service_options_.events.conflicting = [&reported](std::string_view stream, uint64_t seq) {
    reported.emplace_back(stream, seq);
  };
  server_->Shutdown(absl::Now() + absl::Seconds(5));
  Start(0);
  auto s = Open();
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 1, 1, 2)).durable_seq(), 1u);
  const grpc::Status status = ExchangeFails(*s, WriteBatch("a", 1, 5, 2));  // other ids
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("durable with other content"));
  // A change of watermark or end of stream is a change of content too.
  v1::IngestBatch marked = WriteBatch("a", 1, 1, 2);
  marked.set_end_of_stream(true);
  auto t = Open();
  EXPECT_EQ(ExchangeFails(*t, marked).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  server_->Shutdown(absl::Now() + absl::Seconds(5));
  Start(0);
  auto u = Open();
  EXPECT_TRUE(Exchange(*u, WriteBatch("a", 1, 1, 2)).duplicate());  // the same content
  EXPECT_TRUE(Finish(*u).ok());
  auto v = Open();
  EXPECT_EQ(ExchangeFails(*v, WriteBatch("a", 1, 2, 2)).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(sink_.batches().size(), 1u);
  EXPECT_EQ(Load(server_->counters().batches_conflicting), 1u);  // this server's
  EXPECT_EQ(reported,
            (std::vector<std::pair<std::string, uint64_t>>{{"a", 1}, {"a", 1}, {"a", 1}}));
}

// A stream has one writer at a time: each claim gets a higher epoch and fences the writers before
// it (FAILED_PRECONDITION); a writer that never claimed is refused once anyone has, and an epoch
// never handed out is DATA_LOSS.
TEST_F(ServiceTest, AClaimFencesTheEarlierWriters) {
  std::vector<std::pair<uint64_t, uint64_t>> fenced;  // (sent, current)
  service_options_.events.fenced = [&fenced](std::string_view, uint64_t sent, uint64_t current) {
    fenced.emplace_back(sent, current);
  };
  server_->Shutdown(absl::Now() + absl::Seconds(5));
  Start(0);
  auto unclaimed = Open();
  EXPECT_EQ(Exchange(*unclaimed, WriteBatch("a", 1, 1, 1)).durable_seq(), 1u);
  const uint64_t first = Claim("a");
  EXPECT_EQ(first, 1u);
  grpc::Status status = ExchangeFails(*unclaimed, WriteBatch("a", 2, 2, 1));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("claim"));

  auto one = Open(first);
  EXPECT_EQ(Exchange(*one, WriteBatch("a", 2, 2, 1)).durable_seq(), 2u);
  const uint64_t second = Claim("a");
  EXPECT_EQ(second, 2u);
  status = ExchangeFails(*one, WriteBatch("a", 3, 3, 1));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("claimed by another writer"));
  auto two = Open(second);
  EXPECT_EQ(Exchange(*two, WriteBatch("a", 3, 3, 1)).durable_seq(), 3u);
  EXPECT_TRUE(Finish(*two).ok());
  // An epoch above the stream's: the daemon lost the claim (its store was replaced).
  auto ahead = Open(second + 5);
  EXPECT_EQ(ExchangeFails(*ahead, WriteBatch("a", 4, 4, 1)).error_code(),
            grpc::StatusCode::DATA_LOSS);
  // Push is fenced the same way; another stream is not.
  grpc::ClientContext context;
  context.AddMetadata(kEpochMetadataKey, std::to_string(first));
  v1::IngestAck pushed;
  EXPECT_EQ(stub_->Push(&context, WriteBatch("a", 4, 4, 1), &pushed).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  auto other = Open();
  EXPECT_EQ(Exchange(*other, WriteBatch("b", 1, 10, 1)).durable_seq(), 1u);
  EXPECT_TRUE(Finish(*other).ok());

  EXPECT_EQ(sink_.batches().size(), 4u);
  EXPECT_EQ(Load(server_->counters().batches_fenced), 4u);
  EXPECT_EQ(Load(server_->counters().claims), 2u);
  EXPECT_EQ(fenced, (std::vector<std::pair<uint64_t, uint64_t>>{
                        {0, 1}, {first, second}, {second + 5, second}, {first, second}}));
  // The epoch lives in the sink: a restarted server keeps fencing.
  server_->Shutdown(absl::Now() + absl::Seconds(5));
  Start(0);
  auto stale = Open(first);
  EXPECT_EQ(ExchangeFails(*stale, WriteBatch("a", 4, 4, 1)).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Claim("a"), 3u);
}

TEST_F(ServiceTest, SequenceGapIsRefusedAndNotApplied) {
  // What the service reports, for the daemon's log.
  std::vector<std::pair<std::string, uint64_t>> reported;  // (refusal reason, transactions)
  server_->Shutdown(absl::Now());
  service_options_.events.refused = [&](const v1::IngestAck& ack, uint64_t transactions) {
    for (const v1::Refusal& r : ack.refusals()) {
      reported.emplace_back(RefusalReasonName(r.reason()), transactions);
    }
  };
  Start(0);
  auto s = Open();
  Exchange(*s, WriteBatch("a", 1, 1, 1));
  v1::IngestAck gap = Exchange(*s, WriteBatch("a", 3, 5, 2));
  EXPECT_EQ(gap.durable_seq(), 1u);
  ASSERT_EQ(gap.refusals_size(), 1);
  EXPECT_EQ(gap.refusals(0).reason(), v1::SEQUENCE_GAP);
  EXPECT_TRUE(gap.refusals(0).whole_batch());
  EXPECT_EQ(gap.refusals(0).seq(), 3u);
  // Resending from the gap works.
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 2, 2, 1)).durable_seq(), 2u);
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 3, 5, 2)).durable_seq(), 3u);
  EXPECT_TRUE(Finish(*s).ok());
  EXPECT_EQ(sink_.batches().size(), 3u);
  // A whole-batch refusal counts every transaction of its batch.
  EXPECT_EQ(Load(server_->counters().refusals[v1::SEQUENCE_GAP]), 2u);
  EXPECT_EQ(Load(server_->counters().batches_refused), 1u);
  EXPECT_EQ(reported, (std::vector<std::pair<std::string, uint64_t>>{{"sequence_gap", 2}}));
}

TEST_F(ServiceTest, StreamsAreIndependent) {
  auto s = Open();
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 1, 1, 1)).durable_seq(), 1u);
  EXPECT_EQ(Exchange(*s, WriteBatch("b", 1, 10, 1)).durable_seq(), 1u);
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 2, 2, 1)).durable_seq(), 2u);
  EXPECT_TRUE(Finish(*s).ok());
  EXPECT_EQ(registry_.size(), 3u);
}

// The streams of one daemon share one history: an id accepted on one stream is refused on
// another, in the ack, with the stream that has it; the rest of the batch is kept.
TEST_F(ServiceTest, AnIdAcceptedOnAnotherStreamIsRefused) {
  auto s = Open();
  EXPECT_TRUE(Exchange(*s, WriteBatch("a", 1, 1, 3)).refusals().empty());  // ids 1, 2, 3
  const v1::IngestAck ack = Exchange(*s, WriteBatch("b", 1, 3, 3));        // ids 3, 4, 5
  EXPECT_EQ(ack.durable_seq(), 1u);
  ASSERT_EQ(ack.refusals_size(), 1) << ack.ShortDebugString();
  EXPECT_EQ(ack.refusals(0).index(), 0u);
  EXPECT_EQ(ack.refusals(0).txn_id(), "3");
  EXPECT_EQ(ack.refusals(0).reason(), v1::ID_ON_OTHER_STREAM);
  EXPECT_THAT(ack.refusals(0).detail(), ::testing::HasSubstr("stream \"a\""));
  // Sent again unchanged on "b": the same refusal, never a duplicate.
  const v1::IngestAck again = Exchange(*s, WriteBatch("b", 2, 3, 1));
  ASSERT_EQ(again.refusals_size(), 1) << again.ShortDebugString();
  EXPECT_EQ(again.refusals(0).reason(), v1::ID_ON_OTHER_STREAM);
  EXPECT_TRUE(Finish(*s).ok());
  const std::vector<ValidatedBatch> batches = sink_.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1].accepted, (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(batches[2].accepted.empty());
  EXPECT_EQ(Load(server_->counters().refusals[v1::ID_ON_OTHER_STREAM]), 2u);
  EXPECT_EQ(registry_.OwnerOf("b", "3"), "a");
  EXPECT_EQ(registry_.size(), 5u);
}

TEST_F(ServiceTest, OversizedBatchIsRefusedWholeAndItsSeqConsumed) {
  server_->Shutdown(absl::Now());
  service_options_.limits.max_batch_txns = 2;
  Start(0);
  auto s = Open();
  v1::IngestBatch big = WriteBatch("a", 1, 1, 3);
  big.mutable_watermark()->set_physical(100);
  v1::IngestAck ack = Exchange(*s, big);
  EXPECT_EQ(ack.durable_seq(), 1u);
  ASSERT_EQ(ack.refusals_size(), 1);
  EXPECT_EQ(ack.refusals(0).reason(), v1::BATCH_TOO_LARGE);
  EXPECT_TRUE(ack.refusals(0).whole_batch());
  EXPECT_EQ(Exchange(*s, WriteBatch("a", 2, 1, 2)).durable_seq(), 2u);
  EXPECT_TRUE(Finish(*s).ok());
  const auto batches = sink_.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_TRUE(batches[0].whole_batch_refused);
  EXPECT_EQ(batches[0].batch->txns_size(), 0);
  EXPECT_FALSE(batches[0].batch->has_watermark());
  EXPECT_EQ(batches[1].accepted.size(), 2u);
  EXPECT_EQ(Load(server_->counters().batches_refused), 1u);
  EXPECT_EQ(Load(server_->counters().refusals[v1::BATCH_TOO_LARGE]), 3u);
}

TEST_F(ServiceTest, WatermarkGoingBackIsIgnoredCountedAndReported) {
  std::vector<std::string> reported;
  server_->Shutdown(absl::Now());
  service_options_.events.watermark_regressed = [&](std::string_view stream, uint64_t seq,
                                                    const history::Timestamp& sent,
                                                    const history::Timestamp& held) {
    reported.push_back(fmt::format("{} {} {} {}", stream, seq, sent.physical, held.physical));
  };
  Start(0);
  auto s = Open();
  v1::IngestBatch first = WriteBatch("a", 1, 1, 1);
  first.mutable_watermark()->set_physical(10);
  v1::IngestBatch second = WriteBatch("a", 2, 2, 1);
  second.mutable_watermark()->set_physical(5);
  v1::IngestBatch third = WriteBatch("a", 3, 3, 1);
  third.mutable_watermark()->set_physical(10);  // equal is not a regression
  for (const auto* b : {&first, &second, &third}) {
    v1::IngestAck ack = Exchange(*s, *b);
    EXPECT_TRUE(ack.refusals().empty());
  }
  EXPECT_TRUE(Finish(*s).ok());
  const auto batches = sink_.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_TRUE(batches[0].batch->has_watermark());
  EXPECT_FALSE(batches[1].batch->has_watermark());
  EXPECT_EQ(batches[1].accepted.size(), 1u);  // the transactions are kept
  EXPECT_TRUE(batches[2].batch->has_watermark());
  EXPECT_EQ(Load(server_->counters().watermark_regressions), 1u);
  EXPECT_EQ(reported, std::vector<std::string>{"a 2 5 10"});
}

TEST_F(ServiceTest, EndOfStreamClosesTheStream) {
  auto s = Open();
  v1::IngestBatch last = WriteBatch("a", 1, 1, 1);
  last.set_end_of_stream(true);
  EXPECT_EQ(Exchange(*s, last).durable_seq(), 1u);
  EXPECT_TRUE(Exchange(*s, last).duplicate());  // the closing batch can still be re-sent
  v1::IngestAck after = Exchange(*s, WriteBatch("a", 2, 2, 1));
  EXPECT_EQ(after.durable_seq(), 1u);
  ASSERT_EQ(after.refusals_size(), 1);
  EXPECT_EQ(after.refusals(0).reason(), v1::STREAM_CLOSED);
  EXPECT_TRUE(Finish(*s).ok());
  EXPECT_EQ(sink_.batches().size(), 1u);
}

TEST_F(ServiceTest, ProtocolErrorsEndTheStream) {
  auto s = Open();
  v1::IngestBatch zero = WriteBatch("a", 0, 1, 1);
  EXPECT_TRUE(s->rw->Write(zero));
  v1::IngestAck ack;
  EXPECT_FALSE(s->rw->Read(&ack));
  EXPECT_EQ(s->rw->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext context;
  v1::IngestAck reply;
  grpc::Status status = stub_->Push(&context, WriteBatch("", 1, 1, 1), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(sink_.batches().empty());
}

TEST_F(ServiceTest, PushAppliesOneBatch) {
  grpc::ClientContext context;
  v1::IngestAck ack;
  ASSERT_TRUE(stub_->Push(&context, WriteBatch("p", 1, 1, 2), &ack).ok());
  EXPECT_EQ(ack.durable_seq(), 1u);
  grpc::ClientContext again;
  ASSERT_TRUE(stub_->Push(&again, WriteBatch("p", 1, 1, 2), &ack).ok());
  EXPECT_TRUE(ack.duplicate());
  EXPECT_EQ(sink_.batches().size(), 1u);
}

TEST_F(ServiceTest, PushToAFullQueueIsResourceExhaustedWithRetryAdvice) {
  server_->Shutdown(absl::Now());
  service_options_.retry_after = absl::Milliseconds(20);
  Start(0);
  sink_.SetFull(true);
  grpc::ClientContext context;
  v1::IngestAck ack;
  grpc::Status status = stub_->Push(&context, WriteBatch("p", 1, 1, 2), &ack);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("retry-after-ms"), std::string::npos)
      << status.error_message();
  auto it = context.GetServerTrailingMetadata().find(kRetryAfterMetadataKey);
  ASSERT_NE(it, context.GetServerTrailingMetadata().end());
  EXPECT_EQ(std::string(it->second.data(), it->second.size()), "20");
  EXPECT_EQ(Load(server_->counters().push_rejected_busy), 1u);
  EXPECT_TRUE(sink_.batches().empty());

  // PushBatch honours the advice: it keeps trying until the queue has room.
  PushStats stats;
  absl::StatusOr<v1::IngestAck> pushed;
  std::thread pusher([&] {
    ClientOptions options;
    options.deadline = kWait;
    pushed = PushBatch(*stub_, WriteBatch("p", 1, 1, 2), options, &stats);
  });
  const absl::Time until = absl::Now() + kWait;
  while (sink_.rejected() < 3 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  sink_.SetFull(false);
  pusher.join();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->durable_seq(), 1u);
  EXPECT_GE(stats.resource_exhausted, 2u);
  EXPECT_EQ(stats.attempts, stats.resource_exhausted + 1);
  EXPECT_EQ(sink_.batches().size(), 1u);
  // The ids of the refused attempts were not remembered: the batch's transactions were accepted.
  EXPECT_EQ(sink_.batches()[0].accepted.size(), 2u);
}

TEST_F(ServiceTest, HealthIsServingUntilDrained) {
  EXPECT_EQ(CheckHealth(channel_, "", kWait).value_or(ServingStatus::kUnknown),
            ServingStatus::kServing);
  EXPECT_EQ(CheckHealth(channel_, "isowatch.v1.Ingest", kWait).value_or(ServingStatus::kUnknown),
            ServingStatus::kServing);
  EXPECT_EQ(CheckHealth(channel_, "no.such.Service", kWait).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(server_->Drain(absl::Now() + kWait));
  EXPECT_EQ(CheckHealth(channel_, "", kWait).value_or(ServingStatus::kUnknown),
            ServingStatus::kNotServing);
  grpc::ClientContext context;
  v1::IngestAck ack;
  EXPECT_EQ(stub_->Push(&context, WriteBatch("p", 1, 1, 1), &ack).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(sink_.batches().empty());
}

TEST_F(ServiceTest, DrainWaitsForTheBatchInProgress) {
  sink_.SetFull(true);
  auto s = Open();
  ASSERT_TRUE(s->rw->Write(WriteBatch("a", 1, 1, 1)));
  ASSERT_TRUE(sink_.AwaitWaiting(1, kWait));
  // The batch is stuck in the sink: draining cannot finish before the deadline.
  EXPECT_FALSE(server_->Drain(absl::Now() + absl::Milliseconds(50)));
  sink_.SetFull(false);
  EXPECT_TRUE(server_->Drain(absl::Now() + kWait));
  v1::IngestAck ack;
  ASSERT_TRUE(s->rw->Read(&ack));  // the batch in progress was finished and acknowledged
  EXPECT_EQ(ack.durable_seq(), 1u);
  server_->Shutdown(absl::Now() + kWait);
  server_.reset();
  EXPECT_FALSE(s->rw->Read(&ack));
  EXPECT_FALSE(s->rw->Finish().ok());
}

}  // namespace
}  // namespace isowatch::ingest
