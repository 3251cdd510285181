// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <grpcpp/channel.h>

namespace isowatch::ingest {

// The answer of the standard health service (grpc.health.v1.HealthCheckResponse.ServingStatus).
enum class ServingStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// Asks the server behind `channel` for the health of `service` ("" for the server as a whole)
// with grpc.health.v1.Health/Check, waiting at most `timeout`. Errors: the RPC's (NOT_FOUND for a
// service the server does not know, UNAVAILABLE when it cannot be reached, ...). Thread-safe.
absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout);

}  // namespace isowatch::ingest
