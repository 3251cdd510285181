// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include <grpcpp/security/server_credentials.h>

#include "isowatch/common/credentials.h"

namespace isowatch::ingest {

// Who may call the ingest server (docs/security.md). A plain value.
struct ServerSecurity {
  // TLS: the server's certificate chain and key, and for mutual TLS the CA that signed the
  // collectors' certificates. Not enabled: plaintext.
  TlsCredentials tls;
  // The bearer token every call must carry (metadata `authorization: Bearer TOKEN`); empty: none.
  // REQUIRES: TLS, when set.
  std::string token;
};

// The credentials StartIngestServer listens with: plaintext, TLS, or mutual TLS (a client CA:
// a collector without a certificate that CA signed fails the handshake), and with a token, an
// AuthMetadataProcessor that fails every call without it, the health service's included, with
// UNAUTHENTICATED, and takes the token out of the metadata the handlers see. Tokens are compared
// in constant time (TokensMatch). Errors: InvalidArgument for a token without TLS.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurity& security);

}  // namespace isowatch::ingest
