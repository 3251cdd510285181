// SPDX-License-Identifier: Apache-2.0
//
// The health service's messages are not compiled here: HealthCheckRequest is one string field
// numbered 1 and HealthCheckResponse one enum field numbered 1, which on the wire are exactly
// google.protobuf.StringValue and google.protobuf.Int32Value, so those stand in for them.
#include "isowatch/ingest/health_check.h"

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/status.h>

#include "isowatch/ingest/grpc_status.h"

namespace isowatch::ingest {

absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout) {
  grpc::TemplatedGenericStub<google::protobuf::StringValue, google::protobuf::Int32Value> stub(
      channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  google::protobuf::StringValue request;
  request.set_value(service);
  google::protobuf::Int32Value response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&status, &done](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status);
  switch (response.value()) {
    case 1:
      return ServingStatus::kServing;
    case 2:
      return ServingStatus::kNotServing;
    case 3:
      return ServingStatus::kServiceUnknown;
    default:
      break;
  }
  return ServingStatus::kUnknown;
}

}  // namespace isowatch::ingest
