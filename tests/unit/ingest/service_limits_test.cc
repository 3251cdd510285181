// SPDX-License-Identifier: Apache-2.0
// The ingest service's answers to misuse: messages that do not parse, and more streams than
// IngestServiceOptions::max_streams.
#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>

#include "isowatch/ingest/memory_id_registry.h"
#include "isowatch/ingest/service.h"

#include "tests/unit/ingest/fake_batch_sink.h"
#include "tests/unit/ingest/txn_builder.h"

namespace isowatch::ingest {
namespace {

using testing::WriteBatch;

class ServiceLimitsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Now() + absl::Seconds(5));
  }

  void Start(IngestServiceOptions service_options = {}) {
    if (server_) server_->Shutdown(absl::Now());
    IngestServerOptions options;
    options.service = std::move(service_options);
    auto server = StartIngestServer(options, sink_, &registry_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::Ingest::NewStub(channel_);
  }

  grpc::Status Push(const v1::IngestBatch& batch, v1::IngestAck* ack) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return stub_->Push(&context, batch, ack);
  }

  FakeBatchSink sink_;
  MemoryIdRegistry registry_;
  std::unique_ptr<IngestServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

TEST_F(ServiceLimitsTest, PushOfBytesThatDoNotParseIsInvalidArgument) {
  Start();
  grpc::GenericStub generic(channel_);
  const std::string garbage = "\xff\xff\xff\xff\xff\xff";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&context, "/isowatch.v1.Ingest/Push", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("not an isowatch.v1.IngestBatch"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(sink_.batches().empty());

  // A well-formed Push still works after it.
  v1::IngestAck ack;
  ASSERT_TRUE(Push(WriteBatch("p", 1, 1, 2), &ack).ok());
  EXPECT_EQ(ack.durable_seq(), 1u);
}

TEST_F(ServiceLimitsTest, OneStreamMoreThanMaxStreamsIsRefusedBeforeItsAck) {
  Start(IngestServiceOptions{.max_streams = 2});
  v1::IngestAck ack;
  ASSERT_TRUE(Push(WriteBatch("a", 1, 1, 1), &ack).ok());
  ASSERT_TRUE(Push(WriteBatch("b", 1, 2, 1), &ack).ok());

  grpc::Status refused = Push(WriteBatch("c", 1, 3, 1), &ack);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("ingest.max_streams"), std::string::npos)
      << refused.error_message();
  // The streaming RPC gets the same answer, and nothing of either batch is kept.
  grpc::ClientContext context;
  auto rw = stub_->Stream(&context);
  ASSERT_TRUE(rw->Write(WriteBatch("d", 1, 4, 1)));
  EXPECT_FALSE(rw->Read(&ack));
  rw->WritesDone();
  EXPECT_EQ(rw->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(sink_.batches().size(), 2u);
  EXPECT_EQ(server_->counters().streams_refused.load(), 2u);

  // The streams it has keep working.
  ASSERT_TRUE(Push(WriteBatch("a", 2, 5, 1), &ack).ok());
  EXPECT_EQ(ack.durable_seq(), 2u);
  EXPECT_EQ(sink_.batches().size(), 3u);
}

TEST_F(ServiceLimitsTest, StreamsTheSinkHoldsCountTowardsMaxStreams) {
  Start();
  v1::IngestAck ack;
  ASSERT_TRUE(Push(WriteBatch("old", 1, 1, 1), &ack).ok());
  // After a restart the service knows the sink's streams.
  Start(IngestServiceOptions{.max_streams = 2, .known_streams = {"old", "older"}});
  EXPECT_EQ(Push(WriteBatch("new", 1, 2, 1), &ack).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(Push(WriteBatch("old", 2, 3, 1), &ack).ok());
  ASSERT_TRUE(Push(WriteBatch("older", 1, 4, 1), &ack).ok());
}

}  // namespace
}  // namespace isowatch::ingest
