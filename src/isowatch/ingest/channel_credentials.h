// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include <grpcpp/security/credentials.h>

namespace isowatch::ingest {

// How a collector reaches an ingest server that asks for TLS, a client certificate or a token
// (docs/security.md): files, as a command line names them. A plain value.
struct ChannelSecurity {
  bool tls = false;         // connect with TLS; implied by any of the files below
  std::string ca_file;      // CA bundle (PEM) to verify the server with; empty: the system's
  std::string cert_file;    // client certificate chain (PEM), for mutual TLS; with key_file
  std::string key_file;     // its private key (PEM)
  std::string token_file;   // bearer token sent with every call; needs TLS
  std::string server_name;  // name to verify the server's certificate for; empty: the target's
};

// What a channel is built with (MakeIngestChannel): its credentials (null: plaintext) and the
// name the server's certificate must carry when it is not the target's host. A plain value.
struct ChannelAuth {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string server_name;
};

// Reads the files of `security` and builds the channel's credentials: plaintext when it asks
// for nothing; otherwise TLS with the CA (or the system's roots), the client certificate and the
// token (sent as `authorization: Bearer TOKEN` on every call). Errors: NotFound /
// PermissionDenied / InvalidArgument for a file that cannot be read or is not what it should be
// (each named), InvalidArgument for a certificate without its key or the other way round.
absl::StatusOr<ChannelAuth> MakeChannelAuth(const ChannelSecurity& security);

}  // namespace isowatch::ingest
