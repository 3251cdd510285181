// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/status.h"
#include <grpcpp/support/status.h>

namespace isowatch::ingest {

// The adapters between absl::Status and grpc::Status: the code (both use the canonical codes) and
// the message. Details and payloads are not carried.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace isowatch::ingest
